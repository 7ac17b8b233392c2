// The ACS names the request a Response answers (CONTRACT §31): by its RelayState, which must be a
// request this gateway stored for this very connection, and by InResponseTo, which must be that
// request's ID; a request is used once. Each refusal is audited and logged with its rule. And the
// start's and the ACS's own refusals: a challenge that is not S256, no connection, a post that is
// not the form a browser sends.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { closeSql, describeWithServices, loggedLines, sql, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { holdRows } from '../helpers/rowLock.js';
import { responseXml, signResponse } from '../helpers/samlIdp.js';
import { connect, FORM, fragmentOf, goodSpec, postAcs, RETURN_TO, signIn, ssoConfig, startSignIn, type Connected } from './samlHelpers.js';

describeWithServices('SAML: the request a Response answers', () => {
  let gw: TestGateway;
  let c: Connected;
  let elsewhere: Connected;
  beforeAll(async () => {
    gw = await startTestGateway(ssoConfig());
    c = await connect(gw, { allowJit: true });
    elsewhere = await connect(gw, { allowJit: true });
  });
  afterAll(async () => {
    await gw?.close();
    await closeSql();
  });

  const signed = (connected: Connected, spec: ReturnType<typeof goodSpec>) => signResponse(responseXml(spec).xml, connected.keys);

  /** The last refusal audited for the connection: its code and rule; and the log line said the same. */
  async function lastRefusal(connected: Connected): Promise<{ code: unknown; rule: unknown }> {
    const [event] = await sql<{ data: Record<string, unknown> }>(
      "SELECT data FROM audit_events WHERE type = 'sso.login_failed' AND data->>'connection_id' = $1 ORDER BY id DESC LIMIT 1", [connected.connection.id]);
    const logged = loggedLines(gw, 'SAML sign-in refused').at(-1);
    expect(logged).toMatchObject({ connection: connected.connection.id, code: event!.data.code, rule: event!.data.rule });
    return { code: event!.data.code, rule: event!.data.rule };
  }

  const BAD_REQUEST = [400, 'bad_request'];
  const nobodyIs = async (email: string) => expect(await sql('SELECT 1 FROM users WHERE email = $1', [email])).toEqual([]);

  it('a RelayState this gateway never made: 400, rule unknown_request', async () => {
    const started = await startSignIn(gw, c);
    const spec = goodSpec(c, started);
    const res = await postAcs(gw, c, signed(c, spec), 'not-a-relay-state');
    expect([res.status, res.json.code]).toEqual(BAD_REQUEST);
    expect(await lastRefusal(c)).toEqual({ code: 'saml_invalid', rule: 'unknown_request' });
    await nobodyIs(spec.nameId);
  });

  it('an InResponseTo that is not the stored request\'s ID, or none with a RelayState: 400, rule unknown_request', async () => {
    for (const inResponseTo of ['_another-request', undefined]) {
      const started = await startSignIn(gw, c);
      const spec = goodSpec(c, started, { inResponseTo });
      const res = await postAcs(gw, c, signed(c, spec), started.relayState);
      expect([String(inResponseTo), res.status, res.json.code]).toEqual([String(inResponseTo), ...BAD_REQUEST]);
      expect(await lastRefusal(c)).toEqual({ code: 'saml_invalid', rule: 'unknown_request' });
      await nobodyIs(spec.nameId);
    }
  });

  it('another connection\'s request, answered by this connection\'s IdP with its ID: 400, nobody signed in', async () => {
    // The browser went to the other organization's IdP; this IdP's Response (signed by it, for
    // this connection) names that request and carries its RelayState.
    const theirs = await startSignIn(gw, elsewhere);
    const spec = goodSpec(c, theirs);
    const res = await postAcs(gw, c, signed(c, spec), theirs.relayState);
    expect([res.status, res.json.code]).toEqual(BAD_REQUEST);
    expect(await lastRefusal(c)).toEqual({ code: 'saml_invalid', rule: 'unknown_request' });
    await nobodyIs(spec.nameId);
  });

  it('a request answered twice: once used, its RelayState is unknown (400); two Responses at once: one signs in, the other goes back to return_to#error=saml_invalid, rule request_used', async () => {
    const { started, spec, res } = await signIn(gw, c);
    expect(fragmentOf(res.headers.location).login_code).toEqual(expect.any(String));
    const later = await postAcs(gw, c, signed(c, { ...spec, nameId: `later-${spec.nameId}` }), started.relayState);
    expect([later.status, later.json.code]).toEqual(BAD_REQUEST);
    expect(await lastRefusal(c)).toEqual({ code: 'saml_invalid', rule: 'unknown_request' });
    // Two at once: both find the request, then wait on its row while this test holds it.
    const twice = await startSignIn(gw, c);
    const row = await holdRows('SELECT 1 FROM saml_requests WHERE request_id = $1 FOR UPDATE', [twice.requestId]);
    const answers = Promise.all([goodSpec(c, twice), goodSpec(c, twice)].map((each) => postAcs(gw, c, signed(c, each), twice.relayState)));
    try {
      await row.waiters(2);
    } finally {
      await row.release();
    }
    const fragments = (await answers).map((r) => fragmentOf(r.headers.location));
    expect(fragments.map((f) => Object.keys(f)[0]).sort()).toEqual(['error', 'login_code']);
    expect(fragments.find((f) => f.error)).toEqual({ error: 'saml_invalid' });
    expect(await lastRefusal(c)).toEqual({ code: 'saml_invalid', rule: 'request_used' });
  });

  it('unsolicited with IdP-initiated off: rule unsolicited; the same signed Response posted twice with it on: rule replay', async () => {
    const spec = goodSpec(c, undefined);
    expect((await postAcs(gw, c, signed(c, spec))).status).toBe(400);
    expect(await lastRefusal(c)).toEqual({ code: 'saml_invalid', rule: 'unsolicited' });
    const open = await connect(gw, { allowIdpInitiated: true, idpInitiatedUrl: 'https://app.example.test/sso-start' });
    const xml = signed(open, goodSpec(open, undefined));
    // Unsolicited is no InResponseTo and no RelayState: one it never made is refused, not let through.
    const relayed = await postAcs(gw, open, signed(open, goodSpec(open, undefined)), 'not-a-relay-state');
    expect([relayed.status, relayed.json.code]).toEqual(BAD_REQUEST);
    expect(await lastRefusal(open)).toEqual({ code: 'saml_invalid', rule: 'unknown_request' });
    expect((await postAcs(gw, open, xml)).status).toBe(302);
    expect((await postAcs(gw, open, xml)).status).toBe(400);
    expect(await lastRefusal(open)).toEqual({ code: 'saml_invalid', rule: 'replay' });
  });

  it('the start: a challenge that is not S256, or another method, is 400; an unknown organization 404; the redirect is never cached', async () => {
    const start = (query: string) => gw.get(`/api/v1/auth/sso?org=${c.orgId}&return_to=${encodeURIComponent(RETURN_TO)}&${query}`);
    const challenge = 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM';
    for (const query of [`code_challenge=${challenge}&code_challenge_method=plain`, 'code_challenge=too-short', '']) {
      const res = await start(query);
      expect([query, res.status, res.json.code]).toEqual([query, ...BAD_REQUEST]);
    }
    const ok = await start(`code_challenge=${challenge}&code_challenge_method=S256`);
    expect([ok.status, ok.headers['cache-control']]).toEqual([302, 'no-store']);
    const unknown = await gw.get(`/api/v1/auth/sso?org=999999999&return_to=${encodeURIComponent(RETURN_TO)}&code_challenge=${challenge}`);
    expect(unknown.status).toBe(404);
    const metadata = new URL(c.connection.acs_url).pathname.replace(/\/saml\/[^/]+\/acs$/, '/saml/999999999/metadata');
    expect((await gw.get(metadata)).status).toBe(404);
  });

  it('the ACS: a Response not posted as a form, none at all, or to no connection is 400; nothing is audited', async () => {
    const started = await startSignIn(gw, c);
    const xml = signed(c, goodSpec(c, started));
    const before = await sql("SELECT count(*)::int AS n FROM audit_events WHERE type = 'sso.login_failed'");
    const path = new URL(c.connection.acs_url).pathname;
    const asJson = await gw.request('POST', path, { json: { SAMLResponse: Buffer.from(xml).toString('base64'), RelayState: started.relayState } });
    const empty = await gw.request('POST', path, { headers: FORM, body: new URLSearchParams({ RelayState: started.relayState }).toString() });
    const nowhere = await gw.request('POST', path.replace(/\/saml\/[^/]+\//, '/saml/999999999/'), { headers: FORM, body: new URLSearchParams({ SAMLResponse: Buffer.from(xml).toString('base64') }).toString() });
    for (const res of [asJson, empty, nowhere]) expect([res.status, res.json.code]).toEqual(BAD_REQUEST);
    expect(await sql("SELECT count(*)::int AS n FROM audit_events WHERE type = 'sso.login_failed'")).toEqual(before);
    // The request is still unused: the browser's own post signs in.
    expect(fragmentOf((await postAcs(gw, c, xml, started.relayState)).headers.location).login_code).toEqual(expect.any(String));
  });
});

// Every refusal of the ACS (CONTRACT §31) against a scripted IdP: a Response that breaks one rule is
// sent back to return_to#error= (saml_invalid, access_denied, account_not_allowed) once RelayState
// and InResponseTo name a stored request, else 400 JSON; nobody is signed in, the audit names the
// rule; a DTD reads no file and makes no request; a replay on the other instance is refused. And
// the one unsolicited Response accepted: with allowIdpInitiated, it only sends the browser on.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import fc from 'fast-check';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { claims, closeSql, describeWithServices, sql, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { newIdpKeys, responseXml, signAssertion, signResponse } from '../helpers/samlIdp.js';
import { connect, fragmentOf, goodSpec, postAcs, RETURN_TO, ssoConfig, startSignIn, type Connected } from './samlHelpers.js';

describeWithServices('SAML ACS refusals', () => {
  let gw: TestGateway;
  let other: TestGateway;
  let c: Connected;
  let probe: Server;
  let probeHits = 0;
  beforeAll(async () => {
    const config = ssoConfig();
    [gw, other] = [await startTestGateway(config), await startTestGateway(config)];
    c = await connect(gw, { allowJit: true });
    probe = createServer((_req, res) => { probeHits++; res.end('x'); });
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  });
  afterAll(async () => {
    probe?.close();
    await gw?.close();
    await other?.close();
    await closeSql();
  });

  /** Starts a sign-in, lets `forge` write the posted XML, posts it: the error the application reads, and the rule audited. */
  async function refusedWith(forge: (spec: ReturnType<typeof goodSpec>) => string, target = gw): Promise<{ error: string | undefined; status: number }> {
    const started = await startSignIn(gw, c);
    const res = await postAcs(target, c, forge(goodSpec(c, started)), started.relayState);
    if (res.status === 302) {
      const fragment = fragmentOf(res.headers.location);
      expect(String(res.headers.location).startsWith(RETURN_TO)).toBe(true);
      expect(fragment.login_code).toBeUndefined();
      return { error: fragment.error, status: 302 };
    }
    expect([res.status, res.json.code]).toEqual([400, 'bad_request']);
    return { error: undefined, status: res.status };
  }

  const other_keys = newIdpKeys();
  const signed = (spec: ReturnType<typeof goodSpec>) => signResponse(responseXml(spec).xml, c.keys);

  it.each([
    ['unsigned', 'library: Invalid', (s: ReturnType<typeof goodSpec>) => responseXml(s).xml],
    ['SHA-1', 'sha1', (s: ReturnType<typeof goodSpec>) => signResponse(responseXml(s).xml, c.keys, 'sha1')],
    ['signed with another key (another connection\'s certificate)', 'library: Invalid', (s: ReturnType<typeof goodSpec>) => signResponse(responseXml(s).xml, other_keys)],
    ['wrong audience', 'library: SAML assertion audience mismatch', (s: ReturnType<typeof goodSpec>) => signed({ ...s, audience: 'https://elsewhere.test/metadata' })],
    ['wrong destination', 'destination', (s: ReturnType<typeof goodSpec>) => signed({ ...s, destination: 'https://elsewhere.test/acs' })],
    ['wrong recipient', 'recipient', (s: ReturnType<typeof goodSpec>) => signed({ ...s, recipient: 'https://elsewhere.test/acs' })],
    ['another Issuer', 'response_issuer', (s: ReturnType<typeof goodSpec>) => signed({ ...s, issuer: 'https://other-idp.test' })],
    ['expired', 'issue_instant', (s: ReturnType<typeof goodSpec>) => signed({ ...s, shiftMs: -20 * 60_000 })],
    ['not yet valid', 'issue_instant', (s: ReturnType<typeof goodSpec>) => signed({ ...s, shiftMs: 10 * 60_000 })],
    ['an Assertion without an ID (the Response signed)', 'no_assertion_id', (s: ReturnType<typeof goodSpec>) =>
      signResponse(responseXml(s).xml.replace(/(<saml:Assertion[^>]*?) ID="[^"]*"/, '$1'), c.keys)],
    ['wrapped: a forged assertion before the signed one', 'assertion_count', (s: ReturnType<typeof goodSpec>) => {
      const good = signAssertion(responseXml(s).xml, c.keys);
      const forged = responseXml({ ...s, nameId: `ceo@${c.domain}` }).xml.match(/<saml:Assertion[\s\S]*<\/saml:Assertion>/)![0];
      return good.replace('<saml:Assertion ', `${forged}<saml:Assertion `);
    }],
    ['wrapped: a forged assertion after the signed one', 'assertion_count', (s: ReturnType<typeof goodSpec>) => {
      const good = signAssertion(responseXml(s).xml, c.keys);
      const forged = responseXml({ ...s, nameId: `ceo@${c.domain}` }).xml.match(/<saml:Assertion[\s\S]*<\/saml:Assertion>/)![0];
      return good.replace('</samlp:Response>', `${forged}</samlp:Response>`);
    }],
    ['wrapped: the signed assertion moved into Extensions, a forged one in its place', 'assertion_count', (s: ReturnType<typeof goodSpec>) => {
      const good = signAssertion(responseXml(s).xml, c.keys);
      const original = good.match(/<saml:Assertion[\s\S]*<\/saml:Assertion>/)![0];
      const forged = responseXml({ ...s, nameId: `ceo@${c.domain}` }).xml.match(/<saml:Assertion[\s\S]*<\/saml:Assertion>/)![0];
      return good.replace(original, `<samlp:Extensions>${original}</samlp:Extensions>${forged}`);
    }],
    ['wrapped: a signed Response with an unsigned forged assertion added', 'assertion_count', (s: ReturnType<typeof goodSpec>) => {
      const good = signResponse(responseXml(s).xml, c.keys);
      const forged = responseXml({ ...s, nameId: `ceo@${c.domain}` }).xml.match(/<saml:Assertion[\s\S]*<\/saml:Assertion>/)![0];
      return good.replace('</samlp:Response>', `${forged}</samlp:Response>`);
    }],
  ])('%s → #error=saml_invalid (rule %s), nobody signed in', async (_name, rule, forge) => {
    expect(await refusedWith(forge)).toEqual({ error: 'saml_invalid', status: 302 });
    const [event] = await sql<{ data: Record<string, unknown> }>(
      "SELECT data FROM audit_events WHERE type = 'sso.login_failed' AND data->>'connection_id' = $1 ORDER BY id DESC LIMIT 1", [c.connection.id]);
    expect(String(event!.data.rule).startsWith(rule)).toBe(true);
    expect(await sql("SELECT 1 FROM users WHERE email = $1", [`ceo@${c.domain}`])).toEqual([]);
  });

  it('a Status other than Success → #error=access_denied', async () => {
    expect(await refusedWith((s) => signed({ ...s, status: 'urn:oasis:names:tc:SAML:2.0:status:Responder' }))).toEqual({ error: 'access_denied', status: 302 });
  });

  it('a comment inside NameID reads the whole text: a@corp<!---->.evil.test is not an address of the verified domain → account_not_allowed', async () => {
    const result = await refusedWith((s) => signed({ ...s, nameId: `a@${c.domain}<!---->.evil.test` }));
    expect(result).toEqual({ error: 'account_not_allowed', status: 302 });
    expect(await sql('SELECT 1 FROM users WHERE email = $1', [`a@${c.domain}`])).toEqual([]);
  });

  it('an email outside the verified domains → account_not_allowed, audited with the rule', async () => {
    expect(await refusedWith((s) => signed({ ...s, nameId: 'someone@elsewhere.test' }))).toEqual({ error: 'account_not_allowed', status: 302 });
    const [event] = await sql<{ data: Record<string, unknown> }>(
      "SELECT data FROM audit_events WHERE type = 'sso.login_failed' AND data->>'connection_id' = $1 ORDER BY id DESC LIMIT 1", [c.connection.id]);
    expect(event!.data).toMatchObject({ code: 'account_not_allowed', rule: 'email_not_allowed', org_id: c.orgId });
  });

  it('a DTD with external entities is refused before parsing: 400, no file read, no request made', async () => {
    const url = `http://127.0.0.1:${(probe.address() as AddressInfo).port}/entity`;
    const result = await refusedWith((s) => `<?xml version="1.0"?><!DOCTYPE r [<!ENTITY a SYSTEM "${url}"><!ENTITY b SYSTEM "file:///etc/passwd">]>`
      + signed({ ...s, nameId: `&b;&a;x@${c.domain}` }).replace(/^<\?xml[^>]*\?>/, ''));
    expect(result.status).toBe(400);
    expect(probeHits).toBe(0);
  });

  it('an unsolicited Response (no RelayState, no InResponseTo) with IdP-initiated off → 400 JSON', async () => {
    const res = await postAcs(gw, c, signed(goodSpec(c, undefined)));
    expect([res.status, res.json.code]).toEqual([400, 'bad_request']);
  });

  it('IdP-initiated on: an unsolicited signed Response signs nobody in, goes to idpInitiatedUrl#sso_org=, is used up; the SP-initiated sign-in from there works (aal1: trustIdpMfa off)', async () => {
    const mfaContext = 'https://refeds.org/profile/mfa';
    const idp = await connect(gw, { allowIdpInitiated: true, idpInitiatedUrl: 'https://app.example.test/sso-start', mfaContexts: [mfaContext] });
    const spec = goodSpec(idp, undefined);
    const xml = signResponse(responseXml(spec).xml, idp.keys);
    const res = await postAcs(gw, idp, xml);
    expect([res.status, res.headers.location]).toEqual([302, `https://app.example.test/sso-start#sso_org=${idp.orgId}`]);
    expect(await sql('SELECT 1 FROM users WHERE email = $1', [spec.nameId])).toEqual([]);
    // Consumed: the same post again, on the other instance, is a replay.
    expect((await postAcs(other, idp, xml)).status).toBe(400);
    // The application starts an SP-initiated sign-in for sso_org; the IdP answers it without a prompt.
    const started = await startSignIn(gw, idp);
    const back = await postAcs(gw, idp, signResponse(responseXml({ ...spec, inResponseTo: started.requestId, authnContext: mfaContext }).xml, idp.keys), started.relayState);
    const pair = await gw.post('/api/v1/auth/oidc/exchange', { login_code: fragmentOf(back.headers.location).login_code, code_verifier: started.verifier });
    expect(pair.status, pair.text).toBe(200);
    // The IdP asserted a listed MFA context, but the operator does not trust IdPs' MFA here.
    expect(claims(pair.json.access_token)).toMatchObject({ email: spec.nameId, amr: ['fed'], acr: 'aal1' });
  });

  it('the same Response posted on both instances at once signs in once; the other is refused', async () => {
    const started = await startSignIn(gw, c);
    const xml = signed(goodSpec(c, started));
    const answers = await Promise.all([postAcs(gw, c, xml, started.relayState), postAcs(other, c, xml, started.relayState)]);
    const outcomes = answers.map((r) => (r.status === 302 ? Object.keys(fragmentOf(r.headers.location))[0] : String(r.status))).sort();
    expect(outcomes.filter((o) => o === 'login_code')).toHaveLength(1);
    expect(outcomes.every((o) => o === 'login_code' || o === 'error' || o === '400')).toBe(true);
    // And once more on the other instance, later: refused.
    expect((await postAcs(other, c, xml, started.relayState)).status).toBe(400);
  });

  it('property: a signed Response mutated anywhere is never accepted and never gets a 5xx', async () => {
    const started = await startSignIn(gw, c);
    const xml = signAssertion(responseXml(goodSpec(c, started)).xml, c.keys);
    await fc.assert(fc.asyncProperty(fc.integer({ min: 0, max: xml.length - 2 }), fc.integer({ min: 1, max: 40 }), fc.constantFrom('flip', 'cut', 'dup'), async (at, len, how) => {
      const piece = xml.slice(at, at + len);
      const mutated = how === 'cut' ? xml.slice(0, at) + xml.slice(at + len)
        : how === 'dup' ? xml.slice(0, at) + piece + xml.slice(at)
          : xml.slice(0, at) + (xml[at] === 'a' ? 'b' : 'a') + xml.slice(at + 1);
      if (mutated === xml) return;
      // Each try on a fresh request, so that only the mutation can make it fail.
      const fresh = await startSignIn(gw, c);
      const res = await postAcs(gw, c, mutated.replaceAll(started.requestId, fresh.requestId), fresh.relayState);
      expect(res.status).toBeLessThan(500);
      if (res.status === 302) expect(fragmentOf(res.headers.location).login_code).toBeUndefined();
    }), { numRuns: 40 });
  });
});

// Passkeys (CONTRACT §14) through the HTTP API, on two instances sharing one database, with an
// authenticator in software (helpers/softAuthenticator.ts) that answers as a browser would, or
// misbehaves on purpose. The same flows run in Chromium in test/browser/passkeys.test.ts.
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  bearer, claims, closeSql, configProblems, describeWithServices, everywhereWithin, loggedLines, makeUser, marker, sql, startTestGateway, startTwoGateways,
  testClock, testConfig, type TestGateway, type TestUser,
} from '../helpers/gateway.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import { registerWebhook, startReceiver, verifiedEvent, type Receiver } from '../helpers/webhookReceiver.js';
import { authenticate, register, type CeremonyOptions, type SoftCredential } from '../helpers/softAuthenticator.js';

const RP = { rpId: 'app.example.test', rpName: 'Example', origins: ['https://app.example.test'] };
const ORIGIN = { origin: 'https://app.example.test' };
const REGISTER_OPTIONS = '/api/v1/auth/passkeys/register/options';
const REGISTER = '/api/v1/auth/passkeys/register/verify';
const LOGIN_OPTIONS = '/api/v1/auth/passkeys/login/options';
const LOGIN = '/api/v1/auth/passkeys/login/verify';
const INVALID = { error: 'Clé d\'accès invalide' };
const REFUSED = { error: 'Identifiants invalides' };
const RECENT = { error: 'Authentification récente requise' };
const NOT_FOUND = { error: 'Clé d\'accès introuvable' };

describeWithServices('passkeys', () => {
  let a: TestGateway;
  let b: TestGateway;
  let upstream: EchoUpstream;
  let receiver: Receiver;
  const clock = testClock();

  beforeAll(async () => {
    [upstream, receiver] = await Promise.all([startEchoUpstream(), startReceiver()]);
    [a, b] = await startTwoGateways(testConfig({
      auth: { passkeys: RP },
      upstreams: { app: { url: upstream.url } },
      routes: [{ path: '/billing', upstream: 'app', mfa: 'required' }],
    }), { clock });
  });
  afterAll(async () => {
    await Promise.all([a?.close(), b?.close()]);
    await Promise.all([upstream?.close(), receiver?.close()]);
    await closeSql();
  });

  /** Registers a passkey for the user through `gw` with an access token; the 201 and the credential. */
  async function addPasskey(access: string, ceremony: CeremonyOptions = ORIGIN, gw = a, name?: string) {
    const options = await gw.post(REGISTER_OPTIONS, {}, { headers: bearer(access) });
    expect(options.status).toBe(200);
    const { response, credential } = register(options.json, ceremony);
    const res = await (gw === a ? b : a).post(REGISTER, { ...response, name }, { headers: bearer(access) });
    return { res, credential };
  }
  /** Signs in with the credential: fresh options from one instance, the answer to the other. */
  async function signIn(credential: SoftCredential, ceremony: CeremonyOptions = ORIGIN) {
    const options = await b.post(LOGIN_OPTIONS, {});
    expect(options.status).toBe(200);
    const answer = authenticate(options.json, credential, ceremony);
    return { res: await a.post(LOGIN, answer), answer };
  }
  async function userWithPasskey(): Promise<{ user: TestUser; credential: SoftCredential; id: number }> {
    const user = await makeUser(a);
    const { res, credential } = await addPasskey(user.access);
    expect(res.status).toBe(201);
    return { user, credential, id: res.json.id as number };
  }

  it('registers a discoverable, user-verified passkey: options, 201, listed, stored without anything secret', async () => {
    const user = await makeUser(a);
    const options = await a.post(REGISTER_OPTIONS, {}, { headers: bearer(user.access) });
    expect(options.json).toMatchObject({
      rp: { id: 'app.example.test', name: 'Example' },
      user: { name: user.email, id: Buffer.from(String(user.id)).toString('base64url') },
      challenge: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
      authenticatorSelection: { residentKey: 'required', requireResidentKey: true, userVerification: 'required' },
      attestation: 'none',
    });
    const { response, credential } = register(options.json, ORIGIN);
    const res = await b.post(REGISTER, { ...response, name: '  Téléphone  ' }, { headers: bearer(user.access) });
    expect(res.status).toBe(201);
    expect(res.json).toEqual({ id: expect.any(Number), name: 'Téléphone', created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT[\d:.]+Z$/) });
    const list = await a.get('/api/v1/user/passkeys', { headers: bearer(user.access) });
    expect(list.json).toEqual({ passkeys: [{ id: res.json.id, name: 'Téléphone', created_at: res.json.created_at, last_used_at: null }] });
    const [row] = await sql<{ credential_id: string; counter: string }>('SELECT credential_id, counter FROM passkeys WHERE user_id = $1', [user.id]);
    expect(row).toEqual({ credential_id: credential.id, counter: '0' });
    // Only the challenge's hash was kept.
    expect(await sql('SELECT 1 FROM webauthn_challenges WHERE challenge_hash = $1', [options.json.challenge])).toEqual([]);
    expect(await sql('SELECT type, data FROM audit_events WHERE user_id = $1 AND type = $2', [user.id, 'passkey.added'])).toEqual([{ type: 'passkey.added', data: { passkey_id: res.json.id } }]);
    // Offered to the authenticator as one it holds already (to a passkey sign-in: aal2 from now on).
    const passkeySignIn = (await signIn(credential)).res.json.access_token as string;
    const next = await a.post(REGISTER_OPTIONS, {}, { headers: bearer(passkeySignIn) });
    expect(next.json.excludeCredentials).toEqual([{ id: credential.id, type: 'public-key', transports: ['internal'] }]);
  });

  it('signs in with it: amr ["hwk","user"] at aal2, which passes an mfa: required route; the counter moves', async () => {
    const { user, credential } = await userWithPasskey();
    const options = await b.post(LOGIN_OPTIONS, {});
    expect(options.json).toMatchObject({ rpId: 'app.example.test', userVerification: 'required', challenge: expect.any(String) });
    expect(options.json.allowCredentials ?? []).toEqual([]);
    const res = await a.post(LOGIN, authenticate(options.json, credential, ORIGIN));
    expect(res.status).toBe(200);
    expect(res.json).toEqual({ access_token: expect.any(String), refresh_token: expect.any(String), token_type: 'Bearer', plan: 'free' });
    expect(claims(res.json.access_token)).toMatchObject({ sub: String(user.id), amr: ['hwk', 'user'], acr: 'aal2' });
    const m = marker();
    expect((await b.get(`/billing/${m}`, { headers: bearer(res.json.access_token) })).status).toBe(200);
    expect((await b.get(`/billing/${m}`, { headers: bearer(user.access) })).status).toBe(403);
    expect(upstream.count(m)).toBe(1);
    const [row] = await sql<{ counter: string; last_used_at: Date | null }>('SELECT counter, last_used_at FROM passkeys WHERE user_id = $1', [user.id]);
    expect(row).toEqual({ counter: '1', last_used_at: expect.any(Date) });
    const refreshed = await b.post('/api/v1/auth/refresh', { refresh_token: res.json.refresh_token });
    expect(claims(refreshed.json.access_token)).toMatchObject({ amr: ['hwk', 'user'], acr: 'aal2' });
  });

  it('records and logs what it did: the default name, the audit rows, a credential registered twice once, a deactivated account refused', async () => {
    const user = await makeUser(a);
    const { res, credential } = await addPasskey(user.access, ORIGIN, a, '   ');
    expect([res.status, res.json.name]).toEqual([201, 'Clé d’accès']);
    expect(loggedLines(b, 'passkey registered')).toContainEqual(expect.objectContaining({ userId: user.id, passkeyId: res.json.id }));
    // A sign-in is audited with how it was made, and logged.
    const signedIn = (await signIn(credential)).res;
    expect(signedIn.status).toBe(200);
    // makeUser's sign-in with the password first.
    const logins = await sql('SELECT data FROM audit_events WHERE user_id = $1 AND type = $2 ORDER BY id', [user.id, 'login.succeeded']);
    expect(logins).toEqual([{ data: { amr: ['pwd'] } }, { data: { amr: ['hwk', 'user'] } }]);
    expect(loggedLines(a, 'login by passkey')).toContainEqual(expect.objectContaining({ userId: user.id }));
    // The same authenticator's credential offered again (one that ignores excludeCredentials): refused, kept once.
    const options = await a.post(REGISTER_OPTIONS, {}, { headers: bearer(signedIn.json.access_token) });
    const again = await b.post(REGISTER, register(options.json, { ...ORIGIN, again: credential }).response, { headers: bearer(signedIn.json.access_token) });
    expect([again.status, again.json]).toEqual([400, INVALID]);
    expect(await sql('SELECT id FROM passkeys WHERE user_id = $1', [user.id])).toEqual([{ id: res.json.id }]);
    expect(await sql('SELECT data FROM audit_events WHERE user_id = $1 AND type = $2', [user.id, 'passkey.added'])).toEqual([{ data: { passkey_id: res.json.id } }]);
    // A name is cut at 100 characters.
    const long = await addPasskey(signedIn.json.access_token as string, ORIGIN, a, ` ${'n'.repeat(150)} `);
    expect([long.res.status, long.res.json.name]).toEqual([201, 'n'.repeat(100)]);
    await sql('UPDATE users SET is_active = 0 WHERE id = $1', [user.id]);
    const sessions = (await sql('SELECT id FROM sessions WHERE user_id = $1', [user.id])).length;
    expect((await signIn(credential)).res.json).toEqual(REFUSED);
    expect((await sql('SELECT id FROM sessions WHERE user_id = $1', [user.id])).length).toBe(sessions);
  });

  it('refuses a replayed answer, and of one answer sent six times at once to two instances accepts one', async () => {
    const { credential } = await userWithPasskey();
    const { res, answer } = await signIn(credential);
    expect(res.status).toBe(200);
    for (const gw of [a, b]) expect([(await gw.post(LOGIN, answer)).status, (await gw.post(LOGIN, answer)).json]).toEqual([401, REFUSED]);
    const options = await a.post(LOGIN_OPTIONS, {});
    const once = authenticate(options.json, credential, ORIGIN);
    const answers = await Promise.all(Array.from({ length: 6 }, (_, i) => (i % 2 ? a : b).post(LOGIN, once)));
    expect(answers.map((r) => r.status).sort()).toEqual([200, 401, 401, 401, 401, 401]);
  });

  it('refuses a cloned authenticator (a counter that does not grow), another origin or rpId, no user verification, an unknown credential', async () => {
    const { credential } = await userWithPasskey();
    expect((await signIn(credential, { ...ORIGIN, counter: 5 })).res.status).toBe(200);
    for (const ceremony of [{ ...ORIGIN, counter: 5 }, { ...ORIGIN, counter: 3 }, { origin: 'https://evil.example' }, { ...ORIGIN, rpId: 'example.test' }, { ...ORIGIN, verified: false }]) {
      const { res } = await signIn({ ...credential }, ceremony);
      expect([res.status, res.json], JSON.stringify(ceremony)).toEqual([401, REFUSED]);
    }
    expect((await signIn({ ...credential, id: 'AAAAAAAAAAAAAAAAAAAAAA' })).res.json).toEqual(REFUSED);
    for (const body of [{}, { id: credential.id }, { id: credential.id, response: 'x' }, { id: 42 }]) {
      const res = await a.post(LOGIN, body);
      expect([res.status, res.json], JSON.stringify(body)).toEqual([401, REFUSED]);
    }
    const bodiless = await a.request('POST', LOGIN);
    expect([bodiless.status, bodiless.json], 'no body').toEqual([401, REFUSED]);
    // Still good for its owner, with a counter past the last one.
    expect((await signIn(credential, { ...ORIGIN, counter: 6 })).res.status).toBe(200);
  });

  it('logs a refused ceremony with its owner and the library\'s reason, cut at 200 characters, never the answer', async () => {
    const { user, credential } = await userWithPasskey();
    const longOrigin = { origin: `https://${'e'.repeat(300)}.example` };
    const logged = (gw: TestGateway, res: { headers: Record<string, unknown> }, msg: string) =>
      gw.logs.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.reqId === res.headers['x-request-id'] && l.msg === msg);
    const { res, answer } = await signIn(credential, longOrigin);
    expect([res.status, res.json]).toEqual([401, REFUSED]);
    const [signInLine, ...more] = logged(a, res, 'passkey sign-in refused');
    expect(more).toEqual([]);
    expect(signInLine).toMatchObject({ ownerId: user.id, reason: expect.stringMatching(/^Error: Unexpected authentication response origin "https:\/\/e+$/) });
    expect((signInLine!.reason as string).length).toBe(200);
    expect(JSON.stringify(signInLine)).not.toContain((answer as { response: { signature: string } }).response.signature);
    const newcomer = await makeUser(a);
    const registering = await addPasskey(newcomer.access, longOrigin);
    expect([registering.res.status, registering.res.json]).toEqual([400, INVALID]);
    const [registrationLine] = logged(b, registering.res, 'passkey registration refused');
    expect(registrationLine).toMatchObject({ ownerId: newcomer.id, reason: expect.stringMatching(/^Error: Unexpected registration response origin "https:\/\/e+$/) });
    expect((registrationLine!.reason as string).length).toBe(200);
  });

  it('refuses a sign-in without userHandle, or whose userHandle is not the credential\'s user (CONTRACT §26)', async () => {
    const { user, credential } = await userWithPasskey();
    const stranger = await userWithPasskey();
    const sessions = async () => (await sql('SELECT id FROM sessions WHERE user_id = $1', [user.id])).length;
    const before = await sessions();
    // The handle is not signed: whoever relays a good answer can drop it or name another account.
    for (const userHandle of [undefined, null, '', stranger.credential.userHandle, String(user.id), 42]) {
      const { res } = await signIn(credential, { ...ORIGIN, userHandle });
      expect([res.status, res.json], JSON.stringify({ userHandle })).toEqual([401, REFUSED]);
    }
    expect(await sessions()).toBe(before);
    // The right one, the user id's bytes as the registration gave them, signs in.
    expect(credential.userHandle).toBe(Buffer.from(String(user.id)).toString('base64url'));
    const { res } = await signIn(credential);
    expect(res.status).toBe(200);
    expect(claims(res.json.access_token)).toMatchObject({ sub: String(user.id) });
  });

  it('refuses a registration from another origin, without user verification, with another user\'s challenge, or malformed', async () => {
    const user = await makeUser(a);
    for (const ceremony of [{ origin: 'https://evil.example' }, { ...ORIGIN, verified: false }, { ...ORIGIN, rpId: 'evil.example' }]) {
      const { res } = await addPasskey(user.access, ceremony);
      expect([res.status, res.json], JSON.stringify(ceremony)).toEqual([400, INVALID]);
    }
    // A challenge is used once, by whatever answer comes first: a refused one uses it up too.
    const once = await a.post(REGISTER_OPTIONS, {}, { headers: bearer(user.access) });
    expect((await b.post(REGISTER, register(once.json, { origin: 'https://evil.example' }).response, { headers: bearer(user.access) })).json).toEqual(INVALID);
    expect((await a.post(REGISTER, register(once.json, ORIGIN).response, { headers: bearer(user.access) })).json).toEqual(INVALID);
    const other = await makeUser(a);
    const options = await a.post(REGISTER_OPTIONS, {}, { headers: bearer(other.access) });
    const stolen = register(options.json, ORIGIN).response;
    expect((await b.post(REGISTER, stolen, { headers: bearer(user.access) })).json).toEqual(INVALID);
    for (const body of [{}, { id: 'x', response: {} }, { response: { clientDataJSON: 'e30', attestationObject: 'oA' } }]) {
      const res = await a.post(REGISTER, body, { headers: bearer(user.access) });
      expect([res.status, res.json], JSON.stringify(body)).toEqual([400, INVALID]);
    }
    expect(await sql('SELECT 1 FROM passkeys WHERE user_id = $1', [user.id])).toEqual([]);
  });

  it('adding one is guard factor: no API key, a recent sign-in, and aal2 once the user has a passkey', async () => {
    const pro = await makeUser(a, { plan: 'pro' });
    const key = (await a.post('/api/v1/user/api-token', {}, { headers: bearer(pro.access) })).json.api_token as string;
    expect((await a.post(REGISTER_OPTIONS, {}, { headers: { 'x-api-key': key } })).json).toEqual(RECENT);
    clock.advance(6 * 60_000);
    try {
      expect((await a.post(REGISTER_OPTIONS, {}, { headers: bearer(pro.access) })).json).toEqual(RECENT);
    } finally {
      clock.advance(-6 * 60_000);
    }
    // Whoever has only the password of a user with a passkey cannot add their own.
    const { user, credential } = await userWithPasskey();
    const password = await a.post('/api/v1/auth/login', { email: user.email, password: user.password });
    expect(claims(password.json.access_token)).toMatchObject({ amr: ['pwd'], acr: 'aal1' });
    expect((await a.post(REGISTER_OPTIONS, {}, { headers: bearer(password.json.access_token) })).json).toEqual(RECENT);
    const withPasskey = (await signIn(credential)).res.json.access_token as string;
    expect((await addPasskey(withPasskey)).res.status).toBe(201);
  });

  it('removing one: 404 for an unknown or someone else\'s id, else gone, its sign-ins refused, other sessions ended', async () => {
    const { user, credential, id } = await userWithPasskey();
    const mine = (await signIn(credential)).res.json;
    const other = (await signIn(credential)).res.json;
    const stranger = await userWithPasskey();
    const headers = bearer(mine.access_token);
    for (const path of [`/api/v1/user/passkeys/${stranger.id}`, '/api/v1/user/passkeys/999999999', '/api/v1/user/passkeys/abc', '/api/v1/user/passkeys/99999999999']) {
      const res = await a.request('DELETE', path, { headers });
      expect([res.status, res.json], path).toEqual([404, NOT_FOUND]);
    }
    const res = await b.request('DELETE', `/api/v1/user/passkeys/${id}`, { headers });
    // The message, and beside it this session's new pair: its token of before is refused (CONTRACT §33).
    expect([res.status, res.json]).toEqual([200, { message: 'Clé d’accès supprimée', access_token: expect.any(String), refresh_token: expect.any(String), token_type: 'Bearer', plan: 'free' }]);
    // Refused on every instance within a second (CONTRACT §33): `a` learns of b's change by the feed.
    await everywhereWithin([a, b], async (gw) => (await gw.get('/api/v1/user/passkeys', { headers })).status === 401, 1000);
    expect((await a.get('/api/v1/user/passkeys', { headers: bearer(res.json.access_token) })).json).toEqual({ passkeys: [] });
    expect((await signIn(credential)).res.json).toEqual(REFUSED);
    expect((await a.post('/api/v1/auth/refresh', { refresh_token: other.refresh_token })).status).toBe(401);
    expect((await a.post('/api/v1/auth/refresh', { refresh_token: mine.refresh_token })).status).toBe(200);
    expect((await a.post('/api/v1/auth/refresh', { refresh_token: user.refresh })).status).toBe(401);
    const [audit] = await sql<{ data: unknown }>('SELECT data FROM audit_events WHERE user_id = $1 AND type = $2', [user.id, 'passkey.removed']);
    expect(audit!.data).toEqual({ passkey_id: id, revoked_sessions: 2 });
    // The stranger's passkey is untouched.
    expect((await signIn(stranger.credential)).res.status).toBe(200);
  });

  it('sends the user\'s webhook auth.mfa_enrolled and auth.mfa_removed with method passkey', async () => {
    const user = await makeUser(a, { plan: 'pro' });
    const path = `/hook/passkeys-${user.id}`;
    const secret = await registerWebhook(a, user, receiver.url.replace('/hook', path));
    const { res, credential } = await addPasskey(user.access);
    const signedIn = (await signIn(credential)).res.json.access_token as string;
    expect((await a.request('DELETE', `/api/v1/user/passkeys/${res.json.id}`, { headers: bearer(signedIn) })).status).toBe(200);
    const event = (type: string) => verifiedEvent(receiver, path, type, secret);
    expect(await event('auth.mfa_enrolled')).toEqual({ type: 'auth.mfa_enrolled', timestamp: expect.any(String), data: { method: 'passkey' } });
    // makeUser's password session ended; the passkey session that removed it goes on.
    expect(await event('auth.mfa_removed')).toEqual({ type: 'auth.mfa_removed', timestamp: expect.any(String), data: { method: 'passkey', revoked_sessions: 1 } });
  });

  it('without auth.passkeys every passkey endpoint answers 404', async () => {
    const bare = await startTestGateway(testConfig());
    try {
      const user = await makeUser(bare);
      for (const path of [REGISTER_OPTIONS, REGISTER, LOGIN_OPTIONS, LOGIN]) expect((await bare.post(path, {}, { headers: bearer(user.access) })).status, path).toBe(404);
      expect((await bare.get('/api/v1/user/passkeys', { headers: bearer(user.access) })).status).toBe(404);
    } finally {
      await bare.close();
    }
  });

  it('gateway check refuses origins a browser would refuse for the rpId', () => {
    const yaml = (rpId: string, origin: string) => `auth:\n  passkeys:\n    rpId: ${rpId}\n    rpName: Example\n    origins: ["${origin}"]\n`;
    expect(configProblems(yaml('app.example.com', 'https://app.example.com'))).toEqual([]);
    expect(configProblems(yaml('example.com', 'https://login.example.com:8443'))).toEqual([]);
    expect(configProblems(yaml('localhost', 'http://localhost:5173'))).toEqual([]);
    expect(configProblems(yaml('app.example.com', 'https://evil.example'))).toEqual(['auth.passkeys.origins[0]: https://evil.example is not on app.example.com or a subdomain of it: browsers refuse the ceremony']);
    expect(configProblems(yaml('app.example.com', 'http://app.example.com'))).toEqual(['auth.passkeys.origins[0]: http://app.example.com: browsers allow passkeys only on https:// pages (or http://localhost)']);
    expect(configProblems(yaml('app.example.com', 'https://app.example.com/login'))).toEqual(['auth.passkeys.origins[0]: expected an origin (scheme, host and port only: https://app.example.com), got "https://app.example.com/login"']);
    expect(configProblems(yaml('https://app.example.com', 'https://app.example.com'))[0]).toMatch(/^auth\.passkeys\.rpId: expected a host name/);
  });
});

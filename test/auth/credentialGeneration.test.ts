// CONTRACT §33: an access token minted before the user's last credential change (a password
// change or reset, TOTP confirmed or removed, a passkey removed, an operator's session revocation)
// is refused on every route, own endpoint and decision, within a second on every instance, and the
// session that made the change goes on with the pair its answer carries. The gateways' clock is
// frozen for each case: the old token is minted in the same second as the change, so its `iat`
// cannot tell it from the new pair (issue 68's reproduction).
import { SignJWT } from 'jose';
import { afterAll, beforeAll, beforeEach, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { buildAdminApp } from '../../src/admin/app.js';
import { sha256Hex } from '../../src/credentials/digest.js';
import { insertEmailToken } from '../../src/storage/accounts/emailTokens.js';
import {
  ADMIN_KEY, bearer, claims, closeSql, describeWithServices, everywhereWithin, makeUser, newPassword, startDecidingGateway,
  TEST_JWT_SECRET, type TestGateway, type TestUser,
} from '../helpers/gateway.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import { request, type HttpResponse } from '../helpers/http.js';
import { authenticate, register, type SoftCredential } from '../helpers/softAuthenticator.js';
import { authenticator } from '../helpers/totp.js';

const TOKEN_INVALID = { error: 'Token invalide ou expiré', code: 'token_invalid' };
const RP = { rpId: 'app.example.test', rpName: 'Example', origins: ['https://app.example.test'] };
const ORIGIN = { origin: 'https://app.example.test' };
const STEP = 30_000;
const ME = '/api/v1/user/me';

describeWithServices('tokens older than the last credential change', () => {
  let upstream: EchoUpstream;
  let a: TestGateway;
  let b: TestGateway;
  const admins: FastifyInstance[] = [];
  const adminUrls = new Map<TestGateway, string>();
  // Frozen at one instant per case (beforeEach): every token of a case has the change's `iat`.
  let frozen = Date.now();
  const clock = () => new Date(frozen);

  beforeAll(async () => {
    upstream = await startEchoUpstream();
    const overrides = {
      errors: { codes: true },
      auth: { mfa: { issuer: 'Example' }, passkeys: RP },
      upstreams: { app: { url: upstream.url } },
      routes: [{ path: '/app', upstream: 'app' }],
    };
    [a, b] = await Promise.all([startDecidingGateway(overrides, { clock }), startDecidingGateway(overrides, { clock })]);
    for (const gw of [a, b]) {
      const app = await buildAdminApp(gw.services);
      admins.push(app);
      adminUrls.set(gw, await app.listen({ host: '127.0.0.1', port: 0 }));
    }
  });
  afterAll(async () => {
    await Promise.all([...admins.map((app) => app.close()), a?.close(), b?.close()]);
    await upstream?.close();
    await closeSql();
  });
  // A new second each case, a few TOTP steps from the last one's (each case's codes are its own).
  beforeEach(() => { frozen = Math.max(Math.floor(Date.now() / 1000) * 1000, frozen + 4 * STEP) + 100; });

  /** The token on a proxied bearer route, an own endpoint and a decision of `gw`. */
  const surfaces = (gw: TestGateway, token: string): Promise<HttpResponse[]> => Promise.all([
    gw.get('/app/x', { headers: bearer(token) }),
    gw.get(ME, { headers: bearer(token) }),
    gw.decide('GET', '/decisions/app/x', { headers: bearer(token) }),
  ]);
  const statuses = async (gw: TestGateway, token: string) => (await surfaces(gw, token)).map((res) => res.status);
  /** Passes everywhere, so each instance holds the user and the token in memory before the change. */
  async function passesEverywhere(token: string): Promise<void> {
    for (const gw of [a, b]) expect(await statuses(gw, token)).toEqual([200, 200, 200]);
  }
  /** Refused with the catalog's 401 on all three surfaces of both instances, within a second of now. */
  async function refusedEverywhere(token: string): Promise<void> {
    await everywhereWithin([a, b], async (gw) => (await surfaces(gw, token)).every((res) => res.status === 401 && sameJson(res.json, TOKEN_INVALID)), 1000);
    for (const gw of [a, b]) {
      for (const res of await surfaces(gw, token)) expect([res.status, res.json]).toEqual([401, TOKEN_INVALID]);
    }
  }
  const sameJson = (x: unknown, y: unknown) => JSON.stringify(x) === JSON.stringify(y);

  const login = (gw: TestGateway, user: TestUser) => gw.post('/api/v1/auth/login', { email: user.email, password: user.password });
  const code = (secret: string, steps = 0) => authenticator.clone({ epoch: frozen + steps * STEP }).generate(secret);
  /** Another session of the user, signed in on the other instance: the password, then `factor` (a TOTP or recovery code) when enrolled. */
  async function otherSession(user: TestUser, factor?: string): Promise<string> {
    const first = await login(b, user);
    if (!factor) return first.json.access_token as string;
    const verified = await a.post('/api/v1/auth/mfa/verify', { mfa_token: first.json.mfa_token, code: factor });
    expect(verified.status).toBe(200);
    return verified.json.access_token as string;
  }
  async function confirmTotp(user: TestUser, access: string): Promise<{ secret: string; confirm: HttpResponse }> {
    const enroll = await a.post('/api/v1/auth/mfa/totp/enroll', {}, { headers: bearer(access) });
    const secret = enroll.json.secret as string;
    return { secret, confirm: await a.post('/api/v1/auth/mfa/totp/confirm', { code: code(secret) }, { headers: bearer(access) }) };
  }
  /** The answer's new pair: same second as the old token, and it passes everywhere. */
  async function newPairWorks(answer: HttpResponse, old: string): Promise<void> {
    expect(answer.json).toMatchObject({ access_token: expect.any(String), refresh_token: expect.any(String), token_type: 'Bearer', plan: 'free' });
    expect(claims(answer.json.access_token as string).iat).toBe(claims(old).iat);
    await passesEverywhere(answer.json.access_token as string);
    const refreshed = await b.post('/api/v1/auth/refresh', { refresh_token: answer.json.refresh_token });
    expect(refreshed.status).toBe(200);
    await passesEverywhere(refreshed.json.access_token as string);
  }

  it('issue 68: after TOTP is confirmed, another session\'s token minted in the same second can no longer change the password', async () => {
    const user = await makeUser(a);
    const other = await otherSession(user);
    await passesEverywhere(other);
    const { confirm } = await confirmTotp(user, user.access);
    expect(confirm.status).toBe(200);
    // The clock stands still: the change is made in the second `other` was minted in.
    expect(claims(other).iat).toBe(Math.floor(clock().getTime() / 1000));
    // Within a second every instance refuses the older token (asked with a read: a password change
    // tried during that second on an instance not yet told would go through, as §33 allows).
    await everywhereWithin([a, b], async (gw) => {
      const res = await gw.get('/api/v1/user/me', { headers: bearer(other) });
      return res.status === 401 && sameJson(res.json, TOKEN_INVALID);
    }, 1000);
    // Then the change the issue made with it is refused on both.
    for (const gw of [a, b]) {
      const res = await gw.post('/api/v1/auth/password/change', { current_password: user.password, new_password: newPassword() }, { headers: bearer(other) });
      expect([res.status, res.json]).toEqual([401, TOKEN_INVALID]);
    }
    // The password is the one it was: right, it asks for the code now.
    expect((await login(a, user)).status).toBe(403);
    await refusedEverywhere(other);
    await refusedEverywhere(user.access);
    await newPairWorks(confirm, other);
  });

  it('a password change: every older token refused, the changing session\'s new pair and new sign-ins pass', async () => {
    const user = await makeUser(a);
    const other = await otherSession(user);
    await passesEverywhere(other);
    const password = newPassword();
    const answer = await b.post('/api/v1/auth/password/change', { current_password: user.password, new_password: password }, { headers: bearer(user.access) });
    expect(answer.status).toBe(200);
    await refusedEverywhere(other);
    await refusedEverywhere(user.access);
    await newPairWorks(answer, other);
    await passesEverywhere((await login(b, { ...user, password })).json.access_token as string);
  });

  it('a password reset: every older token refused; the new password\'s sign-in passes', async () => {
    const user = await makeUser(a);
    const other = await otherSession(user);
    await passesEverywhere(other);
    const link = `reset-${user.id}-${frozen}`;
    await insertEmailToken(a.services.db, user.id, 'reset', sha256Hex(link), user.email, clock(), new Date(frozen + 60_000));
    const password = newPassword();
    expect((await a.post('/api/v1/auth/password/reset', { token: link, new_password: password })).status).toBe(200);
    await refusedEverywhere(other);
    await refusedEverywhere(user.access);
    await passesEverywhere((await login(a, { ...user, password })).json.access_token as string);
  });

  it('TOTP removed: every older token refused; the removing session\'s pair, added beside the message, passes', async () => {
    const user = await makeUser(a);
    const { secret, confirm } = await confirmTotp(user, user.access);
    const other = await otherSession(user, (confirm.json.recovery_codes as string[])[0]);
    const remover = await otherSession(user, code(secret, 1));
    await passesEverywhere(other);
    const answer = await b.request('DELETE', '/api/v1/auth/mfa/totp', { json: { password: user.password }, headers: bearer(remover) });
    expect([answer.status, answer.json.message]).toEqual([200, 'Second facteur supprimé']);
    await refusedEverywhere(other);
    await refusedEverywhere(remover);
    await newPairWorks(answer, other);
  });

  it('a passkey removed: every older token refused; the removing session\'s pair, added beside the message, passes', async () => {
    const user = await makeUser(a);
    const options = await a.post('/api/v1/auth/passkeys/register/options', {}, { headers: bearer(user.access) });
    const { response, credential } = register(options.json, ORIGIN);
    const added = await b.post('/api/v1/auth/passkeys/register/verify', response, { headers: bearer(user.access) });
    expect(added.status).toBe(201);
    const remover = await passkeySignIn(credential);
    const other = await otherSession(user);
    await passesEverywhere(other);
    const answer = await a.request('DELETE', `/api/v1/user/passkeys/${added.json.id}`, { headers: bearer(remover) });
    expect([answer.status, answer.json.message]).toEqual([200, 'Clé d’accès supprimée']);
    await refusedEverywhere(other);
    await refusedEverywhere(remover);
    await newPairWorks(answer, other);
  });

  async function passkeySignIn(credential: SoftCredential): Promise<string> {
    const options = await b.post('/api/v1/auth/passkeys/login/options', {});
    const res = await a.post('/api/v1/auth/passkeys/login/verify', authenticate(options.json, credential, ORIGIN));
    expect(res.status).toBe(200);
    return res.json.access_token as string;
  }

  /** An operator's DELETE on the admin API of `gw`'s instance. */
  const admin = (gw: TestGateway, path: string) => request(adminUrls.get(gw)!, 'DELETE', path, { headers: bearer(ADMIN_KEY) });

  it('an operator ends every session: every older token refused; a new sign-in passes', async () => {
    const user = await makeUser(a);
    const other = await otherSession(user);
    await passesEverywhere(other);
    const res = await admin(b, `/admin/v1/users/${user.id}/sessions`);
    expect(res.status).toBe(200);
    await refusedEverywhere(other);
    await refusedEverywhere(user.access);
    await passesEverywhere((await login(a, user)).json.access_token as string);
  });

  it('an operator ends one session: its token refused everywhere; another session refreshes into a token that passes', async () => {
    const user = await makeUser(a);
    const ended = await login(b, user);
    await passesEverywhere(ended.json.access_token as string);
    const res = await admin(a, `/admin/v1/users/${user.id}/sessions/${claims(ended.json.access_token as string).sid as number}`);
    expect([res.status, res.json.revoked]).toEqual([200, 1]);
    await refusedEverywhere(ended.json.access_token as string);
    const refreshed = await b.post('/api/v1/auth/refresh', { refresh_token: user.refresh });
    expect(refreshed.status).toBe(200);
    await passesEverywhere(refreshed.json.access_token as string);
  });

  it('a token without the claim (issued before it existed) passes as generation 0 until the user\'s first change', async () => {
    const user = await makeUser(a);
    // What an instance of the previous release signed: the gateway's own claims less `gen`.
    const { gen: _, ...before } = claims(user.access);
    const legacy = await new SignJWT(before).setProtectedHeader({ alg: 'HS256', typ: 'at+jwt' }).sign(new TextEncoder().encode(TEST_JWT_SECRET));
    await passesEverywhere(legacy);
    expect((await admin(a, `/admin/v1/users/${user.id}/sessions`)).status).toBe(200);
    await refusedEverywhere(legacy);
  });
});

// Unit tests of src/credentials/tokens.ts with a key from auth.jwt (no database read): what the
// gateway's access and refresh tokens hold, and which tokens each verifier refuses (another kind,
// expired, another key, a forged or respelled one), as test/auth/tokens.test.ts does through HTTP.
import { generateKeyPairSync, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { decodeJwt, decodeProtectedHeader, SignJWT, type JWTPayload } from 'jose';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { configSchema, type Config } from '../../src/config/schema.js';
import { TokenKeyring } from '../../src/credentials/tokenKeyring.js';
import { hmacKey } from '../../src/credentials/tokenKeys.js';
import { ACCESS_TYP, acrOf, createTokens, loadKeyFile, REFRESH_TYP, type Tokens } from '../../src/credentials/tokens.js';
import type { ChangeFeed, ChangeHandlers } from '../../src/storage/feed/changeFeed.js';
import type { Queryable } from '../../src/storage/database/db.js';
import { testClock, type TestClock } from '../helpers/gateway.js';

const SECRET = 'a-secret-of-at-least-32-characters-for-hs256';
const OTHER = 'another-secret-of-at-least-32-characters-too';
const USER = { id: 42, email: 'ada@example.test', plan: 'pro' as const, credential_generation: 3 };
const PWD = { amr: ['pwd'], authTime: new Date('2026-01-02T03:04:05.678Z') };

// With auth.jwt.secret set the keys come from the configuration: a query would be a bug.
const noDatabase: Queryable = { query: () => Promise.reject(new Error('no database in this test')) };
const authOf = (jwt: Record<string, unknown> = {}, more: Record<string, unknown> = {}): Config['auth'] =>
  configSchema.parse({ auth: { jwt: { secret: SECRET, ...jwt }, ...more } }).auth;

async function tokensOf(auth = authOf(), clock: TestClock = testClock()): Promise<{ tokens: Tokens; clock: TestClock; warnings: string[] }> {
  const warnings: string[] = [];
  return { tokens: await createTokens(auth, noDatabase, clock, (m) => warnings.push(m)), clock, warnings };
}

/** Tokens on a live key ring that also accepts OTHER (a previous key), and the reload that drops it. */
async function tokensWithPreviousKey(): Promise<{ tokens: Tokens; dropPrevious: () => void }> {
  const auth = authOf({ previous: [OTHER] });
  const keyring = new TokenKeyring({ jwt: auth.jwt, refreshTokenTtlMs: auth.refreshTokenTtl, db: noDatabase, warn: () => {} });
  await keyring.start();
  const tokens = await createTokens(auth, noDatabase, () => new Date(), () => {}, keyring);
  return { tokens, dropPrevious: () => keyring.prepare({ ...auth.jwt, previous: [] })!() };
}

/** A token signed as the gateway signs, with the claims and header given. */
async function forged(claims: JWTPayload, header: Record<string, unknown> = {}, secret = SECRET, ttl = 600): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  const jwt = new SignJWT({ plan: 'free', email: 'x@example.test', ...claims })
    .setProtectedHeader({ alg: 'HS256', typ: ACCESS_TYP, kid: hmacKey(secret).kid, ...header } as { alg: string })
    .setIssuedAt(now).setExpirationTime(now + ttl).setJti(randomUUID());
  if (claims.sub === undefined) jwt.setSubject('7');
  return jwt.sign(hmacKey(secret).sign);
}

describe('acrOf', () => {
  it('is aal2 after a second factor (mfa) or a passkey (hwk), aal1 otherwise', () => {
    expect(acrOf(['pwd'])).toBe('aal1');
    expect(acrOf([])).toBe('aal1');
    expect(acrOf(['pwd', 'mfa'])).toBe('aal2');
    expect(acrOf(['hwk'])).toBe('aal2');
  });
});

describe('issuePair', () => {
  it('signs an access and a refresh token, each with its typ, kid, subject, lifetime and a jti of its own', async () => {
    const { tokens, clock } = await tokensOf();
    const { pair, refreshExpiresAt } = await tokens.issuePair(USER, 9, PWD);
    expect(pair).toEqual({ access_token: expect.any(String), refresh_token: expect.any(String), token_type: 'Bearer', plan: 'pro' });
    const now = Math.floor(clock().getTime() / 1000);
    const kid = hmacKey(SECRET).kid;
    expect(decodeProtectedHeader(pair.access_token)).toEqual({ alg: 'HS256', typ: 'at+jwt', kid });
    expect(decodeProtectedHeader(pair.refresh_token)).toEqual({ alg: 'HS256', typ: 'refresh+jwt', kid });
    const access = decodeJwt(pair.access_token);
    expect(access).toEqual({
      plan: 'pro', email: USER.email, sid: 9, auth_time: 1767323045, acr: 'aal1', amr: ['pwd'], gen: 3,
      sub: '42', iat: expect.any(Number), exp: expect.any(Number), jti: expect.stringMatching(/^[0-9a-f-]{36}$/),
    });
    expect(Math.abs(access.iat! - now)).toBeLessThanOrEqual(1);
    expect(access.exp! - access.iat!).toBe(15 * 60);
    const refresh = decodeJwt(pair.refresh_token);
    expect(refresh).toEqual({ sub: '42', iat: access.iat, exp: access.iat! + 30 * 86_400, jti: expect.stringMatching(/^[0-9a-f-]{36}$/) });
    expect(refresh.jti).not.toBe(access.jti);
    expect(Math.abs(refreshExpiresAt.getTime() - clock().getTime() - 30 * 86_400_000)).toBeLessThan(1000);
    expect(decodeJwt((await tokens.issuePair(USER, 9, PWD)).pair.access_token).jti).not.toBe(access.jti);
  });

  it('issues both tokens of a pair at one instant, even when a second ends while they are signed', async () => {
    // A clock a second further on each time it is read: every reading falls in a second of its own.
    const base = testClock();
    const ticking = Object.assign(() => { const now = base(); base.advance(1000); return now; }, base);
    const { tokens } = await tokensOf(authOf(), ticking);
    const { pair, refreshExpiresAt } = await tokens.issuePair(USER, 9, PWD);
    const [access, refresh] = [decodeJwt(pair.access_token), decodeJwt(pair.refresh_token)];
    expect(refresh.iat).toBe(access.iat);
    expect(refresh.exp).toBe(access.iat! + 30 * 86_400);
    // The row's expiry (refresh_tokens.expires_at) from the same reading as the tokens.
    expect(Math.floor(refreshExpiresAt.getTime() / 1000)).toBe(access.iat! + 30 * 86_400);
  });

  it('says aal2 after a second factor; names issuer and audience only when configured', async () => {
    const { tokens } = await tokensOf(authOf({ issuer: 'https://gw.example.test', audience: 'my-app' }));
    const { pair } = await tokens.issuePair(USER, 1, { amr: ['pwd', 'mfa'], authTime: new Date() });
    expect(decodeJwt(pair.access_token)).toMatchObject({ acr: 'aal2', amr: ['pwd', 'mfa'], iss: 'https://gw.example.test', aud: 'my-app' });
    expect(decodeJwt(pair.refresh_token)).toMatchObject({ iss: 'https://gw.example.test', aud: 'my-app' });
    const plain = (await (await tokensOf()).tokens.issuePair(USER, 1, PWD)).pair;
    expect(decodeJwt(plain.access_token)).not.toHaveProperty('iss');
    expect(decodeJwt(plain.access_token)).not.toHaveProperty('aud');
    expect(decodeJwt(plain.refresh_token)).not.toHaveProperty('iss');
  });

  it('uses the configured lifetimes', async () => {
    const { tokens, clock } = await tokensOf(authOf({}, { accessTokenTtl: '90s', refreshTokenTtl: '2h' }));
    const { pair, refreshExpiresAt } = await tokens.issuePair(USER, 1, PWD);
    const access = decodeJwt(pair.access_token);
    expect(access.exp! - access.iat!).toBe(90);
    expect(decodeJwt(pair.refresh_token).exp! - access.iat!).toBe(7200);
    expect(Math.abs(refreshExpiresAt.getTime() - clock().getTime() - 7_200_000)).toBeLessThan(1000);
  });
});

describe('verifyAccess', () => {
  it('gives the claims of an access token, and null for a refresh token', async () => {
    const { tokens } = await tokensOf();
    const { pair } = await tokens.issuePair(USER, 9, { amr: ['hwk'], authTime: PWD.authTime });
    const exp = decodeJwt(pair.access_token).exp;
    const claims = { userId: 42, plan: 'pro', email: USER.email, exp, sessionId: 9, acr: 'aal2', authTime: 1767323045, generation: 3 };
    expect(await tokens.verifyAccess(pair.access_token)).toEqual(claims);
    expect(await tokens.verifyAccess(pair.access_token)).toEqual(claims); // from the cache
    expect(await tokens.verifyAccess(pair.refresh_token)).toBeNull();
  });

  it('reads `gen` (CONTRACT §33): absent is generation 0 (a token of the previous release); anything but a whole number from 0 is refused', async () => {
    const { tokens } = await tokensOf();
    expect(await tokens.verifyAccess(await forged({}))).toMatchObject({ generation: 0 });
    expect(await tokens.verifyAccess(await forged({ gen: 0 }))).toMatchObject({ generation: 0 });
    expect(await tokens.verifyAccess(await forged({ gen: 7 }))).toMatchObject({ generation: 7 });
    for (const gen of [-1, 1.5, '2', null, Number.MAX_SAFE_INTEGER + 1, true]) expect(await tokens.verifyAccess(await forged({ gen })), String(gen)).toBeNull();
  });

  it('refuses an expired token, also one verified before', async () => {
    const { tokens, clock } = await tokensOf(authOf({}, { accessTokenTtl: '60s' }));
    const { pair } = await tokens.issuePair(USER, 1, PWD);
    const fresh = (await tokens.issuePair(USER, 1, PWD)).pair.access_token;
    expect(await tokens.verifyAccess(pair.access_token)).not.toBeNull();
    clock.advance(61_000);
    expect(await tokens.verifyAccess(pair.access_token)).toBeNull();
    expect(await tokens.verifyAccess(fresh)).toBeNull();
  });

  it('refuses, cached or not, a token whose exp is this very second', async () => {
    const { tokens, clock } = await tokensOf(authOf({}, { accessTokenTtl: '60s' }));
    const { pair } = await tokens.issuePair(USER, 1, PWD);
    const exp = decodeJwt(pair.access_token).exp!;
    clock.set(new Date((exp - 1) * 1000));
    expect(await tokens.verifyAccess(pair.access_token)).not.toBeNull();
    clock.set(new Date(exp * 1000));
    expect(await tokens.verifyAccess(pair.access_token)).toBeNull();
  });

  it('reads missing or odd claims as a token from before them: no session, aal1, auth_time 0', async () => {
    const { tokens } = await tokensOf();
    expect(await tokens.verifyAccess(await forged({ sub: '7' }))).toMatchObject({ userId: 7, plan: 'free', sessionId: undefined, acr: 'aal1', authTime: 0 });
    expect(await tokens.verifyAccess(await forged({ sid: 'x', acr: 'aal3', auth_time: '5' }))).toMatchObject({ sessionId: undefined, acr: 'aal1', authTime: 0 });
    expect(await tokens.verifyAccess(await forged({ sid: 2 ** 53 }))).toMatchObject({ sessionId: undefined });
    expect(await tokens.verifyAccess(await forged({ sid: 1.5 }))).toMatchObject({ sessionId: undefined });
    expect(await tokens.verifyAccess(await forged({ sid: 3, acr: 'aal2', auth_time: 5 }))).toMatchObject({ sessionId: 3, acr: 'aal2', authTime: 5 });
  });

  it('refuses a token without plan or email, without a required claim, or naming a user past the range', async () => {
    const { tokens } = await tokensOf();
    expect(await tokens.verifyAccess(await forged({ plan: 3 }))).toBeNull();
    expect(await tokens.verifyAccess(await forged({ email: null }))).toBeNull();
    expect(await tokens.verifyAccess(await forged({ sub: '0' }))).toBeNull();
    expect(await tokens.verifyAccess(await forged({ sub: '99999999999' }))).toBeNull();
    const now = Math.floor(Date.now() / 1000);
    const noJti = await new SignJWT({ plan: 'free', email: 'x@example.test' }).setProtectedHeader({ alg: 'HS256', typ: ACCESS_TYP })
      .setSubject('7').setIssuedAt(now).setExpirationTime(now + 60).sign(hmacKey(SECRET).sign);
    expect(await tokens.verifyAccess(noJti)).toBeNull();
    expect(await tokens.verifyAccess(await forged({}, { kid: undefined }))).toMatchObject({ userId: 7 });
  });

  it('refuses another key, another typ or algorithm, another issuer or audience, a respelled token and what is not a JWS', async () => {
    const { tokens } = await tokensOf(authOf({ issuer: 'https://gw.example.test', audience: 'my-app' }));
    const good = await forged({ iss: 'https://gw.example.test', aud: 'my-app' });
    expect(await tokens.verifyAccess(good)).toMatchObject({ userId: 7 });
    expect(await tokens.verifyAccess(await forged({ iss: 'https://gw.example.test', aud: 'my-app' }, {}, OTHER))).toBeNull();
    expect(await tokens.verifyAccess(await forged({ iss: 'https://gw.example.test', aud: 'my-app' }, { typ: 'JWT' }))).toBeNull();
    expect(await tokens.verifyAccess(await forged({ iss: 'https://other.example.test', aud: 'my-app' }))).toBeNull();
    expect(await tokens.verifyAccess(await forged({ iss: 'https://gw.example.test', aud: 'other' }))).toBeNull();
    expect(await tokens.verifyAccess(`${good}=`)).toBeNull();
    expect(await tokens.verifyAccess(`${good}.`)).toBeNull();
    expect(await tokens.verifyAccess('not a token')).toBeNull();
    expect(await tokens.verifyAccess('a.b.c')).toBeNull();
  });

  it('refuses, cached or not, a token whose key left the key set', async () => {
    const { tokens, dropPrevious } = await tokensWithPreviousKey();
    const old = await forged({}, {}, OTHER);
    expect(await tokens.verifyAccess(old)).toMatchObject({ userId: 7 });
    expect(await tokens.isOwn(old)).toBe(true);
    dropPrevious();
    expect(await tokens.verifyAccess(old)).toBeNull();
    expect(await tokens.isOwn(old)).toBe(false);
    expect(await tokens.verifyRefresh(await forged({}, { typ: REFRESH_TYP }, OTHER))).toBeNull();
  });
});

describe('a keyring passed in', () => {
  // Started again, it would subscribe a second time and close() would end only the second
  // subscription and timer: a closed instance would go on following rotations.
  it('is used as started: one subscription to the change feed, which close() ends', async () => {
    const subscribers = new Set<Partial<ChangeHandlers>>();
    const feed = { subscribe: (h: Partial<ChangeHandlers>) => { subscribers.add(h); return () => subscribers.delete(h); } } as unknown as ChangeFeed;
    const auth = authOf();
    const keyring = new TokenKeyring({ jwt: auth.jwt, refreshTokenTtlMs: auth.refreshTokenTtl, db: noDatabase, warn: () => {}, feed });
    await keyring.start();
    const tokens = await createTokens(auth, noDatabase, () => new Date(), () => {}, keyring);
    const { pair } = await tokens.issuePair(USER, 1, PWD);
    expect(await tokens.verifyAccess(pair.access_token)).toMatchObject({ userId: 42 });
    expect(subscribers.size).toBe(1);
    await keyring.close();
    expect(subscribers.size).toBe(0);
  });
});

describe('the cache of verified tokens', () => {
  afterEach(() => { vi.restoreAllMocks(); });

  it('spares a signature check for a token verified before, in verifyAccess and isOwn', async () => {
    const { tokens } = await tokensOf();
    const { pair } = await tokens.issuePair(USER, 1, PWD);
    const verify = vi.spyOn(crypto.subtle, 'verify');
    expect(await tokens.verifyAccess(pair.access_token)).toMatchObject({ userId: 42 });
    expect(verify).toHaveBeenCalledTimes(1);
    expect(await tokens.verifyAccess(pair.access_token)).toMatchObject({ userId: 42 });
    expect(await tokens.isOwn(pair.access_token)).toBe(true);
    expect(verify).toHaveBeenCalledTimes(1);
    expect(await tokens.isOwn(pair.refresh_token)).toBe(true);
    expect(verify).toHaveBeenCalledTimes(2);
  });

  it('is emptied when the key set changes: a token of a removed key, verified twice before, is refused at once', async () => {
    const { tokens, dropPrevious } = await tokensWithPreviousKey();
    const old = await forged({}, {}, OTHER);
    expect(tokens.isVerified(old)).toBe(false);
    expect(await tokens.verifyAccess(old)).toMatchObject({ userId: 7 });
    expect(await tokens.verifyAccess(old)).toMatchObject({ userId: 7 });
    expect(tokens.isVerified(old)).toBe(true);
    dropPrevious();
    // What the bearer lookup asks (authenticate.ts): no longer known, so read and verified again.
    expect(tokens.isVerified(old)).toBe(false);
    expect(await tokens.verifyAccess(old)).toBeNull();
  });

  it('tries every key for a token without a kid, the previous ones too', async () => {
    const auth = authOf({ previous: [OTHER] });
    const { tokens } = await tokensOf(auth);
    expect(await tokens.verifyAccess(await forged({}, { kid: undefined }, OTHER))).toMatchObject({ userId: 7 });
    expect(await tokens.verifyRefresh(await forged({}, { kid: undefined, typ: REFRESH_TYP }, OTHER))).toBe(7);
  });
});

describe('verifyRefresh', () => {
  it('gives the user of a refresh token; null for an access token, an expired or a foreign one', async () => {
    const { tokens, clock } = await tokensOf();
    const { pair } = await tokens.issuePair(USER, 1, PWD);
    expect(await tokens.verifyRefresh(pair.refresh_token)).toBe(42);
    expect(await tokens.verifyRefresh(pair.access_token)).toBeNull();
    expect(await tokens.verifyRefresh(await forged({}, { typ: REFRESH_TYP }, OTHER))).toBeNull();
    expect(await tokens.verifyRefresh(await forged({}, { typ: REFRESH_TYP }))).toBe(7);
    expect(await tokens.verifyRefresh(`${pair.refresh_token}=`)).toBeNull();
    clock.advance(31 * 86_400_000);
    expect(await tokens.verifyRefresh(pair.refresh_token)).toBeNull();
  });
});

describe('isOwn', () => {
  it('knows the gateway’s tokens, expired or with characters glued after them, and nothing else', async () => {
    const { tokens, clock } = await tokensOf(authOf({}, { accessTokenTtl: '60s' }));
    const { pair } = await tokens.issuePair(USER, 1, PWD);
    expect(await tokens.isOwn(pair.access_token)).toBe(true);
    expect(await tokens.isOwn(pair.refresh_token)).toBe(true);
    expect(await tokens.isOwn(`${pair.access_token}X`)).toBe(true);
    expect(await tokens.isOwn(`${pair.refresh_token}abc-_`)).toBe(true);
    clock.advance(3_600_000);
    expect(await tokens.isOwn(pair.access_token)).toBe(true);
    expect(await tokens.isOwn(await forged({}, {}, OTHER))).toBe(false);
    expect(await tokens.isOwn(await forged({}, { typ: 'JWT' }))).toBe(false);
    expect(await tokens.isOwn(await forged({}, { typ: undefined }))).toBe(false);
    expect(await tokens.isOwn(await forged({}, { kid: undefined }))).toBe(true);
    expect(await tokens.isOwn('not a token')).toBe(false);
    expect(await tokens.isOwn(pair.access_token.slice(0, -1))).toBe(false);
  });

  it('knows a token verified before without a signature check', async () => {
    const { tokens } = await tokensOf();
    const { pair } = await tokens.issuePair(USER, 1, PWD);
    expect(await tokens.verifyAccess(pair.access_token)).not.toBeNull();
    expect(await tokens.isOwn(pair.access_token)).toBe(true);
  });
});

describe('asymmetric keys', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'gw-tokens-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('publish the public key; loadKeyFile reads the private key file alone', async () => {
    const { privateKey, publicKey } = generateKeyPairSync('ed25519');
    const privateKeyFile = path.join(dir, 'jwt.pem');
    writeFileSync(privateKeyFile, privateKey.export({ format: 'pem', type: 'pkcs8' }));
    const jwt = { algorithm: 'EdDSA', secret: '', privateKeyFile, previous: [path.join(dir, 'missing.pub.pem')] };
    const key = await loadKeyFile(authOf(jwt).jwt);
    expect(key.publicJwk).toMatchObject({ ...publicKey.export({ format: 'jwk' }), kid: key.kid, alg: 'EdDSA', use: 'sig' });
    const { tokens } = await tokensOf(authOf({ ...jwt, previous: [] }));
    expect(tokens.publicJwks).toEqual([key.publicJwk]);
    const { pair } = await tokens.issuePair(USER, 1, PWD);
    expect(decodeProtectedHeader(pair.access_token)).toEqual({ alg: 'EdDSA', typ: ACCESS_TYP, kid: key.kid });
    expect(await tokens.isOwn(`${pair.access_token}X`)).toBe(true);
    expect(await tokens.verifyAccess(pair.access_token)).toMatchObject({ userId: 42 });
    expect(await tokens.verifyAccess(await forged({}, {}))).toBeNull();
    expect((await tokensOf()).tokens.publicJwks).toEqual([]);
  });
});

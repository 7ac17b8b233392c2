// Authentication guard (spec §5) on proxied routes: bearer access token first, then X-API-Key,
// else 401. Two instances on one database; API keys are inserted by SQL (their endpoints are Pro's),
// always for pro users, as the Pro endpoints would.
import { createHash, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Config } from '../../src/config/schema.js';
import { newApiKey } from '../../src/keys/index.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import {
  bearer, closeSql, describeWithServices, eventually, everywhereWithin, makeUser, marker, queriesDuring, sql, startTestGateway, startTwoGateways, testClock,
  testConfig, type TestClock, type TestGateway,
} from '../helpers/gateway.js';

const INVALID = { error: 'Token invalide ou expiré' };
const NOT_FOUND = { error: 'Utilisateur introuvable' };
// CONTRACT §8: every 401 challenges, naming invalid_token when a credential of ours was refused.
const CHALLENGE = 'Bearer realm="gateway"';
const INVALID_CHALLENGE = 'Bearer realm="gateway", error="invalid_token"';

/** A personal API key stored the way the Pro endpoints store it: SHA-256 hex only. */
async function insertKey(userId: number, options: { revoked?: boolean } = {}): Promise<string> {
  const raw = `gw_${randomBytes(24).toString('base64url')}`;
  await sql('INSERT INTO api_tokens (user_id, token_hash, revoked) VALUES ($1, $2, $3)', [
    userId, createHash('sha256').update(raw).digest('hex'), options.revoked ? 1 : 0,
  ]);
  return raw;
}

describeWithServices('authentication guard', () => {
  let upstream: EchoUpstream;
  let a: TestGateway;
  let b: TestGateway;
  let clock: TestClock;
  let config: Config;

  beforeAll(async () => {
    upstream = await startEchoUpstream();
    clock = testClock();
    config = testConfig({
      upstreams: { app: { url: upstream.url } },
      routes: [
        { path: '/private', upstream: 'app', auth: 'required' },
        { path: '/maybe', upstream: 'app', auth: 'optional' },
        { path: '/open', upstream: 'app', auth: 'none' },
      ],
    });
    [a, b] = await startTwoGateways(config, { clock });
  });

  afterAll(async () => {
    await Promise.all([a?.close(), b?.close()]);
    await upstream?.close();
    await closeSql();
  });

  it('admits a valid bearer access token on both instances', async () => {
    const user = await makeUser(a);
    const m = marker();
    // RFC 7235: one or more spaces after the scheme.
    for (const [gw, authorization] of [[a, `Bearer ${user.access}`], [b, `Bearer \t ${user.access}`]] as const) {
      const res = await gw.get(`/private/${m}`, { headers: { authorization } });
      expect(res.status, authorization).toBe(200);
      expect(res.json.headers).toMatchObject({ 'x-user-id': String(user.id), 'x-auth-method': 'bearer', 'x-user-plan': 'free', 'x-user-email': user.email });
    }
    expect(upstream.count(m)).toBe(2);
  });

  it('answers 401 "Token invalide ou expiré" without a usable credential', async () => {
    const user = await makeUser(a);
    const m = marker();
    // Each with its challenge: invalid_token where a credential of ours was presented.
    const cases: Array<[Record<string, string>, string]> = [
      [{}, CHALLENGE],
      [{ authorization: 'Bearer not.a.jwt' }, INVALID_CHALLENGE],
      [{ authorization: `Bearer ${user.refresh}` }, INVALID_CHALLENGE], // a refresh token is not an access token
      [{ authorization: `Bearer ${user.access}x` }, INVALID_CHALLENGE],
      [{ authorization: 'Bearer' }, INVALID_CHALLENGE],
      [{ authorization: user.access }, CHALLENGE], // no scheme
      [{ authorization: 'Basic dXNlcjpwYXNz' }, CHALLENGE],
      [{ 'x-api-key': 'gw_never_issued' }, INVALID_CHALLENGE],
      [{ 'x-api-key': '   ' }, CHALLENGE],
    ];
    for (const [headers, challenge] of cases) {
      const res = await b.get(`/private/${m}`, { headers });
      expect([res.status, res.json, res.headers['www-authenticate']], JSON.stringify(headers)).toEqual([401, INVALID, challenge]);
    }
    expect(upstream.count(m)).toBe(0);
  });

  it('refuses an access token once it has expired (15 minutes)', async () => {
    const user = await makeUser(a);
    const m = marker();
    expect((await a.get(`/private/${m}`, { headers: bearer(user.access) })).status).toBe(200);
    clock.advance(15 * 60_000 + 1000);
    try {
      for (const gw of [a, b]) {
        const res = await gw.get(`/private/${m}`, { headers: bearer(user.access) });
        expect(res.status).toBe(401);
        expect(res.json).toEqual(INVALID);
      }
    } finally {
      clock.advance(-(15 * 60_000 + 1000));
    }
    expect(upstream.count(m)).toBe(1);
  });

  it('answers 401 "Utilisateur introuvable" to a valid token of a missing or inactive user', async () => {
    const m = marker();
    const ghost = await a.services.tokens.issuePair({ id: 2_000_000_000, email: 'ghost@example.test', plan: 'pro', credential_generation: 0 }, 1, { amr: ['pwd'], authTime: new Date() });
    const res = await a.get(`/private/${m}`, { headers: bearer(ghost.pair.access_token) });
    expect(res.status).toBe(401);
    expect(res.json).toEqual(NOT_FOUND);

    const user = await makeUser(a, { plan: 'pro' });
    const key = await insertKey(user.id);
    expect((await b.get(`/private/${m}`, { headers: bearer(user.access) })).status).toBe(200);
    await sql('UPDATE users SET is_active = 0 WHERE id = $1', [user.id]);
    // Polls go to a path of their own: those answered before the change is heard reach the upstream.
    const poll = marker();
    await everywhereWithin([a, b], async (gw) => (await gw.get(`/private/${poll}`, { headers: bearer(user.access) })).status === 401, 1000);
    for (const gw of [a, b]) {
      // The bearer names a user: the spec stops there, even with a valid key beside it.
      const both = await gw.get(`/private/${m}`, { headers: { ...bearer(user.access), 'x-api-key': key } });
      expect(both.json).toEqual(NOT_FOUND);
      // A key alone of an inactive user is an invalid key.
      const keyOnly = await gw.get(`/private/${m}`, { headers: { 'x-api-key': key } });
      expect(keyOnly.json).toEqual(INVALID);
    }
    const deleted = await makeUser(b);
    await sql('DELETE FROM users WHERE id = $1', [deleted.id]);
    await eventually(async () => (await a.get(`/private/${poll}`, { headers: bearer(deleted.access) })).status === 401, 1000);
    expect((await a.get(`/private/${m}`, { headers: bearer(deleted.access) })).json).toEqual(NOT_FOUND);
    expect(upstream.count(m)).toBe(1);
  });

  it('falls back to X-API-Key when the bearer check fails, and records last_used_at off the response path', async () => {
    const user = await makeUser(a, { plan: 'pro' });
    const key = await insertKey(user.id);
    const hash = createHash('sha256').update(key).digest('hex');
    expect(await sql('SELECT last_used_at FROM api_tokens WHERE token_hash = $1', [hash])).toEqual([{ last_used_at: null }]);
    const m = marker();
    const before = Date.now();
    const cases: Array<Record<string, string>> = [
      { 'x-api-key': key },
      { 'X-API-KEY': `  ${key}\t` },
      { authorization: 'Bearer expired.or.forged', 'x-api-key': key },
      { authorization: `Bearer ${user.refresh}`, 'x-api-key': key },
    ];
    for (const [i, headers] of cases.entries()) {
      const res = await (i % 2 ? b : a).get(`/private/${m}`, { headers });
      expect(res.status, JSON.stringify(headers)).toBe(200);
      expect(res.json.headers).toMatchObject({ 'x-user-id': String(user.id), 'x-auth-method': 'api-key', 'x-user-plan': 'pro' });
    }
    expect(upstream.count(m)).toBe(4);
    await eventually(async () => {
      const [row] = await sql<{ last_used_at: Date | null }>('SELECT last_used_at FROM api_tokens WHERE token_hash = $1', [hash]);
      return row!.last_used_at !== null && row!.last_used_at.getTime() >= before - 1000;
    }, 3000, 100);
  });

  it('sends no write for last_used_at while answering a key request; the batched flush records it afterwards', async () => {
    // An instance of its own whose once-a-second flush is stopped: close() clears the timer and
    // drains what is pending, while record() and flush() keep working. Nothing but the request
    // path itself can then write during the request, so the check does not depend on timing.
    const gw = await startTestGateway(config);
    try {
      const keyUsage = gw.services.keyUsage;
      await keyUsage.close();
      const user = await makeUser(gw, { plan: 'pro' });
      const key = await insertKey(user.id);
      const hash = createHash('sha256').update(key).digest('hex');
      const lastUsed = async () => (await sql<{ last_used_at: Date | null }>('SELECT last_used_at FROM api_tokens WHERE token_hash = $1', [hash]))[0]!.last_used_at;
      const m = marker();

      // Every statement the instance sends while the request runs, unfiltered (queriesDuring
      // leaves out the last_used_at ones, which are exactly what is looked for here).
      const db = gw.services.db;
      const query = db.query;
      const sent: string[] = [];
      db.query = (async (text: string, params?: unknown[]) => { sent.push(text); return query(text, params); }) as typeof db.query;
      const before = Date.now();
      const res = await gw.get(`/private/${m}`, { headers: { 'x-api-key': key } }).finally(() => { db.query = query; });
      const after = Date.now();
      expect(res.status).toBe(200);
      expect(res.json.headers).toMatchObject({ 'x-user-id': String(user.id), 'x-auth-method': 'api-key', 'x-user-plan': 'pro' });
      // A key seen for the first time is looked up in Postgres: the recording did see this request.
      expect(sent.some((text) => /\bFROM\s+api_tokens\b/i.test(text))).toBe(true);
      const writes = sent.filter((text) => /last_used_at/i.test(text) || /\b(UPDATE|INSERT\s+INTO|DELETE\s+FROM)\s+api_tokens\b/i.test(text));
      expect(writes).toEqual([]);
      expect(await lastUsed()).toBeNull();

      await keyUsage.flush();
      const at = await lastUsed();
      expect(at).not.toBeNull();
      expect(at!.getTime()).toBeGreaterThanOrEqual(before);
      expect(at!.getTime()).toBeLessThanOrEqual(after);
      expect(upstream.count(m)).toBe(1);
    } finally {
      await gw.close();
    }
  });

  it('prefers a valid bearer token over an API key of another user', async () => {
    const bearerUser = await makeUser(a);
    const keyUser = await makeUser(a, { plan: 'pro' });
    const key = await insertKey(keyUser.id);
    const m = marker();
    const res = await b.get(`/private/${m}`, { headers: { ...bearer(bearerUser.access), 'x-api-key': key } });
    expect(res.json.headers).toMatchObject({ 'x-user-id': String(bearerUser.id), 'x-auth-method': 'bearer' });
  });

  it('refuses a revoked key, and a key revoked by SQL on both instances within a second', async () => {
    const user = await makeUser(a, { plan: 'pro' });
    const revoked = await insertKey(user.id, { revoked: true });
    const key = await insertKey(user.id);
    const m = marker();
    expect((await a.get(`/private/${m}`, { headers: { 'x-api-key': revoked } })).json).toEqual(INVALID);
    for (const gw of [a, b]) expect((await gw.get(`/private/${m}`, { headers: { 'x-api-key': key } })).status).toBe(200);
    await sql('UPDATE api_tokens SET revoked = 1 WHERE user_id = $1', [user.id]);
    // Polls may reach the upstream until the NOTIFY lands (that is the one second allowed);
    // once refused, the key stays refused and nothing more gets through.
    await everywhereWithin([a, b], async (gw) => (await gw.get(`/private/${m}`, { headers: { 'x-api-key': key } })).status === 401, 1000);
    const hits = upstream.count(m);
    for (const gw of [a, b]) expect((await gw.get(`/private/${m}`, { headers: { 'x-api-key': key } })).json).toEqual(INVALID);
    expect(upstream.count(m)).toBe(hits);
  });

  it('refuses a key from the millisecond of its expiry, and counts that refusal in the key\'s usage', async () => {
    const user = await makeUser(a, { plan: 'pro' });
    const key = await insertKey(user.id);
    // In the past, so that the stopped clock moves no sweep ahead of its time.
    const expiry = new Date(Date.now() - 10 * 60_000);
    const [row] = await sql<{ id: string }>('UPDATE api_tokens SET expires_at = $2 WHERE token_hash = $1 RETURNING id', [createHash('sha256').update(key).digest('hex'), expiry]);
    const m = marker();
    const answers = [];
    // Stopped at each instant: a key's expiry, to the millisecond.
    clock.freeze();
    try {
      for (const at of [expiry.getTime() - 1, expiry.getTime()]) {
        clock.set(new Date(at));
        answers.push(await a.get(`/private/${m}`, { headers: { 'x-api-key': key } }));
      }
    } finally {
      clock.thaw();
    }
    expect(answers[0]!.status).toBe(200);
    expect([answers[1]!.status, answers[1]!.json, answers[1]!.headers['www-authenticate']]).toEqual([401, INVALID, INVALID_CHALLENGE]);
    expect(upstream.count(m)).toBe(1);
    // The key was known, and refused itself: a use, and a denied one (CONTRACT §21).
    await a.services.keyUsage.flush();
    const usage = await a.get(`/api/v1/user/api-keys/${row!.id}/usage`, { headers: bearer(user.access) });
    const days = usage.json.days as Array<{ requests: number; denied: number }>;
    expect(days.reduce((sum, d) => ({ requests: sum.requests + d.requests, denied: sum.denied + d.denied }), { requests: 0, denied: 0 })).toEqual({ requests: 2, denied: 1 });
  });

  it('refuses a key whose checksum is wrong without looking it up; a well-formed unknown key is looked up', async () => {
    const unknown = newApiKey().key;
    const forged = unknown.slice(0, -1) + (unknown.endsWith('0') ? '1' : '0');
    const m = marker();
    for (const [key, looked] of [[forged, false], [unknown, true]] as const) {
      let res: Awaited<ReturnType<TestGateway['get']>> | undefined;
      const queries = await queriesDuring(a, async () => { res = await a.get(`/private/${m}`, { headers: { 'x-api-key': key } }); });
      expect([res!.status, res!.json, res!.headers['www-authenticate']], key).toEqual([401, INVALID, INVALID_CHALLENGE]);
      expect(queries.some((text) => /\bFROM\s+api_tokens\b/i.test(text)), key).toBe(looked);
    }
    expect(upstream.count(m)).toBe(0);
  });

  it('auth: optional passes anonymous requests and identifies the ones with a valid credential', async () => {
    const user = await makeUser(a, { plan: 'pro' });
    const key = await insertKey(user.id);
    const m = marker();
    const anonymous = await a.get(`/maybe/${m}`);
    expect(anonymous.status).toBe(200);
    expect(Object.keys(anonymous.json.headers).filter((h) => h.startsWith('x-user-') || h === 'x-auth-method')).toEqual([]);
    const withBearer = await b.get(`/maybe/${m}`, { headers: bearer(user.access) });
    expect(withBearer.json.headers).toMatchObject({ 'x-user-id': String(user.id), 'x-auth-method': 'bearer' });
    const withKey = await a.get(`/maybe/${m}`, { headers: { 'x-api-key': key } });
    expect(withKey.json.headers).toMatchObject({ 'x-user-id': String(user.id), 'x-auth-method': 'api-key' });
    const invalid = await b.get(`/maybe/${m}`, { headers: bearer('not.a.jwt') });
    expect(invalid.status).toBe(401);
    expect(invalid.json).toEqual(INVALID);
    expect(upstream.count(m)).toBe(3);
  });

  it('auth: none never authenticates nor refuses', async () => {
    const m = marker();
    for (const headers of [{}, bearer('not.a.jwt'), { 'x-api-key': 'gw_unknown' }] as Array<Record<string, string>>) {
      const res = await a.get(`/open/${m}`, { headers });
      expect(res.status).toBe(200);
      expect(res.json.headers['x-user-id']).toBeUndefined();
    }
    expect(upstream.count(m)).toBe(3);
  });
});

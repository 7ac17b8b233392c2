// Usage per API key (issue 51, CONTRACT §21, docs/api-keys.md "Usage per key"): requests and
// denials per key per UTC day, counted off the request path and visible within 10 s, 30 days
// oldest first with the empty ones at 0; two instances add up exactly; a bearer sign-in only.
// The page's command is run as written.
import { execFile } from 'node:child_process';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { utcDay } from '../../src/time.js';
import { docsBlock, expectShown, shownOutput } from '../helpers/docs.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import {
  bearer, closeSql, describeWithServices, eventually, makeUser, startTwoGateways, testClock, testConfig, throwawayDatabase,
  type TestGateway, type ThrowawayDatabase,
} from '../helpers/gateway.js';

const KEYS = '/api/v1/user/api-keys';
const ME = '/api/v1/user/me';
const DAY_MS = 86_400_000;

interface Day { date: string; requests: number; denied: number }

describeWithServices('usage per API key (CONTRACT §21)', () => {
  let db: ThrowawayDatabase;
  let upstream: EchoUpstream;
  let a: TestGateway;
  let b: TestGateway;
  const clock = testClock();

  beforeAll(async () => {
    // The gateways' clock runs from midday UTC, so that no test's minutes (a key two minutes past
    // its expiry) cross a midnight into the next day's row, as a CI run at 23:58 UTC once did.
    clock.set(new Date(Math.floor(Date.now() / DAY_MS) * DAY_MS + DAY_MS / 2));
    db = await throwawayDatabase({ migrated: true });
    upstream = await startEchoUpstream();
    [a, b] = await startTwoGateways(testConfig({
      storage: db.storage,
      apiKeys: { plans: 'all' },
      upstreams: { app: { url: upstream.url } },
      routes: [{ path: '/reports', upstream: 'app', scopes: ['reports:read'] }, { path: '/premium', upstream: 'app', plans: ['premium'] },
        { path: '/daily', upstream: 'app', dailyLimit: true }],
    }), { clock });
    // The docs' key is 7.
    await db.sql("SELECT setval(pg_get_serial_sequence('api_tokens', 'id'), 6)");
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
    await upstream?.close();
    await db?.drop();
    await closeSql();
  });

  const create = async (access: string, body: unknown) => (await a.post(KEYS, body, { headers: bearer(access) })).json as { id: number; key: string };
  const usage = async (gw: TestGateway, access: string, id: number | string) => gw.get(`${KEYS}/${id}/usage`, { headers: bearer(access) });
  const days = async (access: string, id: number) => (await usage(a, access, id)).json.days as Day[];
  const flushed = () => Promise.all([a, b].map((gw) => gw.services.keyUsage.flush()));

  it('answers as docs/api-keys.md shows', async () => {
    const user = await makeUser(a);
    const key = await create(user.access, { name: 'deploys' });
    expect(key.id).toBe(7);
    for (const gw of [a, b]) expect((await gw.get(ME, { headers: { 'x-api-key': key.key } })).status).toBe(200);
    expect((await b.get(KEYS, { headers: { 'x-api-key': key.key } })).status).toBe(401);
    await flushed();
    const block = docsBlock('api-keys', 'key-usage').replaceAll('localhost:8080', new URL(a.url).host);
    const stdout = await new Promise<string>((resolve, reject) => {
      execFile('bash', ['-e', '-o', 'pipefail', '-c', block], { env: { PATH: process.env.PATH ?? '', ACCESS_TOKEN: user.access }, timeout: 30_000 },
        (err, out, stderr) => (err ? reject(new Error(stderr)) : resolve(out)));
    });
    expectShown(stdout, shownOutput(block));
    expect((JSON.parse(stdout) as { days: Day[] }).days.at(-1)).toEqual({ date: utcDay(clock()), requests: 3, denied: 1 });
  });

  it('gives 30 UTC days, oldest first, today last, with requests and the denied among them', async () => {
    const user = await makeUser(a, { plan: 'pro' });
    const key = await create(user.access, { name: 'all rights' });
    const scoped = await create(user.access, { name: 'reader', scopes: ['reports:read'] });
    const fresh = await create(user.access, { name: 'unused' });
    const asKey = (gw: TestGateway, k: string, path: string) => gw.get(path, { headers: { 'x-api-key': k } });
    // Yesterday (by the gateways' clock): two requests.
    clock.advance(-DAY_MS);
    try {
      for (const gw of [a, b]) expect((await asKey(gw, key.key, '/reports/1')).status).toBe(200);
    } finally {
      clock.advance(DAY_MS);
    }
    // Today: allowed on a route and an own endpoint; denied for the plan, for a bearer-only endpoint, for a scope.
    const answers = await Promise.all([
      asKey(a, key.key, '/reports/2'), asKey(b, key.key, ME), asKey(a, key.key, '/premium/1'), asKey(b, key.key, KEYS), asKey(a, key.key, '/nowhere'),
      asKey(b, scoped.key, '/premium/2'), asKey(a, scoped.key, '/reports/3'),
    ]);
    // A path no route takes is answered before any credential is read: no key is known, none counted.
    expect(answers.map((r) => r.status)).toEqual([200, 200, 403, 401, 404, 403, 200]);
    // Written by hand: 29 days ago is the oldest day shown, 30 days ago is not.
    const today = Math.floor(clock().getTime() / DAY_MS);
    const dayAgo = (n: number) => utcDay(new Date((today - n) * DAY_MS));
    await db.sql('INSERT INTO api_key_usage (key_id, day, requests, denied) VALUES ($1, $2, 7, 1), ($1, $3, 99, 99)', [key.id, dayAgo(29), dayAgo(30)]);
    await flushed();

    const shown = await days(user.access, key.id);
    expect(shown).toHaveLength(30);
    expect(shown.map((d) => d.date)).toEqual(Array.from({ length: 30 }, (_, i) => dayAgo(29 - i)));
    expect(shown[0]).toEqual({ date: dayAgo(29), requests: 7, denied: 1 });
    expect(shown[28]).toEqual({ date: dayAgo(1), requests: 2, denied: 0 });
    expect(shown[29]).toEqual({ date: dayAgo(0), requests: 4, denied: 2 });
    expect(shown.slice(1, 28).every((d) => d.requests === 0 && d.denied === 0)).toBe(true);
    expect((await days(user.access, scoped.id)).at(-1)).toEqual({ date: dayAgo(0), requests: 2, denied: 1 });
    expect((await days(user.access, fresh.id)).every((d) => d.requests === 0 && d.denied === 0)).toBe(true);
  });

  it('adds up what two instances counted, exactly, and shows it within 10 s without being asked to flush', async () => {
    const user = await makeUser(a);
    const key = await create(user.access, { name: 'busy' });
    const n = 40;
    const answers = await Promise.all(Array.from({ length: n }, (_, i) => (i % 2 ? a : b).get(ME, { headers: { 'x-api-key': key.key } })));
    expect(answers.every((r) => r.status === 200)).toBe(true);
    await eventually(async () => (await days(user.access, key.id)).at(-1)!.requests === n, 10_000, 200);
    await flushed();
    expect((await days(user.access, key.id)).at(-1)).toEqual({ date: utcDay(clock()), requests: n, denied: 0 });
  });

  it('counts a rolled key\'s refusals past its grace, and shows revoked keys\' usage', async () => {
    const user = await makeUser(a);
    const old = await create(user.access, { name: 'old' });
    expect((await a.get(ME, { headers: { 'x-api-key': old.key } })).status).toBe(200);
    expect((await a.post(`${KEYS}/${old.id}/roll`, {}, { headers: bearer(user.access) })).status).toBe(201);
    for (const gw of [a, b]) await eventually(async () => (await gw.get(ME, { headers: { 'x-api-key': old.key } })).status === 401, 1000);
    await a.request('DELETE', `${KEYS}/${old.id}`, { headers: bearer(user.access) });
    await flushed();
    const today = (await days(user.access, old.id)).at(-1)!;
    expect(today.requests).toBeGreaterThanOrEqual(3);
    expect(today.denied).toBe(today.requests - 1);
  });

  it('moves last_used_at for a use the key let in, not for the key refused once expired', async () => {
    const user = await makeUser(a);
    const key = await create(user.access, { name: 'short', expires_at: new Date(clock().getTime() + 60_000).toISOString() });
    const lastUsed = async () => ((await a.get(KEYS, { headers: bearer(user.access) })).json.api_keys as { id: number; last_used_at: string | null }[])
      .find((k) => k.id === key.id)!.last_used_at;
    expect((await a.get(ME, { headers: { 'x-api-key': key.key } })).status).toBe(200);
    const used = clock();
    await flushed();
    const first = await lastUsed();
    expect(Math.abs(Date.parse(first!) - used.getTime())).toBeLessThan(1000);
    // Two minutes later on the gateways' clock, past its expiry: refused, counted as denied, not a use.
    clock.advance(120_000);
    try {
      expect((await b.get(ME, { headers: { 'x-api-key': key.key } })).status).toBe(401);
      await flushed();
      expect(await lastUsed()).toBe(first);
      expect((await days(user.access, key.id)).at(-1)).toMatchObject({ requests: 2, denied: 1 });
    } finally {
      clock.advance(-120_000);
    }
  });

  it('404s another user\'s key or an unknown one; takes a bearer sign-in only; counts a quota\'s refusals', async () => {
    const user = await makeUser(a);
    const other = await makeUser(a);
    const key = await create(user.access, { name: 'mine' });
    for (const [id, access] of [[key.id, other.access], [99_999_999, user.access], ['abc', user.access]] as const) {
      const res = await usage(b, access, id);
      expect([res.status, res.json], String(id)).toEqual([404, { error: 'Clé API introuvable' }]);
    }
    const res = await a.get(`${KEYS}/${key.id}/usage`, { headers: { 'x-api-key': key.key, accept: 'application/problem+json' } });
    expect([res.status, res.json.code, res.json.error]).toEqual([401, 'api_key_not_accepted', 'Token invalide ou expiré']);
    // A free user's one counted use a day, then 429.
    const quota = [await b.get('/daily/1', { headers: { 'x-api-key': key.key } }), await a.get('/daily/2', { headers: { 'x-api-key': key.key } })];
    expect(quota.map((r) => r.status)).toEqual([200, 429]);
    await flushed();
    expect((await days(user.access, key.id)).at(-1)).toEqual({ date: utcDay(clock()), requests: 3, denied: 2 });
    // The counts go with the key (a deleted account deletes its keys).
    await db.sql('DELETE FROM users WHERE id = $1', [user.id]);
    expect(await db.sql('SELECT * FROM api_key_usage WHERE key_id = $1', [key.id])).toEqual([]);
  });
});

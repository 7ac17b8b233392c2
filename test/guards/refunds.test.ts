// Refunds (CONTRACT §23, plans.refundOn, issue 53): a counted use the upstream failed (a listed
// status, an upstream that cannot be reached) goes back once to the windows it was counted in, at
// most capPerDay times per owner and UTC day, exactly across instances; a status not listed, and
// an upstream timeout while 504 is not listed, and a response cut after it started keep it counted. An organization's pooled use goes
// back to its pool, capped per organization (CONTRACT §22).
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  bearer, closeSql, describeWithServices, makeUser, marker, ownRedisPrefix, sql, startTwoGateways, testConfig, type TestGateway, type TestUser,
} from '../helpers/gateway.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import { refusedPort } from '../helpers/ports.js';

describeWithServices('refunds of counted uses', () => {
  let upstream: EchoUpstream;
  let a: TestGateway;
  let b: TestGateway;

  beforeAll(async () => {
    upstream = await startEchoUpstream();
    // /metered/<marker>-503 answers 503 (listed), -500 answers 500 (not listed); -hang never answers.
    upstream.handle = (req, res) => {
      if (req.url?.endsWith('-hang')) return true;
      // -cut: a 200 whose body starts, then the connection is reset (a response already started).
      if (req.url?.endsWith('-cut')) {
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.write('partial ');
        setTimeout(() => res.socket?.destroy(), 50);
        return true;
      }
      const status = /-(\d{3})$/.exec(req.url ?? '')?.[1];
      if (!status) return false;
      res.writeHead(Number(status), { 'content-type': 'application/json' }).end('{"error":"upstream says no"}');
      return true;
    };
    const down = await refusedPort();
    [a, b] = await startTwoGateways(testConfig({
      upstreams: { app: { url: upstream.url }, down: { url: `http://127.0.0.1:${down}` }, slow: { url: upstream.url, timeout: '300ms' } },
      routes: [
        { path: '/metered', upstream: 'app', dailyLimit: true },
        { path: '/down', upstream: 'down', dailyLimit: true },
        { path: '/slow', upstream: 'slow', dailyLimit: true },
        { path: '/pooled', upstream: 'app', dailyLimit: true, org: 'optional' },
      ],
      organizations: { enabled: true },
      mail: { smtp: '', from: 'Gateway <no-reply@example.test>', resetUrl: 'https://app.example.test/r?token={token}', verifyUrl: 'https://app.example.test/v?token={token}',
        invitationUrl: 'https://app.example.test/j?token={token}' },
      plans: {
        limits: { counted: { daily: 2, monthly: 4 }, many: { daily: 100, monthly: 1000 } },
        refundOn: { statuses: [503], unreachable: true, capPerDay: 3 },
      },
      storage: { redisKeyPrefix: ownRedisPrefix('refunds') },
    }));
  });

  afterAll(async () => {
    await Promise.all([a, b].map((gw) => gw?.close()));
    await upstream?.close();
    await closeSql();
  });

  const get = (gw: TestGateway, path: string, user: TestUser) => gw.get(path, { headers: bearer(user.access) });
  type Me = { daily_usage: number; daily_remaining: number; monthly_usage: number; monthly_remaining: number };
  const me = async (gw: TestGateway, user: TestUser) => (await get(gw, '/api/v1/user/me', user)).json as Me;
  const refundsOf = async (id: number) => (await sql<{ refunds: number }>('SELECT refunds FROM usage_refunds WHERE user_id = $1', [id]))[0]?.refunds ?? 0;

  it('gives a use failed with a listed status back once, on the day and the month: the 429 comes one use later, and /me shows it', async () => {
    const user = await makeUser(a, { plan: 'counted' });
    const m = marker();
    const failed = await get(a, `/metered/${m}-503`, user);
    expect(failed.status).toBe(503);
    expect(failed.json).toEqual({ error: 'upstream says no' });
    await expect.poll(() => me(b, user)).toMatchObject({ daily_usage: 0, daily_remaining: 2, monthly_usage: 0, monthly_remaining: 4 });
    // Both of the day's uses are still there, on either instance; the third is refused.
    expect((await get(b, `/metered/${m}`, user)).status).toBe(200);
    expect((await get(a, `/metered/${m}`, user)).status).toBe(200);
    const refused = await get(b, `/metered/${m}`, user);
    expect(refused.status).toBe(429);
    expect(refused.json.error).toBe('Limite quotidienne atteinte (plan counted: 2 courses/jour)');
    expect(await me(a, user)).toMatchObject({ daily_usage: 2, monthly_usage: 2, monthly_remaining: 2 });
    expect(upstream.count(m)).toBe(3);
    expect(await refundsOf(user.id)).toBe(1);
  });

  it('keeps a use counted when the status is not listed', async () => {
    const user = await makeUser(a, { plan: 'counted' });
    const m = marker();
    expect((await get(a, `/metered/${m}-500`, user)).status).toBe(500);
    expect((await get(a, `/metered/${m}`, user)).status).toBe(200);
    expect((await get(b, `/metered/${m}`, user)).status).toBe(429);
    expect(await me(a, user)).toMatchObject({ daily_usage: 2, monthly_usage: 2 });
    expect(await refundsOf(user.id)).toBe(0);
  });

  it('gives back the use of an upstream that cannot be reached, before its 502 goes out', async () => {
    const user = await makeUser(a, { plan: 'counted' });
    for (const gw of [a, b, a]) {
      const res = await get(gw, `/down/${marker()}`, user);
      expect(res.status).toBe(502);
      // Given back before the answer: nothing to wait for.
      expect(await me(gw, user)).toMatchObject({ daily_usage: 0, monthly_usage: 0 });
    }
    expect(await refundsOf(user.id)).toBe(3);
  });

  it('keeps the use of an upstream that timed out: 504 is not listed', async () => {
    const user = await makeUser(a, { plan: 'counted' });
    expect((await get(a, `/slow/${marker()}-hang`, user)).status).toBe(504);
    expect(await me(a, user)).toMatchObject({ daily_usage: 1, monthly_usage: 1 });
    expect(await refundsOf(user.id)).toBe(0);
  });

  it('keeps the use of a response already started when the upstream resets it midway', async () => {
    const user = await makeUser(a, { plan: 'many' });
    const m = marker();
    // The client gets the 200's head, then the body is cut: whatever the helper makes of it, the use was served.
    const cut = await get(a, `/metered/${m}-cut`, user).then((r) => r.status, () => 'cut');
    expect([200, 'cut']).toContain(cut);
    expect(upstream.count(m)).toBe(1);
    // A refunded use after it, as a positive signal that refunds are written: only that one went back.
    expect((await get(a, `/metered/${m}-503`, user)).status).toBe(503);
    await expect.poll(() => refundsOf(user.id)).toBe(1);
    await expect.poll(() => me(b, user), { timeout: 5000 }).toMatchObject({ daily_usage: 1, monthly_usage: 1 });
    expect(await refundsOf(user.id)).toBe(1);
  });

  it('honours capPerDay exactly with parallel failures on two instances: the refunds past the cap stay counted', async () => {
    const user = await makeUser(a, { plan: 'many' });
    const m = marker();
    const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => get(i % 2 ? a : b, `/metered/${m}-${i}-503`, user)));
    expect(answers.map((r) => r.status)).toEqual(Array(10).fill(503));
    await expect.poll(() => refundsOf(user.id)).toBe(3);
    // Blocks of uses go back after a second; then the counts are the uses served less the 3 refunded.
    await expect.poll(() => me(a, user), { timeout: 5000 }).toMatchObject({ daily_usage: 7, monthly_usage: 7 });
    expect(upstream.count(m)).toBe(10);
    // A 503 after the cap is not refunded either.
    expect((await get(a, `/metered/${m}-x-503`, user)).status).toBe(503);
    await new Promise((r) => setTimeout(r, 300));
    expect(await refundsOf(user.id)).toBe(3);
    await expect.poll(() => me(b, user), { timeout: 5000 }).toMatchObject({ daily_usage: 8, monthly_usage: 8 });
  });

  it('an organization\'s pooled use the upstream failed goes back to its pool, on either instance, at most capPerDay times per organization', async () => {
    const [u, v] = [await makeUser(a), await makeUser(a)];
    const org = (await sql<{ id: number }>("INSERT INTO organizations (name, plan) VALUES ('Refunded', 'counted') RETURNING id"))[0]!.id;
    await sql("INSERT INTO memberships (org_id, user_id, role) VALUES ($1, $2, 'owner'), ($1, $3, 'member')", [org, u.id, v.id]);
    const acting = (user: TestUser) => ({ headers: { ...bearer(user.access), 'Gateway-Org': String(org) } });
    const m = marker();
    // Four failed uses by both members on both instances: three go back (capPerDay), the fourth stays counted.
    for (let i = 0; i < 4; i++) expect((await [a, b][i % 2]!.get(`/pooled/${m}-503`, acting(i % 2 ? v : u))).status).toBe(503);
    // A refund for a status follows the answer: the last one may still be on its way.
    await expect.poll(() => sql('SELECT refunds FROM org_usage_refunds WHERE org_id = $1', [org])).toEqual([{ refunds: 3 }]);
    await expect.poll(() => sql('SELECT daily_usage, monthly_usage FROM organizations WHERE id = $1', [org])).toEqual([{ daily_usage: 1, monthly_usage: 1 }]);
    expect(await sql('SELECT daily_usage FROM users WHERE id = ANY($1)', [[u.id, v.id]])).toEqual([{ daily_usage: 0 }, { daily_usage: 0 }]);
    // The pool's day (2) has one use left, whoever takes it.
    expect((await b.get(`/pooled/${m}`, acting(v))).status).toBe(200);
    expect((await a.get(`/pooled/${m}`, acting(u))).status).toBe(429);
  });
});

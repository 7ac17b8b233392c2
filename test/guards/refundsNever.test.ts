// Refunds that must not happen (CONTRACT §23, plans.refundOn, issue 53 audit): a decision of the
// decisions listener (CONTRACT §11) counts a use with no upstream call to fail it, even on a route
// whose upstream cannot be reached; a WebSocket upgrade the upstream accepted keeps its use however
// the socket ends; and a use counted in a day and month that have ended when its failure comes back
// is not given back to the new ones. Each test shows a refund being written first, so that the use
// kept is a refund refused, not refunds switched off.
import type http from 'node:http';
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  bearer, closeSql, describeWithServices, makeUser, marker, ownRedisPrefix, sql, startDecidingGateway, testClock, type TestGateway, type TestUser,
} from '../helpers/gateway.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import { refusedPort } from '../helpers/ports.js';
import { opened, startWsUpstream, wsConnect, type WsUpstream } from '../helpers/wsUpstream.js';

describeWithServices('uses never refunded', () => {
  let upstream: EchoUpstream;
  let ws: WsUpstream;
  let gw: TestGateway;
  const clock = testClock();
  // Requests to paths ending in -late wait here until the test answers them.
  const held: http.ServerResponse[] = [];

  beforeAll(async () => {
    [upstream, ws] = await Promise.all([startEchoUpstream(), startWsUpstream()]);
    upstream.handle = (req, res) => {
      if (req.url?.endsWith('-late')) {
        held.push(res);
        return true;
      }
      if (!req.url?.endsWith('-503')) return false;
      res.writeHead(503, { 'content-type': 'application/json' }).end('{"error":"upstream says no"}');
      return true;
    };
    const down = await refusedPort();
    gw = await startDecidingGateway({
      upstreams: { app: { url: upstream.url }, down: { url: `http://127.0.0.1:${down}` }, ws: { url: ws.url } },
      routes: [
        { path: '/metered', upstream: 'app', dailyLimit: true },
        { path: '/down', upstream: 'down', dailyLimit: true },
        { path: '/stream', upstream: 'ws', dailyLimit: true, websocket: true },
      ],
      plans: {
        limits: { many: { daily: 100, monthly: 1000 }, counted: { daily: 2, monthly: 4 } },
        refundOn: { statuses: [503], unreachable: true, capPerDay: 10 },
      },
      storage: { redisKeyPrefix: ownRedisPrefix('refunds-never') },
    }, { clock });
  });

  afterAll(async () => {
    for (const res of held) res.destroy();
    await gw?.close();
    await Promise.all([upstream?.close(), ws?.close()]);
    await closeSql();
  });

  type Me = { daily_usage: number; monthly_usage: number };
  const me = async (user: TestUser) => (await gw.get('/api/v1/user/me', { headers: bearer(user.access) })).json as Me;
  const refundsOf = async (id: number) => (await sql<{ refunds: number }>('SELECT sum(refunds)::int AS refunds FROM usage_refunds WHERE user_id = $1', [id]))[0]?.refunds ?? 0;

  it('never gives back a decision\'s use, even on a refundOn route whose upstream cannot be reached', async () => {
    const user = await makeUser(gw, { plan: 'many' });
    const m = marker();
    for (const path of [`/decisions/down/${m}`, `/decisions/metered/${m}-503`]) {
      const decided = await gw.decide('GET', path, { headers: bearer(user.access) });
      expect(decided.status).toBe(200);
      expect(decided.headers['x-user-id']).toBe(String(user.id));
    }
    expect(upstream.count(m)).toBe(0);
    // The same route proxied: its use goes back before the 502 (a refund is written)...
    expect((await gw.get(`/down/${m}`, { headers: bearer(user.access) })).status).toBe(502);
    expect(await refundsOf(user.id)).toBe(1);
    // ...and the two decisions' uses stay counted.
    expect(await me(user)).toMatchObject({ daily_usage: 2, monthly_usage: 2 });
  });

  it('never gives back the use of a WebSocket upgrade the upstream accepted, when the upstream then goes away', async () => {
    const user = await makeUser(gw, { plan: 'many' });
    const m = marker();
    const socket = opened(await wsConnect(`${gw.url.replace(/^http/, 'ws')}/stream/${m}/hello`, { headers: bearer(user.access) }));
    expect(await socket.next()).toBe('hello');
    expect(ws.last(m)).toBeDefined();
    expect(await me(user)).toMatchObject({ daily_usage: 1, monthly_usage: 1 });
    // The upstream drops every socket and stops listening: the client's socket ends abnormally.
    await ws.close();
    expect((await socket.closed).code).not.toBe(1000);
    // An unreachable upstream after it: its use goes back before the 502 (a refund is written)...
    expect((await gw.get(`/down/${m}`, { headers: bearer(user.access) })).status).toBe(502);
    expect(await refundsOf(user.id)).toBe(1);
    // ...and the upgrade's use is still counted.
    expect(await me(user)).toMatchObject({ daily_usage: 1, monthly_usage: 1 });
  });

  it('never gives a use counted in a day and month that have ended back to the new ones', async () => {
    clock.set(new Date('2027-01-31T23:59:50Z'));
    const user = await makeUser(gw, { plan: 'counted' });
    const m = marker();
    // January 31st: a use served, and one the upstream holds.
    expect((await gw.get(`/metered/${m}`, { headers: bearer(user.access) })).status).toBe(200);
    const late = gw.get(`/metered/${m}-late`, { headers: bearer(user.access) });
    await expect.poll(() => held.length).toBe(1);
    expect(await me(user)).toMatchObject({ daily_usage: 2, monthly_usage: 2 });
    // February 1st: a new day and month, one use in it.
    clock.set(new Date('2027-02-01T00:00:05Z'));
    expect((await gw.get(`/metered/${m}`, { headers: bearer(user.access) })).status).toBe(200);
    expect(await me(user)).toMatchObject({ daily_usage: 1, monthly_usage: 1 });
    // January's held use fails now with a listed status.
    held.shift()!.writeHead(503, { 'content-type': 'application/json' }).end('{"error":"upstream says no"}');
    expect((await late).status).toBe(503);
    // Its refund, which follows the answer, is decided (February 1st's refund count, the cap's)...
    await expect.poll(() => sql("SELECT refunds FROM usage_refunds WHERE user_id = $1 AND day = '2027-02-01'", [user.id])).toEqual([{ refunds: 1 }]);
    // ...and February's use stays counted.
    expect(await me(user)).toMatchObject({ daily_usage: 1, monthly_usage: 1 });
    expect(await sql("SELECT daily_usage, monthly_usage, to_char(last_usage_month, 'YYYY-MM-DD') AS month FROM users WHERE id = $1", [user.id]))
      .toEqual([{ daily_usage: 1, monthly_usage: 1, month: '2027-02-01' }]);
    expect(upstream.count(m)).toBe(3);
  });
});

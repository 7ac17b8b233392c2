// The plan guard (spec §5, CONTRACT §12) is a list, not a ladder: a user whose plan is not in the
// route's `plans` is refused whatever that plan is (a paid plan is no pass to every paid route),
// on each way a request meets the guard: proxied, asked of the decisions listener, and as a
// WebSocket upgrade. The refusal never reaches the upstream.
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  bearer, closeSql, describeWithServices, makeUser, marker, startDecidingGateway, type TestGateway, type TestUser,
} from '../helpers/gateway.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import { opened, refused, startWsUpstream, wsConnect, type WsUpstream } from '../helpers/wsUpstream.js';

const UPGRADE_URL = '/api/v1/subscription/upgrade';
const insufficient = (required: string[], current: string) => ({ error: 'Plan insuffisant', required, current_plan: current, upgrade_url: UPGRADE_URL });

describeWithServices('plan lists', () => {
  let upstream: EchoUpstream;
  let ws: WsUpstream;
  let gw: TestGateway;
  const users: Record<'free' | 'premium' | 'pro', TestUser> = {} as never;

  beforeAll(async () => {
    [upstream, ws] = await Promise.all([startEchoUpstream(), startWsUpstream()]);
    gw = await startDecidingGateway({
      upstreams: { app: { url: upstream.url }, live: { url: ws.url } },
      routes: [
        { path: '/tier/pro', upstream: 'app', plans: ['pro'] },
        { path: '/tier/premium', upstream: 'app', plans: ['premium'] },
        { path: '/live/pro', upstream: 'live', plans: ['pro'], websocket: true },
      ],
    });
    for (const plan of ['free', 'premium', 'pro'] as const) users[plan] = await makeUser(gw, { plan });
  });
  afterAll(async () => {
    await gw?.close();
    await Promise.all([upstream?.close(), ws?.close()]);
    await closeSql();
  });

  const wsUrl = (path: string) => `${gw.url.replace(/^http/, 'ws')}${path}`;

  it.each([
    ['/tier/pro', 'premium', ['pro']],
    ['/tier/pro', 'free', ['pro']],
    ['/tier/premium', 'free', ['premium']],
    ['/tier/premium', 'pro', ['premium']],
  ] as const)('proxied: %s refuses a %s user with 403 and never reaches the upstream', async (route, plan, required) => {
    const m = marker();
    const res = await gw.get(`${route}/${m}`, { headers: bearer(users[plan].access) });
    expect([res.status, res.json]).toEqual([403, insufficient([...required], plan)]);
    expect(upstream.count(m)).toBe(0);
  });

  it.each([
    ['/tier/pro', 'pro'],
    ['/tier/premium', 'premium'],
  ] as const)('proxied: %s lets a %s user through to the upstream', async (route, plan) => {
    const m = marker();
    const res = await gw.get(`${route}/${m}`, { headers: bearer(users[plan].access) });
    expect(res.status, res.text).toBe(200);
    expect(upstream.count(m)).toBe(1);
    expect(upstream.last(m)!.headers['x-user-plan']).toBe(plan);
  });

  it('decisions listener: a premium user is refused a pro-only route, a free one a premium-only route; the listed plans pass', async () => {
    const decide = (path: string, plan: keyof typeof users) => gw.decide('GET', `/decisions${path}/${marker()}`, { headers: bearer(users[plan].access) });
    for (const [route, plan, required] of [['/tier/pro', 'premium', ['pro']], ['/tier/premium', 'free', ['premium']], ['/tier/premium', 'pro', ['premium']]] as const) {
      const res = await decide(route, plan);
      expect([res.status, res.json], `${plan} on ${route}`).toEqual([403, insufficient([...required], plan)]);
      expect(JSON.parse(res.headers['x-gateway-error'] as string)).toEqual(insufficient([...required], plan));
      expect(res.headers['x-user-id']).toBeUndefined();
    }
    for (const [route, plan] of [['/tier/pro', 'pro'], ['/tier/premium', 'premium']] as const) {
      const res = await decide(route, plan);
      expect([res.status, res.headers['x-user-plan']], `${plan} on ${route}`).toEqual([200, plan]);
    }
  });

  it('WebSocket upgrade: a premium user is refused a pro-only route before the upstream hears of it; a pro user gets the socket', async () => {
    const m = marker();
    const refusal = refused(await wsConnect(wsUrl(`/live/pro/${m}`), { headers: bearer(users.premium.access) }));
    expect([refusal.status, refusal.json]).toEqual([403, insufficient(['pro'], 'premium')]);
    expect(ws.last(m)).toBeUndefined();

    const socket = opened(await wsConnect(wsUrl(`/live/pro/${m}`), { headers: bearer(users.pro.access) }));
    expect(ws.last(m)!.headers['x-user-plan']).toBe('pro');
    socket.ws.send('hi');
    expect(await socket.next()).toBe('echo:hi');
    socket.ws.close(1000);
    await socket.closed;
  });
});

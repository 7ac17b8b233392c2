// WebSocket routes (CONTRACT §10) with real `ws` clients and a real `ws` upstream: the guards on
// the upgrade (a daily use per accepted upgrade), identity and header rules on the upstream's
// handshake, access_token on upgrades only, relaying and closes, and sockets closed with 1008 on
// both instances when their user no longer passes the route's guards.
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { docsExample } from '../helpers/docs.js';
import {
  bearer, closeSql, configProblems, describeWithServices, eventually, makeUser, marker, sql, startTestGateway, startTwoGateways, testConfig, testConfigFromYaml, usage,
  type TestGateway, type TestUser,
} from '../helpers/gateway.js';
import { startEchoUpstream } from '../helpers/echoUpstream.js';
import { refusedPort } from '../helpers/ports.js';
import { closedWithin, opened, refused, startWsUpstream, wsConnect, type TestSocket, type WsUpstream } from '../helpers/wsUpstream.js';

const wsUrl = (gw: TestGateway, path: string) => `${gw.url.replace(/^http/, 'ws')}${path}`;

describeWithServices('WebSocket routes', () => {
  let upstream: WsUpstream;
  let a: TestGateway;
  let b: TestGateway;
  let premium: TestUser;

  beforeAll(async () => {
    upstream = await startWsUpstream();
    // The docs' example as written, on two instances sharing the database and Redis.
    [a, b] = await startTwoGateways(testConfigFromYaml(docsExample('websockets', 'websocket'), { APP_URL: upstream.url }));
    premium = await makeUser(a, { plan: 'premium' });
  });

  afterAll(async () => {
    await Promise.all([a?.close(), b?.close()]);
    await upstream?.close();
    await closeSql();
  });

  it('relays text and binary messages both ways, with the subprotocol the upstream chose', async () => {
    const m = marker();
    const socket = opened(await wsConnect(wsUrl(a, `/api/v1/stream/${m}/hello`), { headers: bearer(premium.access), protocols: ['chat.v1', 'chat.v2'] }));
    expect(socket.ws.protocol).toBe('chat.v2');
    expect(upstream.last(m)!.protocol).toBe('chat.v2');
    expect(await socket.next()).toBe('hello');
    socket.ws.send('ping');
    expect(await socket.next()).toBe('echo:ping');
    socket.ws.send(Buffer.from([0, 1, 2, 255]));
    expect(await socket.next()).toEqual(Buffer.from([0, 1, 2, 255]));
    // A close is passed on with its code and reason.
    socket.ws.close(4000, 'bye');
    expect(await socket.closed).toEqual({ code: 4000, reason: 'bye' });
    await eventually(() => upstream.closes.some((c) => c.url.includes(m) && c.code === 4000 && c.reason === 'bye'));
  });

  it('gives the upstream the identity headers and the header rules of any proxied request, and never the token', async () => {
    const m = marker();
    const socket = opened(await wsConnect(wsUrl(a, `/api/v1/stream/${m}?topic=races&access_token=${premium.access}&x=1`), {
      headers: {
        'x-user-id': '1', X_User_Plan: 'pro', 'x-original-url': '/admin', 'x-real-ip': '6.6.6.6', 'x-forwarded-for': '6.6.6.6',
        origin: 'https://app.example.com', cookie: `theme=dark; session=${premium.access}`,
      },
    }));
    const seen = upstream.last(m)!;
    expect(seen.url).toBe(`/api/v1/stream/${m}?topic=races&x=1`);
    expect(seen.headers).toMatchObject({
      'x-user-id': String(premium.id), 'x-user-plan': 'premium', 'x-user-email': premium.email, 'x-auth-method': 'bearer',
      'x-forwarded-for': '127.0.0.1', 'x-forwarded-proto': 'http', origin: 'https://app.example.com', cookie: 'theme=dark',
    });
    expect(seen.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    for (const gone of ['authorization', 'x_user_plan', 'x-original-url', 'x-real-ip']) expect(seen.headers[gone], gone).toBeUndefined();
    socket.ws.close();
    // Nor does the gateway's own log hold it (the URL of its request line is masked).
    expect(a.logs.join('')).not.toContain(premium.access.split('.')[2]);
  });

  it('passes the upstream\'s own headers on its 101 to the client (its cookies included), keeping the gateway\'s request id', async () => {
    const m = marker();
    const socket = opened(await wsConnect(wsUrl(a, `/api/v1/stream/${m}/cookie`), { headers: bearer(premium.access) }));
    expect(socket.headers['set-cookie']).toEqual(['session=s1; Path=/; HttpOnly', 'theme=dark']);
    expect(socket.headers['x-upstream']).toBe('ws');
    expect(socket.headers['x-request-id']).toBe(upstream.last(m)!.headers['x-request-id']);
    expect(socket.headers['keep-alive']).toBeUndefined();
    socket.ws.send('ping');
    expect(await socket.next()).toBe('echo:ping');
    socket.ws.close();
  });

  it('counts sockets opened and open now in the metrics, by route', async () => {
    const series = async (name: string) => {
      const metric = (await a.services.metrics.registry.getSingleMetric(name)!.get()).values;
      return metric.find((v) => v.labels.route === '/api/v1/stream')?.value ?? 0;
    };
    const openedBefore = await series('gateway_websockets_opened_total');
    const socket = opened(await wsConnect(wsUrl(a, `/api/v1/stream/${marker()}`), { headers: bearer(premium.access) }));
    expect(await series('gateway_websockets_opened_total')).toBe(openedBefore + 1);
    expect(await series('gateway_websockets_open')).toBeGreaterThanOrEqual(1);
    const openNow = await series('gateway_websockets_open');
    socket.ws.close();
    await socket.closed;
    await eventually(async () => (await series('gateway_websockets_open')) === openNow - 1);
  });

  it('runs the route\'s guards on the upgrade: 401 without a token, 403 for a plan outside the route\'s, nothing opened upstream', async () => {
    const m = marker();
    const anonymous = refused(await wsConnect(wsUrl(a, `/api/v1/stream/${m}`)));
    expect(anonymous.status).toBe(401);
    expect(anonymous.json).toEqual({ error: 'Token invalide ou expiré' });
    expect(anonymous.headers['www-authenticate']).toBe('Bearer realm="gateway"');
    const badToken = refused(await wsConnect(wsUrl(a, `/api/v1/stream/${m}?access_token=not.a.token`)));
    expect(badToken.status).toBe(401);
    const free = await makeUser(a);
    const poor = refused(await wsConnect(wsUrl(a, `/api/v1/stream/${m}?access_token=${free.access}`)));
    expect(poor.status).toBe(403);
    expect(poor.json).toMatchObject({ error: 'Plan insuffisant', upgrade_url: '/api/v1/subscription/upgrade' });
    expect(upstream.last(m)).toBeUndefined();
  });

  it('counts one daily use per accepted upgrade, on either instance, whatever the socket carries', async () => {
    const free = await makeUser(a);
    const m = marker();
    const first = opened(await wsConnect(wsUrl(a, `/api/v1/live-race/${m}?access_token=${free.access}`)));
    for (let i = 0; i < 5; i++) {
      first.ws.send(`lap ${i}`);
      expect(await first.next()).toBe(`echo:lap ${i}`);
    }
    expect((await usage(free.id)).daily_usage).toBe(1);
    const second = refused(await wsConnect(wsUrl(b, `/api/v1/live-race/${m}?access_token=${free.access}`)));
    expect(second.status).toBe(429);
    expect(second.json.error).toBe('Limite quotidienne atteinte (plan free: 1 course/jour)');
    expect((await usage(free.id)).daily_usage).toBe(1);
    first.ws.close();
  });

  it('admits one upgrade of a free user\'s day when many race on both instances', async () => {
    const free = await makeUser(a);
    const m = marker();
    const outcomes = await Promise.all(Array.from({ length: 8 }, (_, i) => wsConnect(wsUrl(i % 2 ? a : b, `/api/v1/live-race/${m}/${i}?access_token=${free.access}`))));
    const accepted = outcomes.filter((o) => !('status' in o));
    expect(accepted).toHaveLength(1);
    expect(outcomes.filter((o) => 'status' in o).map((o) => (o as { status: number }).status)).toEqual(Array(7).fill(429));
    expect((await usage(free.id)).daily_usage).toBe(1);
    for (const socket of accepted) (socket as TestSocket).ws.close();
  });

  it('answers a malformed handshake 400 before the guards, counting no use: RFC 6455\'s version 13 only', async () => {
    const free = await makeUser(a);
    // 8 is a draft's (hybi-08) that the ws library still speaks; the docs and RFC 6455 say 13.
    for (const version of ['7', '8', '14', '13, 8']) {
      const raw = await new Promise<string>((resolve) => {
        const socket = net.connect(Number(new URL(a.url).port), '127.0.0.1', () => socket.end(
          `GET /api/v1/live-race/x HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: ${version}\r\n`
          + `Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nAuthorization: Bearer ${free.access}\r\n\r\n`));
        let out = '';
        socket.setEncoding('utf8').on('data', (c: string) => { out += c; });
        socket.on('close', () => resolve(out));
      });
      expect(raw.split('\r\n', 1)[0], version).toBe('HTTP/1.1 400 Bad Request');
      expect(raw).toContain('{"error":"Requête invalide"}');
      expect(raw.toLowerCase()).toContain('sec-websocket-version: 13\r\n');
    }
    expect((await usage(free.id)).daily_usage).toBe(0);
  });

  it('takes access_token on upgrades only: a plain request carrying it is anonymous, and the token goes nowhere', async () => {
    const m = marker();
    const plain = await a.get(`/api/v1/stream/${m}?access_token=${premium.access}`);
    expect(plain.status).toBe(401);
  });

  it('closes the sockets of a deactivated user with 1008 on every instance within a second, and only theirs', async () => {
    const user = await makeUser(a, { plan: 'pro' });
    const bystander = opened(await wsConnect(wsUrl(b, `/api/v1/stream/${marker()}`), { headers: bearer(premium.access) }));
    const onA = opened(await wsConnect(wsUrl(a, `/api/v1/stream/${marker()}`), { headers: bearer(user.access) }));
    const onB = opened(await wsConnect(wsUrl(b, `/api/v1/stream/${marker()}?access_token=${user.access}`)));
    // By hand, as an operator would: the change reaches both instances through the database.
    await sql('UPDATE users SET is_active = 0 WHERE id = $1', [user.id]);
    const deadline = Date.now() + 1000;
    const expected = { code: 1008, reason: 'Utilisateur introuvable' };
    expect(await closedWithin(onA, deadline - Date.now())).toEqual(expected);
    expect(await closedWithin(onB, deadline - Date.now())).toEqual(expected);
    bystander.ws.send('still here');
    expect(await bystander.next()).toBe('echo:still here');
    bystander.ws.close();
  });

  it('closes the sockets of an account its owner deletes, on the other instance too', async () => {
    const user = await makeUser(a, { plan: 'pro' });
    const socket = opened(await wsConnect(wsUrl(b, `/api/v1/stream/${marker()}`), { headers: bearer(user.access) }));
    const deleted = await a.request('DELETE', '/api/v1/user/me', { json: { password: user.password }, headers: bearer(user.access) });
    expect(deleted.status).toBe(200);
    expect(await closedWithin(socket, 1000)).toEqual({ code: 1008, reason: 'Utilisateur introuvable' });
  });

  it('closes a socket with 1008 when its user\'s plan leaves the route\'s plans, and keeps it when the plan still fits', async () => {
    const user = await makeUser(a, { plan: 'premium' });
    const m = marker();
    const socket = opened(await wsConnect(wsUrl(b, `/api/v1/stream/${m}`), { headers: bearer(user.access) }));
    await sql("UPDATE users SET plan = 'pro' WHERE id = $1", [user.id]);
    socket.ws.send('after pro');
    expect(await socket.next()).toBe('echo:after pro');
    await sql("UPDATE users SET plan = 'free' WHERE id = $1", [user.id]);
    expect(await closedWithin(socket, 1000)).toEqual({ code: 1008, reason: 'Plan insuffisant' });
    // The upstream's side is closed with the same code.
    await eventually(() => upstream.closes.some((c) => c.url.includes(m) && c.code === 1008));
  });

  it('closes a socket opened with an API key when the key is revoked', async () => {
    const user = await makeUser(a, { plan: 'pro' });
    const key = (await a.post('/api/v1/user/api-token', {}, { headers: bearer(user.access) })).json.api_token as string;
    const socket = opened(await wsConnect(wsUrl(a, `/api/v1/stream/${marker()}`), { headers: { 'x-api-key': key } }));
    expect(upstream.handshakes.at(-1)!.headers['x-auth-method']).toBe('api-key');
    expect(upstream.handshakes.at(-1)!.headers['x-api-key']).toBeUndefined();
    await sql('UPDATE api_tokens SET revoked = 1 WHERE token_hash = $1', [createHash('sha256').update(key).digest('hex')]);
    expect(await closedWithin(socket, 1000)).toEqual({ code: 1008, reason: 'Token invalide ou expiré' });
  });

  it('closes a socket opened with an API key when the key expires, on its own date or at the end of a roll\'s grace', async () => {
    const user = await makeUser(a, { plan: 'pro' });
    const create = async (body: Record<string, unknown>) => (await a.post('/api/v1/user/api-keys', { name: 'ws', ...body }, { headers: bearer(user.access) })).json;
    const expiring = await create({ expires_at: new Date(Date.now() + 2500).toISOString() });
    const rolled = await create({});
    const first = opened(await wsConnect(wsUrl(b, `/api/v1/stream/${marker()}`), { headers: { 'x-api-key': expiring.key } }));
    const second = opened(await wsConnect(wsUrl(b, `/api/v1/stream/${marker()}`), { headers: { 'x-api-key': rolled.key } }));
    // Nothing is announced when a date passes: the instance holding the socket keeps the time itself.
    expect(await closedWithin(first, Date.parse(expiring.expires_at) + 1000 - Date.now())).toEqual({ code: 1008, reason: 'Token invalide ou expiré' });
    const roll = await a.post(`/api/v1/user/api-keys/${rolled.id}/roll`, { grace: '2s' }, { headers: bearer(user.access) });
    expect(roll.status).toBe(201);
    second.ws.send('during the grace');
    expect(await second.next()).toBe('echo:during the grace');
    expect(await closedWithin(second, 3000)).toEqual({ code: 1008, reason: 'Token invalide ou expiré' });
  });

  it('passes on the upstream\'s refusal of the handshake, and answers 502 when the upstream is away', async () => {
    const m = marker();
    const answer = refused(await wsConnect(wsUrl(a, `/api/v1/stream/${m}/refuse`), { headers: bearer(premium.access) }));
    expect(answer.status).toBe(403);
    expect(answer.json).toEqual({ upstream: 'refused' });
    expect(answer.headers['x-upstream']).toBe('ws');

    const own = await startTestGateway(testConfig({ upstreams: { app: { url: `http://127.0.0.1:${await refusedPort()}`, timeout: '2s' } }, routes: [{ path: '/ws', upstream: 'app', auth: 'none', websocket: true }] }));
    try {
      const away = refused(await wsConnect(wsUrl(own, '/ws/x')));
      expect(away.status).toBe(502);
      expect(away.json).toEqual({ error: 'Service en amont indisponible' });
    } finally {
      await own.close();
    }
  });

  it('closes a client\'s socket with 1009 when a message is over server.bodyLimit', async () => {
    const own = await startTestGateway(testConfig({
      server: { bodyLimit: '1kb' }, upstreams: { app: { url: upstream.url } }, routes: [{ path: '/ws', upstream: 'app', auth: 'none', websocket: true }],
    }));
    try {
      const socket = opened(await wsConnect(wsUrl(own, '/ws/big')));
      socket.ws.send('x'.repeat(1000));
      expect(await socket.next()).toBe(`echo:${'x'.repeat(1000)}`);
      socket.ws.send('x'.repeat(2000));
      expect((await socket.closed).code).toBe(1009);
    } finally {
      await own.close();
    }
  });

  it('closes every socket with 1001 when the gateway stops', async () => {
    const own = await startTestGateway(testConfig({ upstreams: { app: { url: upstream.url } }, routes: [{ path: '/ws', upstream: 'app', auth: 'none', websocket: true }] }));
    const m = marker();
    const sockets = await Promise.all([1, 2, 3].map(async (i) => opened(await wsConnect(wsUrl(own, `/ws/${m}/${i}`)))));
    await own.close();
    for (const socket of sockets) expect((await socket.closed).code).toBe(1001);
    await eventually(() => upstream.closes.filter((c) => c.url.includes(m) && c.code === 1001).length === 3);
  });
});

describeWithServices('upgrades elsewhere', () => {
  it('serves an Upgrade on a route without websocket: true, and curl\'s h2c upgrade with a body, as the plain requests they are', async () => {
    const upstream = await startEchoUpstream();
    const wsUp = await startWsUpstream();
    const gw = await startTestGateway(testConfig({
      upstreams: { app: { url: upstream.url }, ws: { url: wsUp.url } },
      routes: [{ path: '/plain', upstream: 'app', auth: 'none' }, { path: '/ws', upstream: 'ws', auth: 'none', websocket: true }],
    }));
    try {
      const m = marker();
      const answer = refused(await wsConnect(wsUrl(gw, `/plain/${m}`)));
      expect(answer.status).toBe(200);
      expect(answer.json.path).toBe(`/plain/${m}`);
      expect(upstream.last(m)!.headers.upgrade).toBeUndefined();
      // curl --http2 on http:// asks for h2c with an Upgrade header, on a POST with its body too.
      const h2c = await new Promise<string>((resolve, reject) => execFile('curl', ['-s', '--http2', '-d', 'hello=world', `${gw.url}/plain/${m}/post`, `${gw.url}/plain/${m}/again`],
        (err, stdout) => (err ? reject(err) : resolve(stdout))));
      const [first, second] = h2c.split('}{').map((part, i) => JSON.parse(i === 0 ? `${part}}` : `{${part}`) as { body: string; method: string });
      expect([first!.method, first!.body, second!.body]).toEqual(['POST', 'hello=world', 'hello=world']);
      // A WebSocket route next to it still upgrades.
      const socket = opened(await wsConnect(wsUrl(gw, '/ws/x')));
      socket.ws.close();
    } finally {
      await gw.close();
      await upstream.close();
      await wsUp.close();
    }
  });
});

describe('websocket settings', () => {
  it('needs GET among a websocket route\'s methods', () => {
    expect(configProblems('upstreams: { a: { url: "http://127.0.0.1:1" } }\nroutes: [{ path: /ws, upstream: a, websocket: true, methods: [POST] }]'))
      .toEqual(['routes[0].methods: websocket: true needs GET among the methods (an upgrade is a GET)']);
  });
});

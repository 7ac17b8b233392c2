// `mfa: required` routes (CONTRACT §14): proxied requests, decisions and WebSocket upgrades let
// through only access tokens from a second-factor sign-in; a password-only token and an API key
// get 403, nothing reaches the upstream.
import { authenticator } from '../helpers/totp.js';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { bearer, closeSql, describeWithServices, makeUser, marker, startDecidingGateway, type TestGateway } from '../helpers/gateway.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import { opened, refused, startWsUpstream, wsConnect, type WsUpstream } from '../helpers/wsUpstream.js';

const MFA_REQUIRED = { error: 'Authentification à deux facteurs requise' };

describeWithServices('mfa: required routes', () => {
  let upstream: EchoUpstream;
  let ws: WsUpstream;
  let gw: TestGateway;
  let password: string;
  let aal2: string;
  let apiKey: string;

  beforeAll(async () => {
    [upstream, ws] = await Promise.all([startEchoUpstream(), startWsUpstream()]);
    gw = await startDecidingGateway({
      upstreams: { app: { url: upstream.url }, live: { url: ws.url } },
      routes: [
        { path: '/billing', upstream: 'app', mfa: 'required' },
        { path: '/stream', upstream: 'live', websocket: true, mfa: 'required', auth: 'optional' },
        { path: '/plain', upstream: 'app' },
      ],
    });
    const user = await makeUser(gw, { plan: 'pro' });
    apiKey = (await gw.post('/api/v1/user/api-token', {}, { headers: bearer(user.access) })).json.api_token;
    const secret = (await gw.post('/api/v1/auth/mfa/totp/enroll', {}, { headers: bearer(user.access) })).json.secret as string;
    const now = Date.now();
    const codeAt = (ms: number) => authenticator.clone({ epoch: ms }).generate(secret);
    const confirm = await gw.post('/api/v1/auth/mfa/totp/confirm', { code: codeAt(now) }, { headers: bearer(user.access) });
    expect(confirm.status).toBe(200);
    // The confirming session's new pair (CONTRACT §33: the token of before is refused), still of the password sign-in.
    password = confirm.json.access_token as string;
    const token = (await gw.post('/api/v1/auth/login', { email: user.email, password: user.password })).json.mfa_token;
    aal2 = (await gw.post('/api/v1/auth/mfa/verify', { mfa_token: token, code: codeAt(now + 30_000) })).json.access_token;
  });
  afterAll(async () => {
    await gw?.close();
    await Promise.all([upstream?.close(), ws?.close()]);
    await closeSql();
  });

  it('proxied: an aal2 token passes; a password-only token and an API key get 403; no credential 401', async () => {
    const m = marker();
    expect((await gw.get(`/billing/${m}`, { headers: bearer(aal2) })).status).toBe(200);
    expect(upstream.count(m)).toBe(1);
    for (const headers of [bearer(password), { 'x-api-key': apiKey }]) {
      const res = await gw.get(`/billing/${m}`, { headers });
      expect([res.status, res.json]).toEqual([403, MFA_REQUIRED]);
    }
    expect((await gw.get(`/billing/${m}`)).status).toBe(401);
    expect(upstream.count(m)).toBe(1);
    // Other routes are as before.
    expect((await gw.get(`/plain/${m}`, { headers: { 'x-api-key': apiKey } })).status).toBe(200);
  });

  it('decisions: the same answers', async () => {
    expect((await gw.decide('GET', '/decisions/billing/x', { headers: bearer(aal2) })).status).toBe(200);
    const denied = await gw.decide('GET', '/decisions/billing/x', { headers: bearer(password) });
    expect([denied.status, denied.json]).toEqual([403, MFA_REQUIRED]);
    expect((await gw.decide('GET', '/decisions/billing/x', { headers: { 'x-api-key': apiKey } })).status).toBe(403);
  });

  it('WebSocket upgrades: only an aal2 token opens one, even on an auth: optional route', async () => {
    const url = (path: string) => `${gw.url.replace(/^http/, 'ws')}${path}`;
    const m = marker();
    const denied = refused(await wsConnect(url(`/stream/${m}?access_token=${password}`)));
    expect([denied.status, denied.json]).toEqual([403, MFA_REQUIRED]);
    expect(refused(await wsConnect(url(`/stream/${m}`))).status).toBe(401);
    expect(ws.last(m)).toBeUndefined();
    const socket = opened(await wsConnect(url(`/stream/${m}`), { headers: bearer(aal2) }));
    socket.ws.close();
  });
});

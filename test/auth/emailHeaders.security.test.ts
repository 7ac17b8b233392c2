// An email can never lock its owner out (issue 16, CONTRACT §8): registration refuses control
// characters, x-user-email carries non-ASCII addresses percent-encoded, the assertion carries them
// unchanged, and an address no header can hold never makes a proxied route answer 502.
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { bearer, closeSql, describeWithServices, marker, newPassword, sql, startTestGateway, testConfig, type TestGateway } from '../helpers/gateway.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';

describeWithServices('emails in identity headers', () => {
  let upstream: EchoUpstream;
  let gw: TestGateway;

  beforeAll(async () => {
    upstream = await startEchoUpstream();
    gw = await startTestGateway(testConfig({
      upstreams: { app: { url: upstream.url }, signed: { url: upstream.url, assertion: true } },
      routes: [{ path: '/private', upstream: 'app' }, { path: '/signed', upstream: 'signed' }],
    }));
  });

  afterAll(async () => {
    await gw?.close();
    await upstream?.close();
    await closeSql();
  });

  const upstreamErrors = async () => (await gw.services.metrics.upstreamErrors.get()).values.reduce((n, v) => n + v.value, 0);

  it('refuses an email holding a control character or bytes that were not UTF-8', async () => {
    const password = newPassword();
    for (const email of ['a@b.test\r\nx-user-id: 1', 'a@b.test\nx', 'tab\t@b.test', 'del\u007f@b.test', 'c1\u0085@b.test']) {
      const res = await gw.post('/api/v1/auth/register', { email, password });
      expect(res.status, JSON.stringify(email)).toBe(400);
      expect(res.json).toEqual({ error: 'Email invalide' });
    }
    // Invalid UTF-8 on the wire: JSON.parse would read U+FFFD, an address nobody typed.
    const body = Buffer.concat([Buffer.from('{"email":"'), Buffer.from([0xff, 0xfe]), Buffer.from(`@b.test","password":"${password}"}`)]);
    const res = await gw.request('POST', '/api/v1/auth/register', { body, headers: { 'content-type': 'application/json' } });
    expect(res.status).toBe(400);
    expect(res.json).toEqual({ error: 'Email invalide' });
  });

  it('registers non-ASCII addresses and proxies with x-user-email percent-encoded, the assertion carrying it as is', async () => {
    const before = await upstreamErrors();
    for (const [local, encoded] of [['łukasz', '%C5%82ukasz'], ['中文', '%E4%B8%AD%E6%96%87']] as const) {
      const tag = marker();
      const email = `${local}.${tag}@rt.test`;
      const password = newPassword();
      expect((await gw.post('/api/v1/auth/register', { email, password })).status).toBe(201);
      const login = await gw.post('/api/v1/auth/login', { email, password });
      expect(login.status).toBe(200);
      const m = marker();
      const res = await gw.get(`/private/${m}`, { headers: bearer(login.json.access_token) });
      expect(res.status).toBe(200);
      expect(upstream.last(m)!.headers['x-user-email']).toBe(`${encoded}.${tag}@rt.test`);
      const s = marker();
      expect((await gw.get(`/signed/${s}`, { headers: bearer(login.json.access_token) })).status).toBe(200);
      expect(decodeJwt(String(upstream.last(s)!.headers['x-gateway-assertion'])).email).toBe(email);
    }
    expect(await upstreamErrors()).toBe(before);
  });

  it('refuses an email with a lone surrogate, which would be stored as U+FFFD', async () => {
    // JSON may escape half a UTF-16 pair (`"\\ud800@x.test"`); Postgres receives it as UTF-8, where it
    // becomes U+FFFD: an address nobody typed, and two different ones (\ud800, \ud801) then collide.
    const tag = marker();
    for (const email of [`\ud800.${tag}@b.test`, `a\udfff.${tag}@b.test`]) {
      const res = await gw.post('/api/v1/auth/register', { email, password: newPassword() });
      expect(res.status, JSON.stringify(email)).toBe(400);
      expect(res.json).toEqual({ error: 'Email invalide' });
    }
  });

  it('never gives two accounts the same x-user-email once its percent-encoding (CONTRACT §8) is decoded', async () => {
    // `%C5%82ukasz@…` is printable ASCII, so it went out as is: the very header `łukasz@…` gets.
    // An upstream decoding the header (or matching emails to its own accounts) took one for the other.
    const tag = marker();
    const seen: string[] = [];
    for (const email of [`łukasz.${tag}@rt.test`, `%C5%82ukasz.${tag}@rt.test`]) {
      const password = newPassword();
      const reg = await gw.post('/api/v1/auth/register', { email, password });
      if (reg.status === 400) continue; // refusing the look-alike is a fix too
      expect(reg.status).toBe(201);
      const login = await gw.post('/api/v1/auth/login', { email, password });
      const m = marker();
      expect((await gw.get(`/private/${m}`, { headers: bearer(login.json.access_token) })).status).toBe(200);
      seen.push(decodeURIComponent(String(upstream.last(m)!.headers['x-user-email'])));
    }
    expect(new Set(seen).size, JSON.stringify(seen)).toBe(seen.length);
  });

  it('keeps serving a user whose stored address holds CR LF (written before registration refused it), telling upstreams no email', async () => {
    const tag = marker();
    const password = newPassword();
    const email = `old.${tag}@b.test`;
    const reg = await gw.post('/api/v1/auth/register', { email, password });
    expect(reg.status).toBe(201);
    const login = await gw.post('/api/v1/auth/login', { email, password });
    await sql('UPDATE users SET email = $2 WHERE email = $1', [email, `old.${tag}@b.test\r\nx-user-id: 1`]);
    const m = marker();
    const res = await gw.get(`/private/${m}`, { headers: bearer(login.json.access_token) });
    expect(res.status).toBe(200);
    const hit = upstream.last(m)!;
    // Not one mailbox (CONTRACT §19): no upstream is told it, not even percent-encoded.
    expect(hit.headers['x-user-email']).toBeUndefined();
    expect(hit.headers['x-user-id']).toBe(String(reg.json.user_id));
  });
});

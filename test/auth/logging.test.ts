// Logs are read by more people than the database: no password, raw token or API key may reach
// them, and every line of a request carries its id (the one echoed in x-request-id).
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { sha256Hex } from '../../src/credentials/digest.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import { bearer, closeSql, describeWithServices, marker, newEmail, newPassword, sql, startTestGateway, testConfig, type TestGateway } from '../helpers/gateway.js';
import type { HttpResponse } from '../helpers/http.js';

interface LogLine { level: number; msg?: string; reqId?: string; req?: unknown; res?: unknown; [key: string]: unknown }

describeWithServices('logging', () => {
  let upstream: EchoUpstream;
  let gw: TestGateway;
  beforeAll(async () => {
    upstream = await startEchoUpstream();
    gw = await startTestGateway(testConfig({
      upstreams: { echo: { url: upstream.url } },
      routes: [{ path: '/api/v1/races', upstream: 'echo', auth: 'required' }],
    }), { logLevel: 'trace' });
  });
  afterAll(async () => { await gw?.close(); await upstream?.close(); await closeSql(); });

  const lines = (): LogLine[] => gw.logs.map((l) => JSON.parse(l) as LogLine);

  it('holds no password, raw access or refresh token, or API key after a full session and proxied requests', async () => {
    const email = newEmail();
    const password = `Secret-${randomBytes(8).toString('hex')}`;
    const secrets: string[] = [password];
    const seen: HttpResponse[] = [];
    const call = async (res: Promise<HttpResponse>) => { const r = await res; seen.push(r); return r; };

    expect((await call(gw.post('/api/v1/auth/register', { email, password }))).status).toBe(201);
    await call(gw.post('/api/v1/auth/register', { email: newEmail(), password: 'short' }));
    await call(gw.post('/api/v1/auth/register', { email: newEmail(), password: `${password}-too-long-${'x'.repeat(1100)}` }));
    await call(gw.post('/api/v1/auth/login', { email, password: `${password}-wrong` }));
    secrets.push(`${password}-wrong`);
    const login = await call(gw.post('/api/v1/auth/login', { email, password }));
    expect(login.status).toBe(200);
    const refreshed = await call(gw.post('/api/v1/auth/refresh', { refresh_token: login.json.refresh_token }));
    expect(refreshed.status).toBe(200);
    // The rotated-away token presented again: the reuse warning must not quote it either.
    expect((await call(gw.post('/api/v1/auth/refresh', { refresh_token: login.json.refresh_token }))).status).toBe(401);
    secrets.push(login.json.access_token, login.json.refresh_token, refreshed.json.access_token, refreshed.json.refresh_token);

    // A real API key of a pro user (inserted as the Pro endpoint would store it: hash only).
    const userId = (await sql<{ id: number }>(`UPDATE users SET plan = 'pro' WHERE email = $1 RETURNING id`, [email]))[0]!.id;
    const apiKey = `gwk_${randomBytes(24).toString('hex')}`;
    await sql('INSERT INTO api_tokens (user_id, token_hash) VALUES ($1, $2)', [userId, sha256Hex(apiKey)]);
    const wrongKey = `gwk_${randomBytes(24).toString('hex')}`;
    secrets.push(apiKey, wrongKey);

    const m = marker();
    const both = await call(gw.get(`/api/v1/races/${m}`, { headers: { ...bearer(refreshed.json.access_token), 'x-api-key': apiKey } }));
    expect(both.status).toBe(200);
    expect((await call(gw.get(`/api/v1/races/${m}`, { headers: { 'x-api-key': apiKey } }))).status).toBe(200);
    expect((await call(gw.get(`/api/v1/races/${m}`, { headers: { 'x-api-key': wrongKey, authorization: `Bearer ${login.json.refresh_token}` } }))).status).toBe(401);
    // Tokens in a URL (as browsers send one on a WebSocket upgrade): the request line masks them.
    expect((await call(gw.get(`/api/v1/races/${m}?access_token=${refreshed.json.access_token}&t=${login.json.access_token}`, { headers: { 'x-api-key': apiKey } }))).status).toBe(200);
    expect(upstream.count(m)).toBe(3);
    expect((await call(gw.post('/api/v1/auth/logout', { refresh_token: refreshed.json.refresh_token }))).status).toBe(200);

    const text = gw.logs.join('');
    for (const secret of secrets) {
      expect(text).not.toContain(secret);
      // Nor the signature alone (a token cut by a formatter is still a leak of its key material).
      const signature = secret.split('.')[2];
      if (signature) expect(text).not.toContain(signature);
    }
    // The log did record these requests.
    for (const res of seen) expect(lines().some((l) => l.reqId === res.headers['x-request-id'])).toBe(true);
  });

  it('every line of a request carries its id, and x-request-id on the response equals it', async () => {
    const chosen = `trace-${randomBytes(6).toString('hex')}`;
    const email = newEmail();
    const password = newPassword();
    const answers = [
      await gw.post('/api/v1/auth/register', { email, password }, { headers: { 'x-request-id': chosen } }),
      await gw.post('/api/v1/auth/login', { email, password }),
      await gw.get(`/api/v1/races/${marker()}`),
    ];
    expect(answers[0]!.headers['x-request-id']).toBe(chosen);
    for (const res of answers) {
      const id = res.headers['x-request-id'];
      expect(id).toEqual(expect.any(String));
      const mine = lines().filter((l) => l.reqId === id);
      expect(mine.some((l) => l.req !== undefined)).toBe(true);
      expect(mine.some((l) => l.res !== undefined)).toBe(true);
    }
    // Request ids are not shared between requests.
    expect(new Set(answers.map((r) => r.headers['x-request-id'])).size).toBe(answers.length);
    // Every line about a request (its req/res, and what handlers log: userId, route, reason) has an
    // id; background workers (webhook deliveries) name their component instead.
    for (const l of lines()) {
      if (l.component !== undefined) continue;
      if (l.req !== undefined || l.res !== undefined || l.userId !== undefined || l.route !== undefined || l.reason !== undefined) {
        expect(l.reqId, JSON.stringify(l)).toEqual(expect.any(String));
      }
    }
  });

  it('an unsafe x-request-id is replaced, not echoed or logged', async () => {
    const res = await gw.post('/api/v1/auth/login', {}, { headers: { 'x-request-id': 'bad id\twith "quotes"' } });
    expect(res.status).toBe(400);
    const id = res.headers['x-request-id'];
    expect(id).toMatch(/^[0-9a-f-]{36}$/);
    expect(gw.logs.join('')).not.toContain('with \\"quotes\\"');
  });
});

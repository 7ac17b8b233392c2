// Spec §4: a body that is missing or not valid JSON is treated as an empty object, so every
// malformed request gets the endpoint's own 400 (never 415, 400 "Requête invalide" or 500).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeSql, describeWithServices, newEmail, newPassword, sql, startTestGateway, testConfig, type TestGateway } from '../helpers/gateway.js';

const EXPECTED: Record<string, { status: number; body: Record<string, string> }> = {
  register: { status: 400, body: { error: 'Email invalide' } },
  login: { status: 400, body: { error: 'Email et mot de passe requis' } },
  refresh: { status: 400, body: { error: 'refresh_token manquant' } },
  logout: { status: 200, body: { message: expect.any(String) } },
};

// [name, headers, body]
const BODIES: Array<[string, Record<string, string>, string | undefined]> = [
  ['no body, no content type', {}, undefined],
  ['empty body with application/json', { 'content-type': 'application/json' }, ''],
  ['invalid JSON', { 'content-type': 'application/json' }, '{"email": "a@b", '],
  ['a JSON array', { 'content-type': 'application/json' }, '[{"email":"a@example.test"}]'],
  ['JSON null', { 'content-type': 'application/json' }, 'null'],
  ['a JSON number', { 'content-type': 'application/json' }, '42'],
  ['a JSON string', { 'content-type': 'application/json' }, '"text"'],
  ['form-encoded', { 'content-type': 'application/x-www-form-urlencoded' }, 'email=a%40example.test&password=12345678'],
  ['an unknown content type', { 'content-type': 'application/x-unknown' }, '\u0000\u0001binary'],
];

describeWithServices('request bodies on the four auth endpoints', () => {
  let gw: TestGateway;
  beforeAll(async () => { gw = await startTestGateway(testConfig()); });
  afterAll(async () => { await gw?.close(); await closeSql(); });

  for (const [endpoint, expected] of Object.entries(EXPECTED)) {
    describe(`/${endpoint}`, () => {
      for (const [name, headers, body] of BODIES) {
        it(`${name} → treated as {}`, async () => {
          const res = await gw.request('POST', `/api/v1/auth/${endpoint}`, { headers, body });
          expect(res.status).toBe(expected.status);
          expect(res.json).toEqual(expected.body);
          expect(res.headers['content-type']).toMatch(/^application\/json/);
        });
      }
    });
  }

  it('a JSON object sent as text/plain is not read: register answers "Email invalide" and stores nothing', async () => {
    // A browser may send text/plain cross-site without a preflight; only JSON bodies are read.
    const email = newEmail();
    const res = await gw.request('POST', '/api/v1/auth/register', {
      headers: { 'content-type': 'text/plain' },
      body: JSON.stringify({ email, password: newPassword() }),
    });
    expect(res.status).toBe(400);
    expect(res.json).toEqual({ error: 'Email invalide' });
    expect(await sql('SELECT id FROM users WHERE email = $1', [email])).toEqual([]);
  });

  it('JSON with a charset parameter or a +json type is read', async () => {
    for (const type of ['application/json; charset=utf-8', 'application/merge-patch+json', 'Application/JSON']) {
      const res = await gw.request('POST', '/api/v1/auth/register', {
        headers: { 'content-type': type },
        body: JSON.stringify({ email: newEmail(), password: newPassword() }),
      });
      expect(res.status, type).toBe(201);
    }
  });

  it('a body over server.bodyLimit → 413 "Requête trop volumineuse", nothing stored', async () => {
    const email = newEmail();
    const res = await gw.post('/api/v1/auth/register', { email, password: 'x'.repeat(1024 * 1024 + 10) });
    expect(res.status).toBe(413);
    expect(res.json).toEqual({ error: 'Requête trop volumineuse' });
    expect(await sql('SELECT id FROM users WHERE email = $1', [email])).toEqual([]);
  });

  it('non-string fields count as empty', async () => {
    const login = await gw.post('/api/v1/auth/login', { email: 12, password: { a: 1 } });
    expect(login.status).toBe(400);
    expect(login.json).toEqual({ error: 'Email et mot de passe requis' });
    const refresh = await gw.post('/api/v1/auth/refresh', { refresh_token: ['x'] });
    expect(refresh.status).toBe(400);
    expect(refresh.json).toEqual({ error: 'refresh_token manquant' });
  });
});

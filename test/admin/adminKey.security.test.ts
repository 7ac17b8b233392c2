// The admin key and the console's secrets compared exactly (CONTRACT §16), through the admin
// listener startGateway builds (admin.port set): a key that differs from the configured one by a
// letter's case, one character at its start, middle or end, a prefix of it, or it plus one
// character, is refused as any wrong key; only the key itself opens the admin API, the console's
// sign-in and its sign-in links. The console's CSRF token is compared the same way.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { sha256Hex } from '../../src/credentials/digest.js';
import { insertOperator, insertOperatorToken } from '../../src/storage/operators/operators.js';
import { ADMIN_KEY, bearer, closeSql, describeWithServices, makeUser, startTestGateway, testConfig, throwawayDatabase, type TestGateway } from '../helpers/gateway.js';
import { request, type RequestOptions } from '../helpers/http.js';
import { sparePort } from '../helpers/ports.js';

const UNAUTHORIZED = { error: 'Clé d’administration invalide' };
const CSRF_REFUSED = { error: 'Jeton CSRF invalide' };

/** Strings that are not `secret` but differ from it by as little as possible. */
function nearMisses(secret: string): Record<string, string> {
  const letter = [...secret].findIndex((c) => c.toLowerCase() !== c.toUpperCase());
  const flip = (c: string) => (c === c.toLowerCase() ? c.toUpperCase() : c.toLowerCase());
  const other = (c: string) => (c === 'x' ? 'y' : 'x');
  const at = (i: number, f: (c: string) => string) => secret.slice(0, i) + f(secret[i]!) + secret.slice(i + 1);
  const middle = Math.floor(secret.length / 2);
  return {
    'one letter in the other case': at(letter, flip),
    'first character changed': at(0, other),
    'middle character changed': at(middle, other),
    'last character changed': at(secret.length - 1, other),
    'a prefix (one character short)': secret.slice(0, -1),
    'one character more': `${secret}x`,
  };
}

describeWithServices('admin key and console secrets: exact comparison', () => {
  let gw: TestGateway;
  let userId: number;

  beforeAll(async () => {
    gw = await startTestGateway(testConfig({ admin: { host: '127.0.0.1', port: await sparePort() } }));
    userId = (await makeUser(gw)).id;
  });
  afterAll(async () => {
    await gw?.close();
    await closeSql();
  });

  const admin = (method: string, path: string, options?: RequestOptions) => request(gw.adminUrl!, method, path, options);

  it('the admin API: each near miss of the key gets 401 with the Bearer challenge; the key itself gets the user', async () => {
    for (const [miss, key] of Object.entries(nearMisses(ADMIN_KEY))) {
      expect(key, miss).not.toBe(ADMIN_KEY);
      const res = await admin('GET', `/admin/v1/users/${userId}`, { headers: bearer(key) });
      expect([res.status, res.json, res.headers['www-authenticate']], miss).toEqual([401, UNAUTHORIZED, 'Bearer realm="gateway-admin"']);
    }
    const res = await admin('GET', `/admin/v1/users/${userId}`, { headers: bearer(ADMIN_KEY) });
    expect([res.status, res.json.id]).toEqual([200, userId]);
  });

  it('the console sign-in form: each near miss of the key gets 401 and no cookie; the key itself, a session', async () => {
    for (const [miss, key] of Object.entries(nearMisses(ADMIN_KEY))) {
      const res = await admin('POST', '/console/session', { json: { key } });
      expect([res.status, res.json, res.headers['set-cookie']], miss).toEqual([401, UNAUTHORIZED, undefined]);
    }
    const res = await admin('POST', '/console/session', { json: { key: ADMIN_KEY } });
    expect(res.status, res.text).toBe(200);
    expect(String(res.headers['set-cookie'])).toMatch(/^gw_console=[A-Za-z0-9_-]+;/);
  });

  it('the console sign-in form: no body, or a key that is not a string, gets 401, never a 500', async () => {
    for (const [what, options] of Object.entries<RequestOptions>({
      'no body': {},
      'a number': { json: { key: 12345 } },
      'the key in an array': { json: { key: [ADMIN_KEY] } },
      'null': { json: { key: null } },
    })) {
      const res = await admin('POST', '/console/session', options);
      expect([res.status, res.json, res.headers['set-cookie']], what).toEqual([401, UNAUTHORIZED, undefined]);
    }
  });

  it('a wrong key at the admin API or either console door is logged with the caller\'s address and the door', async () => {
    // A gateway of its own per door: refusals are logged once per interval, counted per listener.
    const wrong = bearer('wrong-key');
    const doors: Record<string, RequestOptions> = { '/admin/v1/users': { headers: wrong }, '/console/session': { json: { key: 'wrong-key' } }, '/console/tickets': { headers: wrong } };
    for (const [door, options] of Object.entries(doors)) {
      const fresh = await startTestGateway(testConfig({ admin: { host: '127.0.0.1', port: await sparePort() } }));
      try {
        expect((await request(fresh.adminUrl!, 'POST', door, options)).status).toBe(401);
        const lines = fresh.logs.filter((l) => l.includes('admin key refused'));
        expect(lines, door).toHaveLength(1);
        expect(JSON.parse(lines[0]!), door).toMatchObject({ level: 40, ip: '127.0.0.1', url: door });
      } finally {
        await fresh.close();
      }
    }
  });

  it('console sign-in links: each near miss of the key gets 401; the key itself, a link', async () => {
    for (const [miss, key] of Object.entries(nearMisses(ADMIN_KEY))) {
      const res = await admin('POST', '/console/tickets', { headers: bearer(key) });
      expect([res.status, res.json], miss).toEqual([401, UNAUTHORIZED]);
    }
    for (const authorization of [undefined, 'Bearer', `Basic ${ADMIN_KEY}`]) {
      const res = await admin('POST', '/console/tickets', { headers: authorization === undefined ? {} : { authorization } });
      expect([res.status, res.json], authorization).toEqual([401, UNAUTHORIZED]);
    }
    const res = await admin('POST', '/console/tickets', { headers: bearer(ADMIN_KEY) });
    expect(res.status, res.text).toBe(201);
    expect(res.json.url).toMatch(/\/console\/#ticket=[A-Za-z0-9_-]+$/);
  });

  it('the console CSRF token: each near miss gets 403 and the session stays; the token itself ends the session', async () => {
    const signIn = await admin('POST', '/console/session', { json: { key: ADMIN_KEY } });
    const cookie = String(signIn.headers['set-cookie']).split(';')[0]!;
    const csrf = signIn.json.csrf as string;
    for (const [miss, token] of Object.entries(nearMisses(csrf))) {
      const res = await admin('DELETE', '/console/session', { headers: { cookie, 'x-csrf-token': token } });
      expect([res.status, res.json], miss).toEqual([403, CSRF_REFUSED]);
    }
    expect((await admin('GET', '/console/session', { headers: { cookie } })).status).toBe(200);
    const res = await admin('DELETE', '/console/session', { headers: { cookie, 'x-csrf-token': csrf } });
    expect([res.status, res.json]).toEqual([200, { message: 'Session terminée' }]);
    expect((await admin('GET', '/console/session', { headers: { cookie } })).json).toEqual(UNAUTHORIZED);
  });

  it('no admin key configured, operators: an empty key (or none) at the console\'s doors and the admin API gets 401 and no session; a gwop_ token acts as its operator', async () => {
    // The console is served (an operator exists), so the doors that take the key are reached:
    // an empty presented key must not match the empty configured one.
    const db = await throwawayDatabase({ migrated: true });
    const keyless = await startTestGateway(testConfig({ storage: db.storage, admin: { host: '127.0.0.1', port: await sparePort(), apiKey: '' } }));
    try {
      // Neither a key nor an operator: the admin API does not exist; with an operator, it refuses.
      expect((await request(keyless.adminUrl!, 'GET', '/admin/v1/users', { headers: bearer('') })).status).toBe(404);
      expect(await insertOperator(keyless.services.db, 'keyless-operator@example.test', 'admin', new Date())).toBeDefined();
      for (const authorization of ['Bearer ', 'Bearer', '']) {
        const res = await request(keyless.adminUrl!, 'GET', '/admin/v1/users', { headers: { authorization } });
        expect([res.status, res.json, res.headers['www-authenticate']], authorization).toEqual([401, UNAUTHORIZED, 'Bearer realm="gateway-admin"']);
      }
      const page = await request(keyless.adminUrl!, 'GET', '/console/');
      expect(page.status, 'the console is served').toBe(200);
      for (const [what, options] of Object.entries<RequestOptions>({ 'an empty key': { json: { key: '' } }, 'no key': { json: {} } })) {
        const res = await request(keyless.adminUrl!, 'POST', '/console/session', options);
        expect([res.status, res.json, res.headers['set-cookie']], what).toEqual([401, UNAUTHORIZED, undefined]);
      }
      for (const authorization of ['Bearer ', 'Bearer']) {
        const res = await request(keyless.adminUrl!, 'POST', '/console/tickets', { headers: { authorization } });
        expect([res.status, res.json], authorization).toEqual([401, UNAUTHORIZED]);
      }
      // An operator's gwop_ token opens the admin API as that operator (the audit names them); an unknown one is refused.
      const operator = (await insertOperator(keyless.services.db, 'token-operator@example.test', 'admin', new Date()))!;
      const token = `gwop_${randomBytes(24).toString('base64url')}`;
      await insertOperatorToken(keyless.services.db, operator.id, 'test', sha256Hex(token), new Date(), new Date(Date.now() + 3_600_000));
      const unknown = await request(keyless.adminUrl!, 'GET', '/admin/v1/users', { headers: bearer(`gwop_${randomBytes(24).toString('base64url')}`) });
      expect([unknown.status, unknown.json]).toEqual([401, UNAUTHORIZED]);
      const user = await makeUser(keyless);
      const revoked = await request(keyless.adminUrl!, 'DELETE', `/admin/v1/users/${user.id}/sessions`, { headers: bearer(token) });
      expect(revoked.status, revoked.text).toBe(200);
      const [event] = await db.sql<{ actor: string; actor_id: number; data: Record<string, unknown> }>(
        "SELECT actor, actor_id, data FROM audit_events WHERE type LIKE 'admin.%' ORDER BY id DESC LIMIT 1");
      expect(event).toEqual({ actor: 'operator', actor_id: operator.id, data: expect.objectContaining({ operator_email: operator.email }) });
    } finally {
      await keyless.close();
      await db.drop();
    }
  });
});

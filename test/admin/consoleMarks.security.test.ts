// The console's marks are the console's own (admin/access.ts): the console relays an operator's
// session to the admin API with three headers, the mark (a secret of the process), the operator and
// when their second factor was given. A client that sends the last two itself, with no mark or a
// guessed one, is whatever its Authorization header makes it: nobody, the shared key (recorded as
// `admin`, never `console`), or an operator's gwop_ token (which may not mint another token).
import { randomBytes } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { callerOf } from '../../src/admin/access.js';
import { mintOperatorToken } from '../../src/admin/operatorTokens.js';
import { insertOperator, type OperatorRow } from '../../src/storage/operators/operators.js';
import type { AuditRow } from '../../src/storage/events/audit.js';
import {
  ADMIN_KEY, bearer, closeSql, describeWithServices, makeUser, startTestGateway, testConfig, throwawayDatabase, type TestGateway, type ThrowawayDatabase,
} from '../helpers/gateway.js';
import { request } from '../helpers/http.js';
import { sparePort } from '../helpers/ports.js';

const UNAUTHORIZED = { error: 'Clé d’administration invalide' };

it('a handler that asks for its caller where the access hook did not run is a fault of the code, said so', () => {
  expect(() => callerOf({} as FastifyRequest)).toThrow(new Error('admin route reached without the access hook'));
});

describeWithServices('the console\'s marks are not a client\'s to send', () => {
  let db: ThrowawayDatabase;
  let gw: TestGateway;
  let admin: OperatorRow;
  /** Every spelling of the mark a client could send: none, empty, a guess of its shape. */
  let forgeries: Array<Record<string, string>>;

  beforeAll(async () => {
    db = await throwawayDatabase({ migrated: true });
    gw = await startTestGateway(testConfig({ storage: db.storage, admin: { host: '127.0.0.1', port: await sparePort() } }));
    admin = (await insertOperator(gw.services.db, 'marks-admin@example.test', 'admin', new Date()))!;
    const claims = { 'x-gateway-console-operator': String(admin.id), 'x-gateway-console-auth-time': String(Date.now()) };
    forgeries = [claims, { ...claims, 'x-gateway-console': '' }, { ...claims, 'x-gateway-console': randomBytes(16).toString('hex') }];
  });
  afterAll(async () => {
    await gw?.close();
    await db?.drop();
    await closeSql();
  });

  const adminApi = (method: string, path: string, headers: Record<string, string>, json?: unknown) => request(gw.adminUrl!, method, path, { headers, json });

  it('without a credential, an operator named by the console\'s headers is nobody: 401, nothing changed', async () => {
    const user = await makeUser(gw);
    for (const forged of forgeries) {
      const res = await adminApi('DELETE', `/admin/v1/users/${user.id}/sessions`, forged);
      expect([res.status, res.json, res.headers['www-authenticate']], JSON.stringify(forged)).toEqual([401, UNAUTHORIZED, 'Bearer realm="gateway-admin"']);
    }
    expect(await db.sql('SELECT id FROM audit_events WHERE user_id = $1 AND type LIKE $2', [user.id, 'admin.%'])).toEqual([]);
  });

  it('with the shared key, the audit names the key (`admin`, no operator) and the request\'s own address and user agent, or none', async () => {
    const user = await makeUser(gw);
    for (const forged of forgeries) {
      const res = await adminApi('DELETE', `/admin/v1/users/${user.id}/sessions`, { ...bearer(ADMIN_KEY), ...forged, 'user-agent': 'marks-test/1' });
      expect(res.status, res.text).toBe(200);
    }
    expect((await adminApi('DELETE', `/admin/v1/users/${user.id}/sessions`, bearer(ADMIN_KEY))).status).toBe(200);
    const rows = await db.sql<AuditRow>("SELECT * FROM audit_events WHERE user_id = $1 AND type = 'admin.sessions_revoked' ORDER BY id", [user.id]);
    const seen = rows.map((r) => ({ actor: r.actor, actor_id: r.actor_id, operator_email: r.data.operator_email, ip: r.ip, user_agent: r.user_agent }));
    const fromKey = { actor: 'admin', actor_id: null, operator_email: undefined, ip: '127.0.0.1' };
    expect(seen).toEqual([...forgeries.map(() => ({ ...fromKey, user_agent: 'marks-test/1' })), { ...fromKey, user_agent: null }]);
  });

  it('an operator\'s gwop_ token with a forged second-factor time still may not mint a token', async () => {
    const { token } = await mintOperatorToken(gw.services.db, admin.id, 'laptop', 90, new Date());
    for (const forged of forgeries) {
      const res = await adminApi('POST', '/admin/v1/operator/tokens', { ...bearer(token), ...forged }, { name: 'another' });
      expect([res.status, res.json], JSON.stringify(forged)).toEqual([403, { error: 'Authentification récente requise' }]);
    }
    expect(await db.sql('SELECT name FROM operator_tokens WHERE operator_id = $1', [admin.id])).toEqual([{ name: 'laptop' }]);
  });
});

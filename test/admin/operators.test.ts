// CONTRACT §24: operators with roles act on the admin API with personal tokens (gwop_…); each
// endpoint's role decides; a token acts with its operator's current role and dies with the
// operator; the shared key acts as admin; the last admin stays while admin.apiKey is empty.
import Fastify from 'fastify';
import { adminAccess } from '../../src/admin/access.js';
import type { FailureLog } from '../../src/telemetry/logThrottle.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import { docsExample } from '../helpers/docs.js';
import { mintOperatorToken } from '../../src/admin/operatorTokens.js';
import {
  ADMIN_KEY, bearer, describeWithServices, makeUser, marker, queriesDuring, testClock, testConfig, type TestGateway, type ThrowawayDatabase,
} from '../helpers/gateway.js';
import { request } from '../helpers/http.js';
import { adminOnOwnDatabase, type AdminOnOwnDatabase } from '../helpers/adminApi.js';
import { operatorWithToken } from '../helpers/operators.js';

// On a database of its own: the run's database keeps no operator, so that the tests of an empty
// admin.apiKey elsewhere still see an admin API that does not exist.
describeWithServices('admin API: operators and their roles', () => {
  let setup: AdminOnOwnDatabase;
  let db: ThrowawayDatabase;
  let gw: TestGateway;
  let url: string;
  const clock = testClock();
  const as = (token: string, method: string, path: string, json?: unknown) => request(url, method, path, { headers: bearer(token), ...(json === undefined ? {} : { json }) });

  beforeAll(async () => {
    setup = await adminOnOwnDatabase(({ storage }) => testConfig({ storage }), { clock });
    ({ db, gw, url } = setup);
  });
  afterAll(() => setup?.close());

  it('a viewer reads but cannot change a plan: 403 byte for byte, and the plan stays', async () => {
    const viewer = await operatorWithToken(gw.services.db, 'viewer');
    const user = await makeUser(gw);
    expect((await as(viewer.token, 'GET', `/admin/v1/users/${user.id}`)).status).toBe(200);
    expect((await as(viewer.token, 'GET', '/admin/v1/audit?limit=1')).status).toBe(200);
    const refused = await as(viewer.token, 'PUT', `/admin/v1/users/${user.id}/plan`, { plan: 'pro' });
    expect(refused.status).toBe(403);
    expect(refused.text).toBe('{"error":"Rôle insuffisant","required_roles":["admin"],"current_role":"viewer"}');
    expect((await as(viewer.token, 'DELETE', `/admin/v1/users/${user.id}/sessions`)).json).toEqual({ error: 'Rôle insuffisant', required_roles: ['support', 'admin'], current_role: 'viewer' });
    expect((await as(ADMIN_KEY, 'GET', `/admin/v1/users/${user.id}`)).json.plan).toBe('free');
  });

  // Every write route of /admin/v1 with the least role it takes (CONTRACT §24), checked against
  // the routes the admin app documents: a write route added without a row here fails the first
  // assertion. The calling operator's own tokens are any operator's (their own test is below).
  const WRITES: Record<string, 'support' | 'admin'> = {
    'DELETE /admin/v1/users/{id}': 'admin', 'POST /admin/v1/users': 'admin', 'DELETE /admin/v1/users/{id}/sessions': 'support',
    'DELETE /admin/v1/users/{id}/sessions/{sid}': 'support', 'DELETE /admin/v1/users/{id}/mfa': 'support', 'PUT /admin/v1/users/{id}/plan': 'admin',
    'PUT /admin/v1/users/{id}/active': 'support', 'POST /admin/v1/alerts': 'support', 'DELETE /admin/v1/api-keys/{id}': 'support',
    'POST /admin/v1/api-keys/leaked': 'support', 'POST /admin/v1/operators': 'admin', 'PUT /admin/v1/operators/{id}/role': 'admin',
    'DELETE /admin/v1/operators/{id}': 'admin', 'DELETE /admin/v1/operators/{id}/mfa': 'admin', 'PUT /admin/v1/orgs/{id}/plan': 'admin',
    'POST /admin/v1/import/users': 'admin', 'POST /admin/v1/import/keys': 'admin',
    // CONTRACT §31: an operator's domain verification and the SAML break-glass.
    'POST /admin/v1/orgs/{id}/domains/{domain}/verify': 'admin', 'PUT /admin/v1/orgs/{id}/sso/saml': 'admin',
  };
  const OWN = ['POST /admin/v1/operator/tokens', 'DELETE /admin/v1/operator/tokens/{id}'];

  it('every write route refuses a viewer, and those of admins support, with 403 Rôle insuffisant byte for byte; the user is untouched', async () => {
    const paths = (setup.app.swagger() as { paths: Record<string, Record<string, unknown>> }).paths;
    const writes = Object.entries(paths).filter(([path]) => path.startsWith('/admin/v1/'))
      .flatMap(([path, methods]) => Object.keys(methods).filter((m) => m !== 'get').map((m) => `${m.toUpperCase()} ${path}`));
    expect(writes.sort()).toEqual([...Object.keys(WRITES), ...OWN].sort());
    const user = await makeUser(gw);
    const before = (await as(ADMIN_KEY, 'GET', `/admin/v1/users/${user.id}`)).json;
    for (const role of ['viewer', 'support'] as const) {
      const caller = await operatorWithToken(gw.services.db, role);
      for (const [route, least] of Object.entries(WRITES)) {
        if (role === 'support' && least === 'support') continue;
        const [method, path] = route.split(' ') as [string, string];
        const refused = await as(caller.token, method, path.replace('{id}', String(user.id)).replace('{sid}', '1'), {});
        const required = least === 'admin' ? '["admin"]' : '["support","admin"]';
        expect([route, role, refused.status, refused.text]).toEqual([route, role, 403, `{"error":"Rôle insuffisant","required_roles":${required},"current_role":"${role}"}`]);
      }
    }
    expect((await as(ADMIN_KEY, 'GET', `/admin/v1/users/${user.id}`)).json).toEqual(before);
  });

  it('the operators\' pages of other rooms declare their roles too: a viewer reads plans, overview and organizations, and cannot create, import or set an organization\'s plan', async () => {
    const viewer = await operatorWithToken(gw.services.db, 'viewer');
    for (const path of ['/admin/v1/plans', '/admin/v1/overview', '/admin/v1/orgs']) expect([path, (await as(viewer.token, 'GET', path)).status]).toEqual([path, 200]);
    const adminOnly = { error: 'Rôle insuffisant', required_roles: ['admin'], current_role: 'viewer' };
    const created = await as(viewer.token, 'POST', '/admin/v1/users', { email: `new-${marker()}@example.test` });
    expect([created.status, created.json]).toEqual([403, adminOnly]);
    const lines = `{"email":"imp-${marker()}@example.test"}\n`;
    const imported = await request(url, 'POST', '/admin/v1/import/users', { headers: { ...bearer(viewer.token), 'content-type': 'application/x-ndjson' }, body: lines });
    expect([imported.status, imported.json]).toEqual([403, adminOnly]);
    const keyLines = `{"email":"a@example.test","sha256":"${'a'.repeat(64)}"}\n`;
    const keys = await request(url, 'POST', '/admin/v1/import/keys', { headers: { ...bearer(viewer.token), 'content-type': 'application/x-ndjson' }, body: keyLines });
    expect([keys.status, keys.json]).toEqual([403, adminOnly]);
    const orgPlan = await as(viewer.token, 'PUT', '/admin/v1/orgs/1/plan', { plan: 'pro' });
    expect([orgPlan.status, orgPlan.json]).toEqual([403, adminOnly]);
    // An unknown path is still 404 for any caller the API accepts.
    expect((await as(viewer.token, 'GET', '/admin/v1/no-such-page')).status).toBe(404);
  });

  it('a route that declares no role is the admin\'s: a viewer and support are refused, an admin passes', async () => {
    const app = Fastify();
    const keyRefusals = { failed: () => {}, recovered: () => {} } as unknown as FailureLog;
    await app.register(async (scope) => {
      scope.addHook('onRequest', adminAccess({ db: gw.services.db, apiKey: () => ADMIN_KEY, clock: () => new Date(), keyRefusals, adminExists: async () => true }));
      scope.get('/v1/undeclared', async () => ({ ok: true }));
    }, { prefix: '/admin' });
    const local = await app.listen({ host: '127.0.0.1', port: 0 });
    try {
      for (const role of ['viewer', 'support'] as const) {
        const caller = await operatorWithToken(gw.services.db, role);
        const refused = await request(local, 'GET', '/admin/v1/undeclared', { headers: bearer(caller.token) });
        expect([refused.status, refused.json]).toEqual([403, { error: 'Rôle insuffisant', required_roles: ['admin'], current_role: role }]);
      }
      const admin = await operatorWithToken(gw.services.db, 'admin');
      expect((await request(local, 'GET', '/admin/v1/undeclared', { headers: bearer(admin.token) })).json).toEqual({ ok: true });
    } finally {
      await app.close();
    }
  });

  it('support revokes sessions but cannot delete a user; an admin can, and the audit says which operator', async () => {
    const support = await operatorWithToken(gw.services.db, 'support');
    const admin = await operatorWithToken(gw.services.db, 'admin');
    const user = await makeUser(gw);
    const revoked = await as(support.token, 'DELETE', `/admin/v1/users/${user.id}/sessions`);
    expect(revoked.status).toBe(200);
    const refused = await as(support.token, 'DELETE', `/admin/v1/users/${user.id}`);
    expect([refused.status, refused.json]).toEqual([403, { error: 'Rôle insuffisant', required_roles: ['admin'], current_role: 'support' }]);
    expect((await as(admin.token, 'DELETE', `/admin/v1/users/${user.id}`)).status).toBe(200);
    const events = await db.sql<{ type: string; actor: string; actor_id: number; data: Record<string, unknown> }>(
      "SELECT type, actor, actor_id, data FROM audit_events WHERE user_id = $1 AND type LIKE 'admin.%' ORDER BY id", [user.id],
    );
    expect(events).toEqual([
      { type: 'admin.sessions_revoked', actor: 'operator', actor_id: support.id, data: expect.objectContaining({ operator_email: support.email }) },
      { type: 'admin.user_deleted', actor: 'operator', actor_id: admin.id, data: { operator_email: admin.email } },
    ]);
  });

  it('a role change applies to an existing token at once; the token dies with its operator', async () => {
    const admin = await operatorWithToken(gw.services.db, 'admin');
    const other = await operatorWithToken(gw.services.db, 'viewer');
    const user = await makeUser(gw);
    expect((await as(other.token, 'PUT', `/admin/v1/users/${user.id}/active`, { active: false })).status).toBe(403);
    const promoted = await as(admin.token, 'PUT', `/admin/v1/operators/${other.id}/role`, { role: 'support' });
    expect([promoted.status, promoted.json.role]).toEqual([200, 'support']);
    expect((await as(other.token, 'PUT', `/admin/v1/users/${user.id}/active`, { active: false })).status).toBe(200);
    expect((await as(admin.token, 'DELETE', `/admin/v1/operators/${other.id}`)).status).toBe(200);
    const dead = await as(other.token, 'GET', `/admin/v1/users/${user.id}`);
    expect([dead.status, dead.json]).toEqual([401, { error: 'Clé d’administration invalide' }]);
    expect((await as(admin.token, 'GET', '/admin/v1/operators')).json.operators.map((o: { id: number }) => o.id)).not.toContain(other.id);
  });

  it('a token works until its expiry and is refused from then on (401), the clock moved past it', async () => {
    const viewer = await operatorWithToken(gw.services.db, 'viewer');
    const { token } = await mintOperatorToken(gw.services.db, viewer.id, 'short', 1, clock());
    try {
      clock.advance(86_400_000 - 60_000);
      expect((await as(token, 'GET', '/admin/v1/audit?limit=1')).status).toBe(200);
      clock.advance(60_000);
      const expired = await as(token, 'GET', '/admin/v1/audit?limit=1');
      expect([expired.status, expired.text]).toEqual([401, '{"error":"Clé d’administration invalide"}']);
      // The operator's 90-day token still works at the same instant.
      expect((await as(viewer.token, 'GET', '/admin/v1/audit?limit=1')).status).toBe(200);
    } finally {
      clock.set(new Date());
    }
  });

  it('operators, their roles and removal are for admins; a bad role is 400', async () => {
    const support = await operatorWithToken(gw.services.db, 'support');
    expect((await as(support.token, 'GET', '/admin/v1/operators')).json).toEqual({ error: 'Rôle insuffisant', required_roles: ['admin'], current_role: 'support' });
    const listed = await as(ADMIN_KEY, 'GET', '/admin/v1/operators');
    expect(listed.json.operators).toContainEqual({ id: support.id, email: support.email, role: 'support', enrolled: false, mfa: false, created_at: expect.any(String) });
    expect((await as(ADMIN_KEY, 'PUT', `/admin/v1/operators/${support.id}/role`, { role: 'root' })).status).toBe(400);
    expect((await as(ADMIN_KEY, 'DELETE', '/admin/v1/operators/999999999')).status).toBe(404);
  });

  it('GET /admin/v1/operator says who calls and with which role, as it is now', async () => {
    const viewer = await operatorWithToken(gw.services.db, 'viewer');
    expect((await as(viewer.token, 'GET', '/admin/v1/operator')).json).toEqual({ operator: { id: viewer.id, email: viewer.email }, role: 'viewer' });
    expect((await as(ADMIN_KEY, 'PUT', `/admin/v1/operators/${viewer.id}/role`, { role: 'support' })).status).toBe(200);
    expect((await as(viewer.token, 'GET', '/admin/v1/operator')).json.role).toBe('support');
    expect((await as(ADMIN_KEY, 'GET', '/admin/v1/operator')).json).toEqual({ operator: null, role: 'admin' });
  });

  it('lists and revokes its own tokens; a gwop_ token never mints another; the shared key has none', async () => {
    const viewer = await operatorWithToken(gw.services.db, 'viewer');
    const listed = await as(viewer.token, 'GET', '/admin/v1/operator/tokens');
    expect(listed.json.tokens).toEqual([{ id: expect.any(Number), name: 'laptop', created_at: expect.any(String), expires_at: expect.any(String), last_used_at: expect.any(String) }]);
    const minted = await as(viewer.token, 'POST', '/admin/v1/operator/tokens', { name: 'another' });
    expect([minted.status, minted.json]).toEqual([403, { error: 'Authentification récente requise' }]);
    expect((await as(ADMIN_KEY, 'GET', '/admin/v1/operator/tokens')).status).toBe(404);
    const id = listed.json.tokens[0].id as number;
    expect((await as(viewer.token, 'DELETE', `/admin/v1/operator/tokens/${id}`)).json).toEqual({ id, revoked: true });
    expect((await as(viewer.token, 'GET', '/admin/v1/operator/tokens')).status).toBe(401);
  });

  it('an admin resets another operator\'s second factor, never their own (409)', async () => {
    const admin = await operatorWithToken(gw.services.db, 'admin');
    const other = await operatorWithToken(gw.services.db, 'viewer');
    await db.sql("INSERT INTO operator_totp (operator_id, secret_encrypted, confirmed_at) VALUES ($1, 'x', now()), ($2, 'x', now())", [admin.id, other.id]);
    const own = await as(admin.token, 'DELETE', `/admin/v1/operators/${admin.id}/mfa`);
    expect([own.status, own.json]).toEqual([409, { error: 'Action impossible sur son propre compte' }]);
    const reset = await as(admin.token, 'DELETE', `/admin/v1/operators/${other.id}/mfa`);
    expect([reset.status, reset.json.mfa]).toEqual([200, false]);
    expect(await db.sql('SELECT operator_id FROM operator_totp WHERE operator_id IN ($1, $2)', [admin.id, other.id])).toEqual([{ operator_id: admin.id }]);
  });

  it('audit: actor_id is the account itself for `user`, null for the shared key', async () => {
    const user = await makeUser(gw);
    expect((await gw.post('/api/v1/auth/login', { email: user.email, password: user.password })).status).toBe(200);
    expect((await as(ADMIN_KEY, 'PUT', `/admin/v1/users/${user.id}/plan`, { plan: 'pro' })).status).toBe(200);
    const events = await db.sql<{ type: string; actor: string; actor_id: number | null }>(
      "SELECT type, actor, actor_id FROM audit_events WHERE user_id = $1 AND type IN ('login.succeeded', 'admin.plan_changed') ORDER BY id", [user.id],
    );
    expect(events.at(-2)).toEqual({ type: 'login.succeeded', actor: 'user', actor_id: user.id });
    expect(events.at(-1)).toEqual({ type: 'admin.plan_changed', actor: 'admin', actor_id: null });
    const listed = await as(ADMIN_KEY, 'GET', `/admin/v1/audit?user_id=${user.id}&type=login.succeeded`);
    expect(listed.json.events[0]).toEqual(expect.objectContaining({ actor: 'user', actor_id: user.id }));
  });

  it('an operator token works on no endpoint of the public listener', async () => {
    const admin = await operatorWithToken(gw.services.db, 'admin');
    for (const path of ['/api/v1/user/me', '/api/v1/user/api-keys']) {
      const res = await gw.get(path, { headers: bearer(admin.token) });
      expect([path, res.status]).toEqual([path, 401]);
    }
    expect((await gw.get('/api/v1/user/me', { headers: { 'x-api-key': admin.token } })).status).toBe(401);
  });
});

describeWithServices('admin API with an empty admin.apiKey: operators only', () => {
  let setup: AdminOnOwnDatabase;
  let db: ThrowawayDatabase;
  let gw: TestGateway;
  let url: string;
  const as = (token: string, method: string, path: string, json?: unknown) => request(url, method, path, { headers: bearer(token), ...(json === undefined ? {} : { json }) });

  beforeAll(async () => {
    // docs/operators.md's example, on a port of the test's.
    const { apiKey, publicUrl } = parseConfig(docsExample('operators', 'operators-only'), 'gateway.yaml').admin;
    setup = await adminOnOwnDatabase(({ storage }) => testConfig({ storage, admin: { apiKey, publicUrl } }));
    ({ db, gw, url } = setup);
  });
  afterAll(() => setup?.close());

  describe('in order', () => {
    it('answers 404 while no operator exists, then takes operator tokens; the last admin cannot be demoted or removed (409)', async () => {
      // Whether an operator exists, asked of Postgres on each request while none does: one added by
      // another instance or the CLI (here straight into the database) opens the API at once.
      const asked = async (fn: () => Promise<unknown>) => (await queriesDuring(gw, fn)).filter((q) => q.includes('FROM operators LIMIT 1')).length;
      for (let i = 0; i < 2; i++) {
        expect(await asked(async () => expect((await as('anything', 'GET', '/admin/v1/users')).json).toEqual({ error: 'Ressource introuvable' }))).toBe(1);
        expect(await asked(async () => expect((await request(url, 'GET', '/console/operator.html')).status).toBe(404))).toBe(1);
      }
      const first = await operatorWithToken(gw.services.db, 'admin');
      // The console now offers operator sign-in only: the (empty) key signs nobody in.
      expect((await request(url, 'GET', '/console/operator.html')).status).toBe(200);
      expect((await request(url, 'POST', '/console/session', { json: { key: '' } })).status).toBe(401);
      expect((await as('anything', 'GET', '/admin/v1/users')).status).toBe(401);
      expect((await as(first.token, 'GET', '/admin/v1/users')).status).toBe(200);
      // Seen once, never asked again: operators only go by removal, which keeps the last admin while admin.apiKey is empty.
      expect(await asked(async () => {
        expect((await as(first.token, 'GET', '/admin/v1/users')).status).toBe(200);
        expect((await as('anything', 'GET', '/admin/v1/users')).status).toBe(401);
        expect((await request(url, 'GET', '/console/operator.html')).status).toBe(200);
      })).toBe(0);
      const demoted = await as(first.token, 'PUT', `/admin/v1/operators/${first.id}/role`, { role: 'viewer' });
      expect([demoted.status, demoted.json]).toEqual([409, { error: 'Dernier administrateur' }]);
      expect((await as(first.token, 'DELETE', `/admin/v1/operators/${first.id}`)).status).toBe(409);
      // With a second admin, either may go.
      const second = await operatorWithToken(gw.services.db, 'admin');
      expect((await as(second.token, 'PUT', `/admin/v1/operators/${first.id}/role`, { role: 'viewer' })).status).toBe(200);
      expect((await as(second.token, 'DELETE', `/admin/v1/operators/${second.id}`)).status).toBe(409);
      const events = await db.sql<{ type: string; actor_id: number }>("SELECT type, actor_id FROM audit_events WHERE type LIKE 'operator.%' ORDER BY id");
      expect(events).toEqual([{ type: 'operator.role_changed', actor_id: second.id }]);
    });
  });
});

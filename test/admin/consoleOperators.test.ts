// CONTRACT §29, support works in the console as itself: a sign-in link (POST /console/tickets) is
// minted with an operator's gwop_ token of role support or admin, and signs in as that operator
// (whose role is read at each request); a viewer's token is told its role is not enough; the
// sign-in page offers the shared key's form only when a key is set, operators' sign-in always.
// And §29's organization keys, listed under their organization for support.
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { buildAdminApp } from '../../src/admin/app.js';
import { mintOperatorToken } from '../../src/admin/operatorTokens.js';
import { insertOperator, type OperatorRole } from '../../src/storage/operators/operators.js';
import {
  ADMIN_KEY, bearer, closeSql, describeWithServices, makeUser, marker, sql, startTestGateway, testConfig, throwawayDatabase, type TestGateway, type ThrowawayDatabase,
} from '../helpers/gateway.js';
import { request } from '../helpers/http.js';

// On a database of its own: operators made here must not give another file's keyless gateway an admin API.
describeWithServices('console: operators\' sign-in links, and what the sign-in page offers', () => {
  let db: ThrowawayDatabase;
  let keyed: TestGateway;
  let keyless: TestGateway;
  const apps: FastifyInstance[] = [];
  let url: string;
  let keylessUrl: string;

  const listen = async (g: TestGateway) => {
    const app = await buildAdminApp(g.services);
    apps.push(app);
    return app.listen({ host: '127.0.0.1', port: 0 });
  };
  async function operator(role: OperatorRole) {
    const made = (await insertOperator(keyed.services.db, `op-${marker()}@example.test`, role, new Date()))!;
    return { ...made, token: (await mintOperatorToken(keyed.services.db, made.id, 'laptop', 90, new Date())).token };
  }
  const mint = (base: string, token: string) => request(base, 'POST', '/console/tickets', { headers: bearer(token) });
  const redeem = (base: string, link: string) => request(base, 'POST', '/console/session', { headers: { origin: base }, json: { ticket: /#ticket=([\w-]+)$/.exec(link)![1] } });

  beforeAll(async () => {
    db = await throwawayDatabase({ migrated: true });
    keyed = await startTestGateway(testConfig({ storage: db.storage }));
    keyless = await startTestGateway(testConfig({ storage: db.storage, admin: { apiKey: '' } }));
    [url, keylessUrl] = await Promise.all([listen(keyed), listen(keyless)]);
  });
  afterAll(async () => {
    await Promise.all(apps.map((a) => a.close()));
    await Promise.all([keyed?.close(), keyless?.close()]);
    await db?.drop();
    await closeSql();
  });

  it.each(['support', 'admin'] as const)('a %s operator\'s token mints a link that signs in as that operator', async (role) => {
    const op = await operator(role);
    const minted = await mint(url, op.token);
    expect(minted.status).toBe(201);
    expect(minted.json.url).toMatch(new RegExp(`^${url}/console/#ticket=[\\w-]{43}$`));
    const session = await redeem(url, minted.json.url);
    expect(session.status).toBe(200);
    const cookie = String(session.headers['set-cookie']).split(';')[0]!;
    const me = await request(url, 'GET', '/console/api/v1/operator', { headers: { cookie } });
    expect(me.json).toMatchObject({ role, operator: { id: op.id, email: op.email } });
    // Once: the same link again is spent.
    expect((await redeem(url, minted.json.url)).status).toBe(401);
  });

  it('a viewer\'s token is refused with its role named, and mints nothing', async () => {
    const op = await operator('viewer');
    const refused = await mint(url, op.token);
    expect(refused.status).toBe(403);
    expect(refused.text).toBe('{"error":"Rôle insuffisant","required_roles":["support","admin"],"current_role":"viewer"}');
  });

  it('an unknown token, or a revoked operator\'s, gets the key\'s 401', async () => {
    expect((await mint(url, 'gwop_notatoken')).json).toEqual({ error: 'Clé d’administration invalide' });
  });

  it('a link minted by a support operator acts as them: a support change passes, an admin one is refused, the audit names the operator', async () => {
    const op = await operator('support');
    const user = await makeUser(keyed);
    const session = await redeem(url, (await mint(url, op.token)).json.url);
    const cookie = String(session.headers['set-cookie']).split(';')[0]!;
    const headers = { cookie, 'x-csrf-token': session.json.csrf, origin: url };
    expect((await request(url, 'DELETE', `/console/api/v1/users/${user.id}/sessions`, { headers })).status).toBe(200);
    expect((await request(url, 'PUT', `/console/api/v1/users/${user.id}/plan`, { headers, json: { plan: 'pro' } })).json)
      .toEqual({ error: 'Rôle insuffisant', required_roles: ['admin'], current_role: 'support' });
    const [event] = await db.sql<{ actor: string; actor_id: number }>("SELECT actor, actor_id FROM audit_events WHERE user_id = $1 AND type = 'admin.sessions_revoked'", [user.id]);
    expect(event).toEqual({ actor: 'operator', actor_id: op.id });
  });

  it('the sign-in page offers the key\'s form only where a key is set, and operators\' sign-in on both', async () => {
    expect((await request(url, 'GET', '/console/sign-in-methods')).json).toEqual({ key: true, operator: true });
    expect((await request(keylessUrl, 'GET', '/console/sign-in-methods')).json).toEqual({ key: false, operator: true });
    const page = (await request(url, 'GET', '/console/')).text;
    expect(page).toContain('<a id="operator-link" href="operator.html">Sign in as an operator</a>');
  });
});

describeWithServices('admin API: an organization\'s keys, under the organization', () => {
  let gw: TestGateway;
  let app: FastifyInstance;
  let url: string;
  beforeAll(async () => {
    gw = await startTestGateway(testConfig({ organizations: { enabled: true }, apiKeys: { plans: 'all' },
      mail: { smtp: '', from: 'G <g@example.test>', resetUrl: 'https://a.example/r?token={token}', verifyUrl: 'https://a.example/v?token={token}', invitationUrl: 'https://a.example/j?token={token}' } }));
    app = await buildAdminApp(gw.services);
    url = await app.listen({ host: '127.0.0.1', port: 0 });
  });
  afterAll(async () => {
    await app?.close();
    await gw?.close();
    await closeSql();
  });

  it('lists the organization\'s keys with their creator and role, and none of the creator\'s personal ones; an unknown organization is 404', async () => {
    const owner = await makeUser(gw);
    // Creating an organization needs a verified email (docs/organizations.md): verified here as the link would.
    await sql('UPDATE users SET email_verified_at = now() WHERE id = $1', [owner.id]);
    const org = (await gw.post('/api/v1/orgs', { name: `Keys ${marker()}` }, { headers: bearer(owner.access) })).json;
    const orgKey = await gw.post(`/api/v1/orgs/${org.id}/api-keys`, { name: 'ci' }, { headers: bearer(owner.access) });
    expect(orgKey.status, orgKey.text).toBe(201);
    const personal = await gw.post('/api/v1/user/api-keys', { name: 'mine' }, { headers: bearer(owner.access) });
    expect(personal.status, personal.text).toBe(201);
    const listed = await request(url, 'GET', `/admin/v1/orgs/${org.id}/api-keys`, { headers: bearer(ADMIN_KEY) });
    expect(listed.status).toBe(200);
    expect(listed.json).toEqual({
      org_id: org.id,
      api_keys: [{ id: orgKey.json.id, name: 'ci', start: expect.any(String), scopes: null, role: 'member', created_by: owner.id,
        created_at: expect.any(String), expires_at: null, last_used_at: null }],
    });
    expect(JSON.stringify(listed.json)).not.toContain(orgKey.json.key);
    expect((await request(url, 'GET', '/admin/v1/orgs/999999999/api-keys', { headers: bearer(ADMIN_KEY) })).status).toBe(404);
  });
});

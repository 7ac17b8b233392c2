// /admin/v1's user routes (src/admin/routes.ts) beyond what admin, users and apiKeys.test.ts ask:
// the 404 of every per-user route for an id that is none, a session id that is not the user's, the
// bounds of the leaked keys and of an alert, the audit row and the log line of each write, the
// second factor's removal ending older tokens only when something went, and the last owner found
// under the user's lock. On the run's database, with the admin key (actor `admin`).
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  bearer, closeSql, describeWithServices, holdNotifications, loggedLines, makeUser, marker, sql, startTestGateway, testConfig, testConfigFromYaml,
  type TestGateway, type TestUser,
} from '../helpers/gateway.js';
import { docsExample } from '../helpers/docs.js';
import { listenAdmin, type AdminListening } from '../helpers/adminApi.js';
import { holdRows, holdUserRow } from '../helpers/rowLock.js';

const NOT_FOUND = { error: 'Ressource introuvable' };
const BAD_REQUEST = { error: 'Requête invalide' };
/** ALERT_DATA_MAX_BYTES of routes.ts. */
const ALERT_MAX = 60 * 1024;

type Admin = AdminListening & { gw: TestGateway };

async function startAdmin(config = testConfig()): Promise<Admin> {
  const gw = await startTestGateway(config);
  return { gw, ...(await listenAdmin(gw)) };
}

/** The audit rows of `type` about the user, oldest first. */
const audited = (userId: number, type: string) =>
  sql<{ actor: string; actor_id: number | null; data: unknown }>('SELECT actor, actor_id, data FROM audit_events WHERE user_id = $1 AND type = $2 ORDER BY id', [userId, type]);

describeWithServices('admin: a user\'s routes, their refusals, audit rows and log lines', () => {
  let s: Admin;
  let gw: TestGateway;
  let held: { release(): void } | undefined;
  const admin = (method: string, path: string, json?: unknown) => s.as(method, path, json);
  /** The fields of the log lines `msg` about the user. */
  const logged = (msg: string, userId: number, ...fields: string[]) => loggedLines(gw, msg).filter((l) => l.userId === userId).map((l) => fields.map((f) => l[f]));
  const sessionsOf = async (id: number) => ((await admin('GET', `/admin/v1/users/${id}/sessions`)).json.sessions as Array<{ id: number }>).map((x) => x.id);
  const newKey = async (user: TestUser) => (await gw.post('/api/v1/user/api-keys', { name: 'k' }, { headers: bearer(user.access) })).json as { id: number; key: string };

  beforeAll(async () => {
    s = await startAdmin();
    gw = s.gw;
  });
  afterEach(() => {
    held?.release();
    held = undefined;
  });
  afterAll(async () => {
    await s?.app.close();
    await gw?.close();
    await closeSql();
  });

  it('answers 404 Ressource introuvable on every per-user route for an unknown or a malformed id', async () => {
    const routes: Array<[string, string, unknown?]> = [
      ['GET', 'sessions'], ['GET', 'api-keys'], ['GET', 'passkeys'], ['GET', 'identities'], ['DELETE', 'sessions'], ['DELETE', 'sessions/1'],
      ['DELETE', 'mfa'], ['DELETE', ''], ['PUT', 'plan', { plan: 'pro' }], ['PUT', 'active', { active: true }],
    ];
    for (const id of ['2147483000', 'abc']) {
      for (const [method, tail, json] of routes) {
        const res = await admin(method, `/admin/v1/users/${id}${tail ? `/${tail}` : ''}`, json);
        expect([method, id, tail, res.status, res.json]).toEqual([method, id, tail, 404, NOT_FOUND]);
      }
    }
    // A malformed id is 404 before the body is looked at.
    for (const [tail, json] of [['plan', { plan: 'gold' }], ['active', { active: 'yes' }]] as const) {
      expect([tail, (await admin('PUT', `/admin/v1/users/abc/${tail}`, json)).status]).toEqual([tail, 404]);
    }
    // A change that did not happen is not audited.
    expect(await sql('SELECT type FROM audit_events WHERE user_id = 2147483000')).toEqual([]);
  });

  it('ends one session of the user\'s, never one of another user\'s or a malformed one (404); audited and logged with what ended', async () => {
    const user = await makeUser(gw);
    expect((await gw.post('/api/v1/auth/login', { email: user.email, password: user.password })).status).toBe(200);
    const other = await makeUser(gw);
    const [theirs] = await sessionsOf(other.id);
    const [newest, oldest] = await sessionsOf(user.id);
    for (const sid of ['abc', '0', String(theirs)]) {
      const res = await admin('DELETE', `/admin/v1/users/${user.id}/sessions/${sid}`);
      expect([sid, res.status, res.json]).toEqual([sid, 404, NOT_FOUND]);
    }
    expect([await sessionsOf(user.id), await sessionsOf(other.id)]).toEqual([[newest, oldest], [theirs]]);

    const one = await admin('DELETE', `/admin/v1/users/${user.id}/sessions/${oldest}`);
    expect([one.status, one.json]).toEqual([200, { message: 'Sessions révoquées', revoked: 1 }]);
    const all = await admin('DELETE', `/admin/v1/users/${user.id}/sessions`);
    expect([all.status, all.json]).toEqual([200, { message: 'Sessions révoquées', revoked: 1 }]);
    expect(await sql('SELECT DISTINCT revoked_reason FROM refresh_tokens WHERE user_id = $1', [user.id])).toEqual([{ revoked_reason: 'session' }]);
    expect(await audited(user.id, 'admin.sessions_revoked')).toEqual([
      { actor: 'admin', actor_id: null, data: { session_id: oldest, revoked: 1 } },
      { actor: 'admin', actor_id: null, data: { session_id: null, revoked: 1 } },
    ]);
    expect(logged('admin: sessions revoked', user.id, 'sessionId', 'ended')).toEqual([[oldest, 1], ['all', 1]]);
    expect(await sessionsOf(other.id)).toEqual([theirs]);
  });

  it('removes a second factor: audited with how many went; older access tokens end only when one did', async () => {
    const user = await makeUser(gw);
    await sql("INSERT INTO mfa_totp (user_id, secret_encrypted, confirmed_at) VALUES ($1, 'x', now())", [user.id]);
    await sql("INSERT INTO mfa_recovery_codes (user_id, code_hash) VALUES ($1, 'a'), ($1, 'b')", [user.id]);
    const generation = async () => (await sql<{ g: number }>('SELECT credential_generation AS g FROM users WHERE id = $1', [user.id]))[0]!.g;
    const before = await generation();
    for (const [removed, after] of [[3, before + 1], [0, before + 1]]) {
      const res = await admin('DELETE', `/admin/v1/users/${user.id}/mfa`);
      expect([res.status, res.json]).toEqual([200, { message: 'Second facteur retiré', user_id: user.id }]);
      expect([removed, await generation()]).toEqual([removed, after]);
    }
    expect(await sql('SELECT user_id FROM mfa_totp WHERE user_id = $1', [user.id])).toEqual([]);
    expect((await audited(user.id, 'admin.mfa_reset')).map((r) => [r.actor, r.data])).toEqual([['admin', { removed: 3 }], ['admin', { removed: 0 }]]);
    expect(logged('admin: second factor removed', user.id, 'removed')).toEqual([[3], [0]]);
  });

  it('lists identities newest first, who the user is at each provider and nothing else', async () => {
    const user = await makeUser(gw);
    const subject = marker();
    await sql(`INSERT INTO user_identities (user_id, provider, issuer, subject, email, created_at)
               VALUES ($1, 'google', 'https://accounts.google.com', $2, $3, '2026-01-01T00:00:00Z'), ($1, 'corp', 'https://idp.corp.example', $2, NULL, '2026-02-01T00:00:00Z')`,
    [user.id, subject, user.email]);
    expect((await admin('GET', `/admin/v1/users/${user.id}/identities`)).json).toEqual({
      identities: [
        { provider: 'corp', issuer: 'https://idp.corp.example', subject, email: null, created_at: '2026-02-01T00:00:00.000Z' },
        { provider: 'google', issuer: 'https://accounts.google.com', subject, email: user.email, created_at: '2026-01-01T00:00:00.000Z' },
      ],
    });
  });

  it('revokes one API key: listed inactive, logged; revoked again or malformed, 404', async () => {
    const user = await makeUser(gw, { plan: 'pro' });
    const key = await newKey(user);
    expect((await admin('DELETE', `/admin/v1/api-keys/${key.id}`)).status).toBe(200);
    expect((await admin('GET', `/admin/v1/users/${user.id}/api-keys`)).json.api_keys.map((k: { id: number; active: boolean }) => [k.id, k.active])).toEqual([[key.id, false]]);
    expect(logged('admin: API key revoked', user.id, 'keyId')).toEqual([[key.id]]);
    for (const id of [String(key.id), 'abc']) {
      const res = await admin('DELETE', `/admin/v1/api-keys/${id}`);
      expect([id, res.status, res.json]).toEqual([id, 404, NOT_FOUND]);
    }
  });

  it('revokes leaked keys in lists of up to 1000 entries of up to 256 characters; one more of either, or an entry not a string, is 400 and revokes nothing', async () => {
    const user = await makeUser(gw, { plan: 'pro' });
    const [leaked, kept] = [await newKey(user), await newKey(user)];
    const filler = (n: number) => Array.from({ length: n }, (_, i) => `gw_unknown_${i}`);
    const refusals = [
      {}, { keys: kept.key }, { keys: [...filler(1000), kept.key] }, { keys: [kept.key, 'x'.repeat(257)] }, { keys: ['y'.repeat(257)] },
      { keys: [kept.key, 7] }, { keys: [null, kept.key] }, { keys: [{ length: 1 }] },
    ];
    for (const body of refusals) {
      const res = await admin('POST', '/admin/v1/api-keys/leaked', body);
      expect([JSON.stringify(body).slice(0, 60), res.status, res.json]).toEqual([JSON.stringify(body).slice(0, 60), 400, BAD_REQUEST]);
    }
    const res = await admin('POST', '/admin/v1/api-keys/leaked', { keys: [...filler(998), 'z'.repeat(256), leaked.key] });
    expect([res.status, res.json]).toEqual([200, { revoked: [leaked.id] }]);
    expect(loggedLines(gw, 'admin: leaked API keys revoked').filter((l) => (l.revoked as number[]).includes(leaked.id)).map((l) => l.revoked)).toEqual([[leaked.id]]);
    const listed = (await admin('GET', `/admin/v1/users/${user.id}/api-keys`)).json.api_keys as Array<{ id: number; active: boolean }>;
    expect(listed.map((k) => [k.id, k.active]).sort()).toEqual([[leaked.id, false], [kept.id, true]].sort());
  });

  it('finds a user by the address given, trimmed and in any case; a blank or repeated email= is 400', async () => {
    const user = await makeUser(gw);
    const found = await admin('GET', `/admin/v1/users?email=${encodeURIComponent(`  ${user.email.toUpperCase()} `)}`);
    expect([found.status, found.json.id, found.json.email]).toEqual([200, user.id, user.email]);
    for (const q of ['email=%20%20', `email=${encodeURIComponent(user.email)}&email=${encodeURIComponent(user.email)}`]) {
      const res = await admin('GET', `/admin/v1/users?${q}`);
      expect([q, res.status, res.json]).toEqual([q, 400, { error: 'Paramètre email requis' }]);
    }
  });

  it('lists the audit log in pages of `limit` with a cursor to the rest; a malformed filter is 400', async () => {
    const user = await makeUser(gw);
    const page = async (cursor?: string) => (await admin('GET', `/admin/v1/audit?user_id=${user.id}&limit=1${cursor ? `&cursor=${cursor}` : ''}`)).json;
    const all = (await admin('GET', `/admin/v1/audit?user_id=${user.id}`)).json.events as Array<{ id: number }>;
    expect(all.length).toBeGreaterThanOrEqual(2);
    const first = await page();
    expect([first.events.map((e: { id: number }) => e.id), typeof first.next_cursor]).toEqual([[all[0]!.id], 'string']);
    expect((await page(first.next_cursor)).events.map((e: { id: number }) => e.id)).toEqual([all[1]!.id]);
    const bad = await admin('GET', '/admin/v1/audit?limit=0');
    expect([bad.status, bad.json]).toEqual([400, { error: 'Paramètres de liste invalides (limit, cursor, user_id ou since)' }]);
  });

  it('sets a plan and the active flag: audited and logged; an override that is no boolean is 400 and changes nothing', async () => {
    const user = await makeUser(gw);
    const bad = await admin('PUT', `/admin/v1/users/${user.id}/plan`, { plan: 'pro', override: 'yes' });
    expect([bad.status, bad.json]).toEqual([400, BAD_REQUEST]);
    expect((await admin('PUT', `/admin/v1/users/${user.id}/plan`, { plan: 'pro' })).status).toBe(200);
    expect((await admin('PUT', `/admin/v1/users/${user.id}/active`, { active: false })).status).toBe(200);
    expect(await audited(user.id, 'admin.plan_changed')).toEqual([{ actor: 'admin', actor_id: null, data: { plan: 'pro' } }]);
    expect(await audited(user.id, 'admin.active_changed')).toEqual([{ actor: 'admin', actor_id: null, data: { active: false } }]);
    expect(logged('admin: plan set', user.id, 'plan', 'override')).toEqual([['pro', false]]);
    expect(logged('admin: active flag set', user.id, 'active')).toEqual([[false]]);
  });

  it('a plan, a deactivation and an erasure hold at once on this instance, its change notifications held', async () => {
    const [user, erased] = [await makeUser(gw), await makeUser(gw)];
    // Both held in the instance's identity cache.
    expect((await gw.post('/api/v1/user/api-token', {}, { headers: bearer(user.access) })).status).toBe(403);
    expect((await gw.get('/api/v1/user/me', { headers: bearer(erased.access) })).status).toBe(200);
    held = holdNotifications(gw);
    expect((await admin('PUT', `/admin/v1/users/${user.id}/plan`, { plan: 'pro' })).status).toBe(200);
    expect((await gw.post('/api/v1/user/api-token', {}, { headers: bearer(user.access) })).status).toBe(201);
    expect((await admin('PUT', `/admin/v1/users/${user.id}/active`, { active: false })).status).toBe(200);
    expect((await gw.get('/api/v1/user/me', { headers: bearer(user.access) })).status).toBe(401);
    const gone = await admin('DELETE', `/admin/v1/users/${erased.id}`);
    expect([gone.status, gone.json.id]).toEqual([200, erased.id]);
    expect((await gw.get('/api/v1/user/me', { headers: bearer(erased.access) })).status).toBe(401);
    expect(logged('admin: user deleted', erased.id, 'userId')).toEqual([[erased.id]]);
  });

  it('an erasure finds, under the user\'s lock, an organization the user came to own meanwhile: 409 with it, the account kept', async () => {
    const user = await makeUser(gw);
    const name = `Org ${marker()}`;
    const hold = await holdUserRow(user.id);
    const erasure = admin('DELETE', `/admin/v1/users/${user.id}`);
    try {
      await hold.waiters(1);
      const [org] = await hold.run<{ id: number }>('INSERT INTO organizations (name) VALUES ($1) RETURNING id', [name]);
      await hold.run("INSERT INTO memberships (org_id, user_id, role) VALUES ($1, $2, 'owner')", [org!.id, user.id]);
      await hold.release();
      const res = await erasure;
      expect([res.status, res.json]).toEqual([409, { error: 'Dernier propriétaire de l\'organisation', orgs: [{ id: org!.id, name }] }]);
    } finally {
      await hold.release().catch(() => {});
    }
    expect(await sql('SELECT id FROM users WHERE id = $1', [user.id])).toEqual([{ id: user.id }]);
    expect(await audited(user.id, 'admin.user_deleted')).toEqual([]);
  });

  it('stores an alert whose data is 60 KiB exactly, not a byte more (413), nor null data (400); logged; not held up by a sign-in holding the user', async () => {
    const user = await makeUser(gw);
    // {"blob":"…"}: 11 bytes besides the blob.
    const data = (bytes: number) => ({ blob: 'a'.repeat(bytes - 11) });
    const over = await admin('POST', '/admin/v1/alerts', { user_id: user.id, type: 'x', data: data(ALERT_MAX + 1) });
    expect([over.status, over.json]).toEqual([413, { error: 'Requête trop volumineuse' }]);
    const none = await admin('POST', '/admin/v1/alerts', { user_id: user.id, type: 'x', data: null });
    expect([none.status, none.json]).toEqual([400, { error: 'Alerte invalide (user_id, type et data requis)' }]);
    // A sign-in reads the row FOR SHARE: the alert, which holds it the same way, goes on beside it.
    const signIn = await holdRows('SELECT id FROM users WHERE id = $1 FOR SHARE', [user.id]);
    try {
      const res = await admin('POST', '/admin/v1/alerts', { user_id: user.id, type: 'billing.limit', data: data(ALERT_MAX) });
      expect([res.status, res.json]).toEqual([202, { message: 'Alerte acceptée' }]);
    } finally {
      await signIn.release();
    }
    expect(await sql('SELECT type FROM webhook_deliveries WHERE user_id = $1', [user.id])).toEqual([{ type: 'billing.limit' }]);
    expect(logged('admin: alert stored for delivery', user.id, 'type')).toEqual([['billing.limit']]);
  });

  it('without organizations.sso, an operator verifies no domain and sets no SAML enforcement: 404', async () => {
    const { orgId, domain } = await pendingClaim();
    const verify = await admin('POST', `/admin/v1/orgs/${orgId}/domains/${domain}/verify`, {});
    expect([verify.status, verify.json]).toEqual([404, NOT_FOUND]);
    const saml = await admin('PUT', `/admin/v1/orgs/${orgId}/sso/saml`, {});
    expect([saml.status, saml.json]).toEqual([404, NOT_FOUND]);
    expect(await sql('SELECT status FROM org_domains WHERE org_id = $1', [orgId])).toEqual([{ status: 'pending' }]);
  });

  describe('with organizations.sso', () => {
    let sso: Admin;
    beforeAll(async () => {
      // Organizations need their mails' pages; no mail is sent here.
      const mail = Object.fromEntries(['reset', 'verify', 'invitation'].map((page) => [`${page}Url`, `https://app.example.com/${page}?token={token}`]));
      sso = await startAdmin(testConfig({ organizations: { enabled: true, sso: {} }, mail }));
    });
    afterAll(async () => {
      await sso?.app.close();
      await sso?.gw.close();
    });

    it('an operator verifies a pending domain and is asked a proper body for the SAML enforcement', async () => {
      const { orgId, domain } = await pendingClaim();
      const verify = await sso.as('POST', `/admin/v1/orgs/${orgId}/domains/${domain}/verify`, {});
      expect([verify.status, verify.json.status, verify.json.verified_by]).toEqual([200, 'verified', 'operator']);
      const saml = await sso.as('PUT', `/admin/v1/orgs/${orgId}/sso/saml`, {});
      expect([saml.status, saml.json]).toEqual([400, BAD_REQUEST]);
    });
  });
});

describeWithServices('admin: a plan Stripe manages (docs/billing.md\'s example)', () => {
  let s: Admin;
  beforeAll(async () => {
    // No call reaches Stripe here: the subscription is the database's.
    s = await startAdmin(testConfigFromYaml(docsExample('billing', 'billing'), { STRIPE_SECRET_KEY: 'rk_test_fake', STRIPE_WEBHOOK_SECRET: 'whsec_routes', STRIPE_API_BASE: 'http://127.0.0.1:9' }));
  });
  afterAll(async () => {
    await s?.app.close();
    await s?.gw.close();
    await closeSql();
  });

  /** A premium user whose subscription is active, as the Stripe webhook would have stored it. */
  async function billedUser(): Promise<TestUser> {
    const user = await makeUser(s.gw, { plan: 'premium' });
    await sql(`INSERT INTO billing_subscriptions (stripe_subscription_id, owner_type, owner_id, stripe_customer_id, status, price, prices)
               VALUES ($1, 'user', $2, $3, 'active', 'price_premium_monthly', '{price_premium_monthly}')`, [`sub_${marker()}`, user.id, `cus_${marker()}`]);
    return user;
  }

  it('refuses another plan than billing\'s with 409 and the plan billing computes; the user and the audit untouched', async () => {
    const user = await billedUser();
    const res = await s.as('PUT', `/admin/v1/users/${user.id}/plan`, { plan: 'pro' });
    expect([res.status, res.text]).toEqual([409, '{"error":"Plan géré par la facturation","billing_plan":"premium"}']);
    expect(await sql('SELECT plan FROM users WHERE id = $1', [user.id])).toEqual([{ plan: 'premium' }]);
    expect(await audited(user.id, 'admin.plan_changed')).toEqual([]);
  });

  it('refuses to erase an organization\'s last owner before Stripe is asked anything (Stripe out of reach here: 503 had it been)', async () => {
    const user = await billedUser();
    const name = `Org ${marker()}`;
    const [org] = await sql<{ id: number }>('INSERT INTO organizations (name) VALUES ($1) RETURNING id', [name]);
    await sql("INSERT INTO memberships (org_id, user_id, role) VALUES ($1, $2, 'owner')", [org!.id, user.id]);
    const res = await s.as('DELETE', `/admin/v1/users/${user.id}`);
    expect([res.status, res.json]).toEqual([409, { error: 'Dernier propriétaire de l\'organisation', orgs: [{ id: org!.id, name }] }]);
  });
});

/** An organization with a domain claimed and not verified yet, made by SQL. */
async function pendingClaim(): Promise<{ orgId: number; domain: string }> {
  const domain = `${marker()}.example.org`;
  const [org] = await sql<{ id: number }>('INSERT INTO organizations (name) VALUES ($1) RETURNING id', [`Claims ${domain}`]);
  await sql("INSERT INTO org_domains (org_id, domain, status, txt_value, expires_at) VALUES ($1, $2, 'pending', 'v', now() + interval '1 day')", [org!.id, domain]);
  return { orgId: org!.id, domain };
}

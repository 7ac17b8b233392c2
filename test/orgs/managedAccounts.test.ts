// Managed accounts (CONTRACT §31, "Whose account" and "Roles"), what SAML sign-in and SCIM user
// creation share: against real Postgres, two instances on one database, hooks into the outbox.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Hex } from '../../src/credentials/digest.js';
import { ensureManagedAccount, managedBy, type ManagedAccountRequest } from '../../src/orgs/index.js';
import { bearer, describeWithServices, eventually, makeUser } from '../helpers/gateway.js';
import { startHookSetup, type HookSetup } from '../helpers/hookReceiver.js';
import { holdRows, type HeldRow } from '../helpers/rowLock.js';

describeWithServices('managed accounts: whose account, and which role', () => {
  let setup: HookSetup;
  beforeAll(async () => {
    setup = await startHookSetup({ organizations: true, instances: 2 });
  });
  afterAll(async () => {
    await setup?.close();
  });

  const q = <T = Record<string, unknown>>(text: string, params: unknown[] = []) => setup.db.sql<T>(text, params);
  const deps = (i = 0) => { const s = setup.gateways[i]!.services; return { db: s.db, audit: s.audit, clock: () => new Date() }; };

  /** An organization (owned by a new user) with a verified domain, a pending one and the domain's name. */
  async function orgWithDomain(): Promise<{ orgId: number; domain: string; ownerId: number }> {
    const domain = `corp-${randomUUID().slice(0, 8)}.example`;
    const [org] = await q<{ id: number }>("INSERT INTO organizations (name) VALUES ('Corp') RETURNING id");
    const owner = await makeUser(setup.gateways[0]!);
    await q("INSERT INTO memberships (org_id, user_id, role) VALUES ($1, $2, 'owner')", [org!.id, owner.id]);
    await q("INSERT INTO org_domains (org_id, domain, status, txt_value, verified_by, verified_at, expires_at) VALUES ($1, $2, 'verified', 'x', 'dns', now(), now())", [org!.id, domain]);
    await q("INSERT INTO org_domains (org_id, domain, status, txt_value, expires_at) VALUES ($1, $2, 'pending', 'y', now() + interval '1 day')", [org!.id, `pending-${domain}`]);
    return { orgId: org!.id, domain, ownerId: owner.id };
  }
  const saml = (orgId: number, email: string, more: Partial<ManagedAccountRequest> = {}): ManagedAccountRequest =>
    ({ orgId, email, link: { connectionId: 'conn1', nameId: email }, allowCreate: true, by: { kind: 'saml', client: { ip: '203.0.113.9', userAgent: 'test' } }, ...more });
  const audit = (userId: number, type: string) => q<{ actor: string; actor_id: number | null; data: Record<string, unknown> }>(
    'SELECT actor, actor_id, data FROM audit_events WHERE user_id = $1 AND type = $2 ORDER BY id', [userId, type]);
  const hooksOf = async (type: string, key: string, value: number) => {
    const rows = await setup.db.sql<{ body: string }>("SELECT body FROM webhook_deliveries WHERE type = $1 AND subject IS NOT NULL ORDER BY seq", [type]);
    return rows.map((r) => JSON.parse(r.body).data as Record<string, unknown>).filter((d) => d[key] === value);
  };

  it('a new email is created verified, without a password, managed by the organization, linked, with the highest mapped role', async () => {
    const { orgId, domain } = await orgWithDomain();
    const email = `New.Person@${domain.toUpperCase()}`;
    const roleMapping = { eng: 'member', admins: 'admin', unknown: 'owner' };
    const out = await ensureManagedAccount(deps(), saml(orgId, email, { groups: ['eng', 'admins', 'unknown'], roleMapping }));
    if (!('ok' in out)) throw new Error(JSON.stringify(out));
    expect(out.ok).toMatchObject({ email: email.toLowerCase(), created: true, claimed: false, linked: true, membership: { change: 'created', role: 'admin' } });
    const [user] = await q('SELECT email, password_hash, email_verified_at IS NOT NULL AS verified FROM users WHERE id = $1', [out.ok.userId]);
    expect(user).toEqual({ email: email.toLowerCase(), password_hash: null, verified: true });
    expect(await managedBy(setup.gateways[0]!.services.db, orgId, out.ok.userId)).toBe('saml');
    expect(await q('SELECT provider, issuer, subject FROM user_identities WHERE user_id = $1', [out.ok.userId])).toEqual([{ provider: 'saml', issuer: 'saml:conn1', subject: email }]);
    expect(await audit(out.ok.userId, 'user.registered')).toEqual([{ actor: 'system', actor_id: null, data: { via: 'saml', org_id: orgId } }]);
    expect((await audit(out.ok.userId, 'org.member_added'))[0]).toMatchObject({ actor: 'system', data: { org_id: orgId, member_id: out.ok.userId, role: 'admin', via: 'saml' } });
    expect(await hooksOf('user.created', 'user_id', out.ok.userId)).toEqual([{ user_id: out.ok.userId, email: email.toLowerCase(), plan: 'free' }]);
    expect(await hooksOf('org.member_added', 'user_id', out.ok.userId)).toEqual([{ org_id: orgId, user_id: out.ok.userId, role: 'admin' }]);
  });

  it('the link finds the account again; a role changes only when a value maps, with org.role_changed and its hook', async () => {
    const { orgId, domain } = await orgWithDomain();
    const email = `p-${randomUUID()}@${domain}`;
    const first = await ensureManagedAccount(deps(), saml(orgId, email, { groups: ['admins'], roleMapping: { admins: 'admin' } }));
    const userId = 'ok' in first ? first.ok.userId : -1;
    // Same NameID, another address of the domain, no group that maps: same account, role kept.
    const again = await ensureManagedAccount(deps(1), saml(orgId, `other-${randomUUID()}@${domain}`, { link: { connectionId: 'conn1', nameId: email }, groups: ['x'] }));
    expect(again).toEqual({ ok: expect.objectContaining({ userId, created: false, claimed: false, linked: false, membership: { change: 'kept', role: 'admin' } }) });
    // An account found by its link is the IdP's user's: never claimed, even with its address unproved.
    await q('UPDATE users SET email_verified_at = NULL WHERE id = $1', [userId]);
    expect(await ensureManagedAccount(deps(), saml(orgId, email))).toEqual({ ok: expect.objectContaining({ userId, created: false, claimed: false }) });
    expect(await audit(userId, 'sso.account_claimed')).toEqual([]);
    const demoted = await ensureManagedAccount(deps(), saml(orgId, email, { groups: ['staff'], roleMapping: { staff: 'member' } }));
    expect(demoted).toEqual({ ok: expect.objectContaining({ userId, membership: { change: 'changed', role: 'member', previousRole: 'admin' } }) });
    expect(await q('SELECT role FROM memberships WHERE org_id = $1 AND user_id = $2', [orgId, userId])).toEqual([{ role: 'member' }]);
    expect((await audit(userId, 'org.role_changed')).map((r) => r.data)).toEqual([{ org_id: orgId, member_id: userId, via: 'saml', from: 'admin', to: 'member' }]);
    expect(await hooksOf('org.role_changed', 'user_id', userId)).toEqual([{ org_id: orgId, user_id: userId, role: 'member', previous_role: 'admin' }]);
  });

  it('an owner keeps their role whatever maps, and owner is never granted', async () => {
    const { orgId, domain, ownerId } = await orgWithDomain();
    const email = `owner-${randomUUID()}@${domain}`;
    await q('UPDATE users SET email = $2, email_verified_at = now() WHERE id = $1', [ownerId, email]);
    const out = await ensureManagedAccount(deps(), saml(orgId, email, { groups: ['staff'], roleMapping: { staff: 'member' } }));
    expect(out).toEqual({ ok: expect.objectContaining({ userId: ownerId, claimed: false, membership: { change: 'kept', role: 'owner' } }) });
    const other = await ensureManagedAccount(deps(), saml(orgId, `o-${randomUUID()}@${domain}`, { groups: ['boss'], roleMapping: { boss: 'owner' } }));
    expect(other).toEqual({ ok: expect.objectContaining({ membership: { change: 'created', role: 'member' } }) });
    expect(await q('SELECT role FROM memberships WHERE org_id = $1 AND user_id = $2', [orgId, ownerId])).toEqual([{ role: 'owner' }]);
  });

  it('an account whose address nobody proved is claimed: password, factors, links, sessions and personal keys go, in one transaction', async () => {
    const { orgId, domain } = await orgWithDomain();
    const gw = setup.gateways[0]!;
    const squatter = await makeUser(gw);
    const email = `victim-${randomUUID()}@${domain}`;
    await q('UPDATE users SET email = $2 WHERE id = $1', [squatter.id, email]);
    await q("INSERT INTO api_tokens (user_id, token_hash) VALUES ($1, $2)", [squatter.id, sha256Hex(randomUUID())]);
    await q("INSERT INTO user_identities (user_id, provider, issuer, subject, vouched) VALUES ($1, 'gh', 'https://gh.example', $2, true)", [squatter.id, randomUUID()]);
    expect((await gw.get('/api/v1/user/me', { headers: bearer(squatter.access) })).status).toBe(200);
    const out = await ensureManagedAccount(deps(), saml(orgId, email, { by: { kind: 'scim', tokenId: 42 }, link: undefined }));
    expect(out).toEqual({ ok: expect.objectContaining({ userId: squatter.id, created: false, claimed: true, linked: false }) });
    const [row] = await q<{ password_hash: string | null; verified: boolean }>('SELECT password_hash, email_verified_at IS NOT NULL AS verified FROM users WHERE id = $1', [squatter.id]);
    expect(row).toEqual({ password_hash: null, verified: true });
    expect(await q('SELECT revoked FROM api_tokens WHERE user_id = $1', [squatter.id])).toEqual([{ revoked: 1 }]);
    expect(await q('SELECT 1 FROM user_identities WHERE user_id = $1', [squatter.id])).toEqual([]);
    expect(await q('SELECT revoked_reason FROM refresh_tokens WHERE user_id = $1', [squatter.id])).toEqual([{ revoked_reason: 'sso_claim' }]);
    expect(await audit(squatter.id, 'sso.account_claimed')).toEqual([{ actor: 'scim', actor_id: 42, data: {
      org_id: orgId, via: 'scim', password_removed: true, factors_removed: 0, links_removed: 1, sessions_revoked: 1, api_keys_revoked: 1,
    } }]);
    // Each way in that went is on record, by whom and why.
    const [key] = await q<{ id: number }>('SELECT id FROM api_tokens WHERE user_id = $1', [squatter.id]);
    expect(await audit(squatter.id, 'api_key.revoked')).toEqual([{ actor: 'scim', actor_id: 42, data: { id: Number(key!.id), reason: 'sso_account_claimed', via: 'scim' } }]);
    expect(await audit(squatter.id, 'email.verified')).toEqual([{ actor: 'scim', actor_id: 42, data: { via: 'scim', org_id: orgId } }]);
    expect(await managedBy(gw.services.db, orgId, squatter.id)).toBeUndefined();
    // The squatter's access token, refresh token and login are refused from now on.
    await eventually(async () => (await gw.get('/api/v1/user/me', { headers: bearer(squatter.access) })).status === 401, 2000);
    expect((await gw.post('/api/v1/auth/refresh', { refresh_token: squatter.refresh })).status).toBe(401);
    expect((await gw.post('/api/v1/auth/login', { email, password: squatter.password })).status).toBe(401);
  });

  it('a verified account is linked as it is; the refusals write nothing', async () => {
    const { orgId, domain } = await orgWithDomain();
    const owner = await makeUser(setup.gateways[0]!);
    const email = `known-${randomUUID()}@${domain}`;
    await q('UPDATE users SET email = $2, email_verified_at = now() WHERE id = $1', [owner.id, email]);
    const out = await ensureManagedAccount(deps(), saml(orgId, email));
    expect(out).toEqual({ ok: expect.objectContaining({ userId: owner.id, created: false, claimed: false, linked: true, membership: { change: 'created', role: 'member' } }) });
    expect((await q<{ h: boolean }>('SELECT password_hash IS NOT NULL AS h FROM users WHERE id = $1', [owner.id]))[0]!.h).toBe(true);
    expect(await managedBy(setup.gateways[0]!.services.db, orgId, owner.id)).toBeUndefined();

    const before = (await q<{ n: number }>('SELECT count(*)::int AS n FROM users'))[0]!.n;
    expect(await ensureManagedAccount(deps(), saml(orgId, `x-${randomUUID()}@pending-${domain}`))).toEqual({ refused: 'email_not_allowed' });
    expect(await ensureManagedAccount(deps(), saml(orgId, `x-${randomUUID()}@elsewhere.example`))).toEqual({ refused: 'email_not_allowed' });
    expect(await ensureManagedAccount(deps(), saml(orgId, 'not an email'))).toEqual({ refused: 'email_not_allowed' });
    expect(await ensureManagedAccount(deps(), saml(orgId, `x-${randomUUID()}@${domain}`, { allowCreate: false }))).toEqual({ refused: 'jit_disabled' });
    expect(await ensureManagedAccount(deps(), saml(999_999_999, `x-${randomUUID()}@${domain}`))).toEqual({ refused: 'org_not_found' });
    await q('UPDATE users SET is_active = 0 WHERE id = $1', [owner.id]);
    expect(await ensureManagedAccount(deps(), saml(orgId, email))).toEqual({ refused: 'account_inactive' });
    expect((await q<{ n: number }>('SELECT count(*)::int AS n FROM users'))[0]!.n).toBe(before);
  });

  describe('a row changed while the call waits for its lock', () => {
    /** `call` made while this test's transaction holds `lock`'s row; `change` runs in that transaction once the call waits on it, then the lock goes. */
    async function changedWhileWaiting<T>(call: () => Promise<T>, lock: string, params: unknown[], change: (row: HeldRow) => Promise<unknown>): Promise<T> {
      const row = await holdRows(lock, params, setup.db.url);
      const answer = call();
      try {
        await row.waiters(1);
        await change(row);
      } finally {
        await row.release();
      }
      return answer;
    }

    it('the account holding the address moved to another one: read again, and a new account made for the address', async () => {
      const { orgId, domain } = await orgWithDomain();
      const holder = await makeUser(setup.gateways[0]!);
      const email = `moving-${randomUUID()}@${domain}`;
      await q('UPDATE users SET email = $2, email_verified_at = now() WHERE id = $1', [holder.id, email]);
      const out = await changedWhileWaiting(() => ensureManagedAccount(deps(), saml(orgId, email)), 'SELECT 1 FROM users WHERE id = $1 FOR UPDATE', [holder.id],
        (row) => row.run('UPDATE users SET email = $2 WHERE id = $1', [holder.id, `moved-${email}`]));
      expect(out).toEqual({ ok: expect.objectContaining({ email, created: true, claimed: false, linked: true }) });
      expect('ok' in out && out.ok.userId).not.toBe(holder.id);
      expect(await q('SELECT role FROM memberships WHERE org_id = $1 AND user_id = $2', [orgId, holder.id])).toEqual([]);
    });

    it('the organization deleted: org_not_found, and nothing the call wrote is kept', async () => {
      const { orgId, domain } = await orgWithDomain();
      const email = `doomed-${randomUUID()}@${domain}`;
      const out = await changedWhileWaiting(() => ensureManagedAccount(deps(), saml(orgId, email)), 'SELECT 1 FROM organizations WHERE id = $1 FOR UPDATE', [orgId],
        (row) => row.run('DELETE FROM organizations WHERE id = $1', [orgId]));
      expect(out).toEqual({ refused: 'org_not_found' });
      expect(await q('SELECT 1 FROM users WHERE email = $1', [email])).toEqual([]);
    });
  });

  it('calls for one new email at once, on two instances, make one account and one membership (5 rounds)', async () => {
    for (let round = 0; round < 5; round++) {
      const { orgId, domain } = await orgWithDomain();
      const email = `race-${randomUUID()}@${domain}`;
      const outs = await Promise.all([0, 1, 0, 1].map((i) => ensureManagedAccount(deps(i), saml(orgId, email, { groups: ['a'], roleMapping: { a: 'admin' } }))));
      const ids = new Set(outs.map((o) => ('ok' in o ? o.ok.userId : -1)));
      expect(ids.size).toBe(1);
      expect(outs.filter((o) => 'ok' in o && o.ok.created)).toHaveLength(1);
      expect(await q('SELECT role FROM memberships WHERE org_id = $1 AND user_id = $2', [orgId, [...ids][0]])).toEqual([{ role: 'admin' }]);
      expect(await q('SELECT 1 FROM users WHERE email = $1', [email])).toHaveLength(1);
      expect(await q("SELECT 1 FROM audit_events WHERE type = 'org.member_added' AND user_id = $1", [[...ids][0]])).toHaveLength(1);
    }
  });
});

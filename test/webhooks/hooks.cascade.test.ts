// Operator hooks (CONTRACT §24) for changes that reach more than one thing: a deleted user leaves
// each of its organizations (one org.member_removed per organization, on the organization's
// subject, beside user.deleted), and keys revoked together are told one api_key.revoked per key,
// each with its id; an organization's key is the organization's (owner_type org).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, closeSql, describeWithServices, eventually, makeUser, marker, type TestUser } from '../helpers/gateway.js';
import { startHookSetup, verifiedHook, type HookSetup } from '../helpers/hookReceiver.js';

describeWithServices('operator hooks of cascades', () => {
  let s: HookSetup;
  beforeAll(async () => {
    s = await startHookSetup({ organizations: true });
  });
  afterAll(async () => {
    await s?.close();
    await closeSql();
  });

  const events = () => s.receiver.deliveries.map((d) => verifiedHook(s.secrets[0]!, d));
  const about = (subject: string) => events().filter(({ type, data }) =>
    subject === (type.startsWith('org.') ? `org:${data.org_id}` : data.owner_type === 'org' ? `org:${data.owner_id}` : `user:${data.user_id ?? data.owner_id}`));
  const eventsOf = (subject: string) => about(subject).map((p) => [p.type, p.data]);

  /** An organization owned by `owner`, with `members` added as members; its id. */
  async function orgWith(owner: TestUser, ...members: TestUser[]): Promise<number> {
    await s.db.sql('UPDATE users SET email_verified_at = now() WHERE id = $1', [owner.id]);
    const org = await s.gateways[0]!.post('/api/v1/orgs', { name: `Org ${marker()}` }, { headers: bearer(owner.access) });
    expect(org.status, org.text).toBe(201);
    for (const m of members) await s.db.sql("INSERT INTO memberships (org_id, user_id, role) VALUES ($1, $2, 'member')", [org.json.id, m.id]);
    return org.json.id as number;
  }

  describe('a deleted user leaves its organizations', () => {
    it('by an operator (DELETE /admin/v1/users/{id}): user.deleted, and org.member_removed on each organization', async () => {
      const gw = s.gateways[0]!;
      const [owner, member] = [await makeUser(gw), await makeUser(gw)];
      const [first, second] = [await orgWith(owner, member), await orgWith(owner, member)];
      expect((await s.admin('DELETE', `/admin/v1/users/${member.id}`)).status).toBe(200);
      await eventually(() => about(`user:${member.id}`).length === 2 && about(`org:${first}`).length === 2 && about(`org:${second}`).length === 2, 10_000);
      expect(eventsOf(`user:${member.id}`)).toEqual([
        ['user.created', { user_id: member.id, email: member.email, plan: 'free' }],
        ['user.deleted', { user_id: member.id, email: member.email }],
      ]);
      for (const org of [first, second]) {
        expect(eventsOf(`org:${org}`)).toEqual([
          ['org.created', { org_id: org, user_id: owner.id, plan: 'free' }],
          ['org.member_removed', { org_id: org, user_id: member.id }],
        ]);
      }
      // The owner's own organization membership stays: nothing about it.
      expect(eventsOf(`user:${owner.id}`).map(([type]) => type)).toEqual(['user.created']);
    });

    it('by the user (DELETE /api/v1/user/me): the same', async () => {
      const gw = s.gateways[0]!;
      const [owner, member] = [await makeUser(gw), await makeUser(gw)];
      const org = await orgWith(owner, member);
      const gone = await gw.request('DELETE', '/api/v1/user/me', { headers: bearer(member.access), json: { password: member.password } });
      expect(gone.status, gone.text).toBe(200);
      await eventually(() => about(`user:${member.id}`).length === 2 && about(`org:${org}`).length === 2, 10_000);
      expect(eventsOf(`user:${member.id}`)[1]).toEqual(['user.deleted', { user_id: member.id, email: member.email }]);
      expect(eventsOf(`org:${org}`)[1]).toEqual(['org.member_removed', { org_id: org, user_id: member.id }]);
    });

    it('a user in no organization: user.deleted alone', async () => {
      const user = await makeUser(s.gateways[0]!);
      expect((await s.admin('DELETE', `/admin/v1/users/${user.id}`)).status).toBe(200);
      await eventually(() => about(`user:${user.id}`).length === 2, 10_000);
      expect(events().filter((e) => e.type === 'org.member_removed' && e.data.user_id === user.id)).toEqual([]);
    });
  });

  it('keys revoked together: one api_key.revoked per key, with its id (DELETE /api/v1/user/api-token, a default key replaced)', async () => {
    const gw = s.gateways[0]!;
    const user = await makeUser(gw, { plan: 'pro' });
    const as = { headers: bearer(user.access) };
    const first = await gw.post('/api/v1/user/api-token', {}, as);
    const second = await gw.post('/api/v1/user/api-token', {}, as);
    const named = await gw.post('/api/v1/user/api-keys', { name: `k-${marker()}` }, as);
    expect([first.status, second.status, named.status]).toEqual([201, 201, 201]);
    expect((await gw.request('DELETE', '/api/v1/user/api-token', as)).status).toBe(200);
    const ids = (await s.db.sql<{ id: string }>("SELECT id FROM api_tokens WHERE user_id = $1 AND name = 'default' ORDER BY id", [user.id])).map((r) => Number(r.id));
    expect(ids).toHaveLength(2);
    await eventually(() => about(`user:${user.id}`).length === 7, 10_000);
    const owner = { owner_type: 'user', owner_id: user.id };
    expect(eventsOf(`user:${user.id}`)).toEqual([
      ['user.created', { user_id: user.id, email: user.email, plan: 'free' }],
      ['api_key.created', { key_id: ids[0], ...owner }],
      ['api_key.revoked', { key_id: ids[0], ...owner }],
      ['api_key.created', { key_id: ids[1], ...owner }],
      ['api_key.created', { key_id: named.json.id, ...owner }],
      ['api_key.revoked', { key_id: ids[1], ...owner }],
      ['api_key.revoked', { key_id: named.json.id, ...owner }],
    ]);
    // The audit log says the same, key by key: why the first one ended.
    const audit = await s.db.sql<{ data: Record<string, unknown> }>("SELECT data FROM audit_events WHERE type = 'api_key.revoked' AND user_id = $1 ORDER BY id", [user.id]);
    expect(audit.map((r) => r.data)).toEqual([{ id: ids[0], reason: 'replaced' }, { id: ids[1] }, { id: named.json.id }]);
  });

  it('an organization\'s key: owner_type org, on the organization\'s subject', async () => {
    const gw = s.gateways[0]!;
    const owner = await makeUser(gw);
    const org = await orgWith(owner);
    await s.db.sql("UPDATE organizations SET plan = 'pro' WHERE id = $1", [org]);
    const key = await gw.post(`/api/v1/orgs/${org}/api-keys`, { name: 'ci' }, { headers: bearer(owner.access) });
    expect(key.status, key.text).toBe(201);
    expect((await gw.request('DELETE', `/api/v1/orgs/${org}/api-keys/${key.json.id}`, { headers: bearer(owner.access) })).status).toBe(200);
    await eventually(() => about(`org:${org}`).length === 3, 10_000);
    const ownedBy = { owner_type: 'org', owner_id: org };
    expect(eventsOf(`org:${org}`).slice(1)).toEqual([['api_key.created', { key_id: key.json.id, ...ownedBy }], ['api_key.revoked', { key_id: key.json.id, ...ownedBy }]]);
  });
});

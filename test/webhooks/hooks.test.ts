// Operator hooks (CONTRACT §24): each change sends its event to hooks.url, signed per Standard
// Webhooks with every configured secret, with the data §24 lists; only the events configured; a
// change rolled back sends nothing; a private address is refused unless allowPrivateNetworks.
// Delivery under failures, order and timing: hooks.delivery.test.ts.
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Webhook } from 'standardwebhooks';
import { bearer, closeSql, describeWithServices, eventually, makeUser, marker, newEmail, newPassword, rawTestConfig, type TestUser } from '../helpers/gateway.js';
import { ensureBuilt, gateway as cli } from '../helpers/cli.js';
import { hookRows, newHookSecret, startHookSetup, verifiedHook, type HookSetup } from '../helpers/hookReceiver.js';

const payload = (d: { json: unknown }) => d.json as { type: string; timestamp: string; data: Record<string, unknown> };

describeWithServices('operator hooks', () => {
  afterAll(closeSql);

  describe('every event, signed, with its data', () => {
    let s: HookSetup;
    beforeAll(async () => {
      s = await startHookSetup({ organizations: true });
    });
    afterAll(async () => {
      await s?.close();
    });

    const ofSubject = (subject: string) => s.receiver.deliveries.filter((d) => {
      const { type, data } = payload(d);
      if (type.startsWith('org.')) return `org:${data.org_id}` === subject;
      return `user:${data.user_id ?? data.owner_id}` === subject;
    });
    const eventsOf = (subject: string) => ofSubject(subject).map((d) => verifiedHook(s.secrets[0]!, d)).map((p) => [p.type, p.data]);

    it('user events: created, email verified, plan and active changes, deleted', async () => {
      const gw = s.gateways[0]!;
      const user = await makeUser(gw);
      // A verification link as the mail would carry it.
      const token = randomBytes(16).toString('hex');
      await s.db.sql(`INSERT INTO email_tokens (user_id, purpose, token_hash, email, created_at, expires_at) VALUES ($1, 'verify', $2, $3, now(), now() + interval '1 hour')`,
        [user.id, createHash('sha256').update(token).digest('hex'), user.email]);
      expect((await gw.post('/api/v1/auth/email/verify', { token })).status).toBe(200);
      expect((await s.admin('PUT', `/admin/v1/users/${user.id}/plan`, { plan: 'pro' })).status).toBe(200);
      expect((await s.admin('PUT', `/admin/v1/users/${user.id}/active`, { active: false })).status).toBe(200);
      expect((await s.admin('DELETE', `/admin/v1/users/${user.id}`)).status).toBe(200);
      await eventually(() => ofSubject(`user:${user.id}`).length === 5, 10_000);
      expect(eventsOf(`user:${user.id}`)).toEqual([
        ['user.created', { user_id: user.id, email: user.email, plan: 'free' }],
        ['user.email_verified', { user_id: user.id, email: user.email }],
        ['user.plan_changed', { user_id: user.id, plan: 'pro', previous_plan: 'free', source: 'operator' }],
        ['user.active_changed', { user_id: user.id, active: false }],
        ['user.deleted', { user_id: user.id, email: user.email }],
      ]);
      const d = ofSubject(`user:${user.id}`)[0]!;
      expect(d.headers['webhook-id']).toMatch(/^msg_[A-Za-z0-9_-]+$/);
      expect(d.headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]+={0,2}$/);
      expect(new Date(payload(d).timestamp).toISOString()).toBe(payload(d).timestamp);
      // Signed with the configured secret and no other.
      expect(() => verifiedHook(newHookSecret(), d)).toThrow();
      // A hook message is a row of the outbox with no user (a user.deleted outlives the user).
      let rows: Awaited<ReturnType<typeof hookRows>> = [];
      await eventually(async () => (rows = (await hookRows(s.db)).filter((r) => r.subject === `user:${user.id}`)).every((r) => r.status !== 'pending'));
      expect(rows.map((r) => [r.type, r.status, r.attempts])).toEqual(eventsOf(`user:${user.id}`).map(([type]) => [type, 'delivered', 1]));
      expect(rows.map((r) => r.id)).toEqual(ofSubject(`user:${user.id}`).map((x) => x.headers['webhook-id']));
    });

    it('an operator creating an account (POST /admin/v1/users): user.created with the plan given', async () => {
      const email = newEmail();
      const created = await s.admin('POST', '/admin/v1/users', { email, plan: 'pro' });
      expect(created.status, created.text).toBe(201);
      const id = created.json.id as number;
      await eventually(() => ofSubject(`user:${id}`).length === 1, 10_000);
      expect(eventsOf(`user:${id}`)).toEqual([['user.created', { user_id: id, email, plan: 'pro' }]]);
    });

    it('a user deleting their own account: user.deleted', async () => {
      const gw = s.gateways[0]!;
      const user = await makeUser(gw);
      expect((await gw.request('DELETE', '/api/v1/user/me', { headers: bearer(user.access), json: { password: user.password } })).status).toBe(200);
      await eventually(() => ofSubject(`user:${user.id}`).length === 2, 10_000);
      expect(eventsOf(`user:${user.id}`)[1]).toEqual(['user.deleted', { user_id: user.id, email: user.email }]);
    });

    it('api_key.created and api_key.revoked: the key, its owner, never the key itself', async () => {
      const gw = s.gateways[0]!;
      const user = await makeUser(gw, { plan: 'pro' });
      const named = await gw.post('/api/v1/user/api-keys', { name: `k-${marker()}` }, { headers: bearer(user.access) });
      expect(named.status).toBe(201);
      expect((await gw.request('DELETE', `/api/v1/user/api-keys/${named.json.id}`, { headers: bearer(user.access) })).status).toBe(200);
      const single = await gw.post('/api/v1/user/api-token', {}, { headers: bearer(user.access) });
      expect(single.status).toBe(201);
      await eventually(() => ofSubject(`user:${user.id}`).length === 4, 10_000);
      const [single0] = await s.db.sql<{ id: number }>('SELECT id FROM api_tokens WHERE user_id = $1 AND name = \'default\'', [user.id]);
      const owner = { owner_type: 'user', owner_id: user.id };
      expect(eventsOf(`user:${user.id}`)).toEqual([
        ['user.created', { user_id: user.id, email: user.email, plan: 'free' }],
        ['api_key.created', { key_id: named.json.id, ...owner }],
        ['api_key.revoked', { key_id: named.json.id, ...owner }],
        ['api_key.created', { key_id: Number(single0!.id), ...owner }],
      ]);
      const bodies = s.receiver.deliveries.map((d) => d.body).join('');
      expect(bodies).not.toContain(named.json.key);
      expect(bodies).not.toContain(single.json.api_token);
    });

    it('org.created, org.member_added, org.member_removed, org.plan_changed: ordered on the organization', async () => {
      const gw = s.gateways[0]!;
      const owner = await makeUser(gw);
      const member = await makeUser(gw);
      await s.db.sql('UPDATE users SET email_verified_at = now() WHERE id = ANY($1)', [[owner.id, member.id]]);
      const org = await gw.post('/api/v1/orgs', { name: `Org ${marker()}` }, { headers: bearer(owner.access) });
      expect(org.status).toBe(201);
      const token = randomBytes(16).toString('hex');
      await s.db.sql(`INSERT INTO org_invitations (org_id, email, role, token_hash, invited_by, created_at, expires_at)
        VALUES ($1, $2, 'member', $3, $4, now(), now() + interval '1 day')`, [org.json.id, member.email, createHash('sha256').update(token).digest('hex'), owner.id]);
      expect((await gw.post('/api/v1/orgs/invitations/accept', { token }, { headers: bearer(member.access) })).status).toBe(200);
      expect((await gw.request('DELETE', `/api/v1/orgs/${org.json.id}/members/${member.id}`, { headers: bearer(owner.access) })).status).toBe(200);
      expect((await s.admin('PUT', `/admin/v1/orgs/${org.json.id}/plan`, { plan: 'pro' })).status).toBe(200);
      const subject = `org:${org.json.id}`;
      await eventually(() => ofSubject(subject).length === 4, 10_000);
      expect(eventsOf(subject)).toEqual([
        ['org.created', { org_id: org.json.id, user_id: owner.id, plan: 'free' }],
        ['org.member_added', { org_id: org.json.id, user_id: member.id, role: 'member' }],
        ['org.member_removed', { org_id: org.json.id, user_id: member.id }],
        ['org.plan_changed', { org_id: org.json.id, plan: 'pro', previous_plan: 'free', source: 'operator' }],
      ]);
      await eventually(async () => (await hookRows(s.db)).filter((r) => r.subject === subject && r.status === 'delivered').length === 4);
    });

    it('a change rolled back after its hook was written sends nothing (refused at COMMIT)', async () => {
      const gw = s.gateways[0]!;
      const user = await makeUser(gw);
      const name = `hooks_test_${marker()}`;
      await s.db.sql(`CREATE FUNCTION ${name}() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN IF NEW.id = ${user.id} AND NEW.plan = 'pro' THEN RAISE EXCEPTION 'refused by the hooks test'; END IF; RETURN NEW; END $$`);
      // Fires at COMMIT: after every statement of the change, the hook's insert included.
      await s.db.sql(`CREATE CONSTRAINT TRIGGER ${name} AFTER UPDATE ON users DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION ${name}()`);
      try {
        expect((await s.admin('PUT', `/admin/v1/users/${user.id}/plan`, { plan: 'pro' })).status).toBe(500);
      } finally {
        await s.db.sql(`DROP TRIGGER ${name} ON users`);
        await s.db.sql(`DROP FUNCTION ${name}()`);
      }
      expect((await s.admin('PUT', `/admin/v1/users/${user.id}/active`, { active: false })).status).toBe(200);
      await eventually(() => ofSubject(`user:${user.id}`).length === 2, 10_000);
      expect(eventsOf(`user:${user.id}`).map(([type]) => type)).toEqual(['user.created', 'user.active_changed']);
      expect((await hookRows(s.db)).filter((r) => r.subject === `user:${user.id}`).map((r) => r.type)).toEqual(['user.created', 'user.active_changed']);
    });
  });

  it('a registration racing on two instances for one email: one user, one user.created', async () => {
    const s = await startHookSetup({ instances: 2 });
    try {
      const email = newEmail();
      const password = newPassword();
      const answers = await Promise.all(s.gateways.flatMap((gw) => [gw, gw]).map((gw) => gw.post('/api/v1/auth/register', { email, password })));
      expect(answers.filter((a) => a.status === 201)).toHaveLength(1);
      await eventually(() => s.receiver.deliveries.length >= 1, 10_000);
      await new Promise((r) => setTimeout(r, 300));
      expect(s.receiver.deliveries.map((d) => payload(d).type)).toEqual(['user.created']);
      expect((await hookRows(s.db)).map((r) => r.type)).toEqual(['user.created']);
    } finally {
      await s.close();
    }
  });

  it('the CLI on direct storage writes the hooks of its changes too: set-plan, deactivate, keys revoke, delete', async () => {
    ensureBuilt();
    const s = await startHookSetup();
    const dir = mkdtempSync(path.join(tmpdir(), 'gw-hooks-'));
    try {
      const user = await makeUser(s.gateways[0]!, { plan: 'pro' });
      const key = await s.gateways[0]!.post('/api/v1/user/api-keys', { name: 'cli' }, { headers: bearer(user.access) });
      expect(key.status).toBe(201);
      const config = path.join(dir, 'gateway.yaml');
      writeFileSync(config, JSON.stringify(rawTestConfig({ storage: s.db.storage, hooks: { url: s.receiver.url, secrets: s.secrets, allowPrivateNetworks: true } })));
      for (const args of [['users', 'set-plan', user.email, 'premium'], ['users', 'deactivate', user.email], ['keys', 'revoke', String(key.json.id)], ['users', 'delete', user.email]]) {
        const run = await cli([...args, '--config', config]);
        expect(run.code, run.stderr).toBe(0);
      }
      await eventually(() => s.receiver.deliveries.length === 6, 10_000);
      expect(s.receiver.deliveries.map((d) => verifiedHook(s.secrets[0]!, d)).map((p) => [p.type, p.data])).toEqual([
        ['user.created', { user_id: user.id, email: user.email, plan: 'free' }],
        ['api_key.created', { key_id: key.json.id, owner_type: 'user', owner_id: user.id }],
        ['user.plan_changed', { user_id: user.id, plan: 'premium', previous_plan: 'pro', source: 'operator' }],
        ['user.active_changed', { user_id: user.id, active: false }],
        ['api_key.revoked', { key_id: key.json.id, owner_type: 'user', owner_id: user.id }],
        ['user.deleted', { user_id: user.id, email: user.email }],
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
      await s.close();
    }
  });

  it('during a rotation both secrets sign: a receiver with either one verifies', async () => {
    const [fresh, old] = [newHookSecret(), newHookSecret()];
    const s = await startHookSetup({ hooks: { secrets: [fresh, old] } });
    try {
      await makeUser(s.gateways[0]!);
      await eventually(() => s.receiver.deliveries.length === 1, 10_000);
      const d = s.receiver.deliveries[0]!;
      const signatures = String(d.headers['webhook-signature']).split(' ');
      expect(signatures).toHaveLength(2);
      for (const sig of signatures) expect(sig).toMatch(/^v1,[A-Za-z0-9+/]+={0,2}$/);
      expect(verifiedHook(fresh, d).type).toBe('user.created');
      expect(verifiedHook(old, d).type).toBe('user.created');
      // Each signature is the one of its secret, in the configured order.
      const only = (secret: string) => new Webhook(secret).sign(String(d.headers['webhook-id']), new Date(Number(d.headers['webhook-timestamp']) * 1000), d.body);
      expect(signatures).toEqual([only(fresh), only(old)]);
      expect(() => verifiedHook(newHookSecret(), d)).toThrow();
    } finally {
      await s.close();
    }
  });

  it('only the events configured are sent', async () => {
    const s = await startHookSetup({ hooks: { events: ['user.plan_changed'] } });
    try {
      const user: TestUser = await makeUser(s.gateways[0]!);
      expect((await s.admin('PUT', `/admin/v1/users/${user.id}/active`, { active: false })).status).toBe(200);
      expect((await s.admin('PUT', `/admin/v1/users/${user.id}/plan`, { plan: 'pro' })).status).toBe(200);
      await eventually(() => s.receiver.deliveries.length === 1, 10_000);
      await new Promise((r) => setTimeout(r, 300));
      expect(s.receiver.deliveries.map((d) => payload(d).type)).toEqual(['user.plan_changed']);
      // Not even stored: nothing to deliver later.
      expect((await hookRows(s.db)).map((r) => r.type)).toEqual(['user.plan_changed']);
    } finally {
      await s.close();
    }
  });

  it('connects to the address it checked: the name is resolved once per attempt, never again for the connection', async () => {
    const asked: string[] = [];
    // First the receiver, then an address that would be another (internal) host.
    const lookup = async (host: string) => {
      asked.push(host);
      return [{ address: asked.length === 1 ? '127.0.0.1' : '192.0.2.1', family: 4 as const }];
    };
    const s = await startHookSetup({ host: 'hooks.rebind.test', lookup });
    try {
      await makeUser(s.gateways[0]!);
      await eventually(() => s.receiver.deliveries.length === 1, 15_000);
      const d = s.receiver.deliveries[0]!;
      expect(d.headers.host).toBe(`hooks.rebind.test:${s.receiver.port}`);
      expect(verifiedHook(s.secrets[0]!, d).type).toBe('user.created');
      expect(asked).toEqual(['hooks.rebind.test']);
    } finally {
      await s.close();
    }
  });

  it('a name that resolves to a private address is refused without allowPrivateNetworks', async () => {
    const s = await startHookSetup({ host: 'hooks.rebind.test', lookup: async () => [{ address: '10.1.2.3', family: 4 }], hooks: { allowPrivateNetworks: false } });
    try {
      await makeUser(s.gateways[0]!);
      let rows: Awaited<ReturnType<typeof hookRows>> = [];
      await eventually(async () => (rows = await hookRows(s.db)).length === 1 && rows[0]!.status !== 'pending', 10_000);
      expect(rows[0]).toMatchObject({ type: 'user.created', status: 'failed', attempts: 1, last_error: 'blocked: 10.1.2.3 is not a public address' });
      expect(s.receiver.deliveries).toEqual([]);
    } finally {
      await s.close();
    }
  });

  it('a private address is refused without allowPrivateNetworks: nothing reaches it, the message fails as blocked', async () => {
    const s = await startHookSetup({ hooks: { allowPrivateNetworks: false } });
    try {
      await makeUser(s.gateways[0]!);
      let rows: Awaited<ReturnType<typeof hookRows>> = [];
      await eventually(async () => (rows = await hookRows(s.db)).length === 1 && rows[0]!.status !== 'pending', 10_000);
      expect(rows[0]).toMatchObject({ type: 'user.created', status: 'failed', attempts: 1, last_error: 'blocked: 127.0.0.1 is not a public address' });
      expect(s.receiver.deliveries).toEqual([]);
    } finally {
      await s.close();
    }
  });
});

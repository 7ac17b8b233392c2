// Which operator hooks each audit event stands for (src/hooks/fromAudit.ts, CONTRACT §24, §31), event
// by event, on a database of its own for the three that read the account or organization in the
// change's transaction: each hook's type, subject and data as a backend receives them, ids written
// as text read as numbers, and the events that stand for none. The plan changes' `source`:
// planHooks.test.ts; end to end (the changes that record them): hooks*.test.ts.
import { beforeAll, expect, it } from 'vitest';
import { hooksOfAudit, type HookFacts } from '../../src/hooks/fromAudit.js';
import type { Database } from '../../src/storage/database/index.js';
import type { AuditEvent } from '../../src/storage/events/audit.js';
import { describeWithServices } from '../helpers/gateway.js';
import { ownMigratedDatabase } from '../helpers/ownDatabase.js';

describeWithServices('the hooks an audit event stands for', () => {
  const own = ownMigratedDatabase();
  let db: Database;
  let userId: number;
  let orgId: number;
  beforeAll(async () => {
    db = own();
    userId = (await db.query<{ id: number }>("INSERT INTO users (email, password_hash, plan) VALUES ('ada@corp.example', 'x', 'pro') RETURNING id"))[0]!.id;
    orgId = (await db.query<{ id: number }>("INSERT INTO organizations (name, plan) VALUES ('Acme', 'team') RETURNING id"))[0]!.id;
  });

  const hooks = async (event: Omit<AuditEvent, 'actor'>, facts?: HookFacts) =>
    (await hooksOfAudit({ actor: 'user', ...event }, db, facts)).map((h) => [h.type, h.subject, h.data]);

  it('a sign-up, by the user or an operator: user.created with the account\'s email and plan; none when the account is gone', async () => {
    for (const type of ['user.registered', 'admin.user_created'] as const) {
      expect(await hooks({ type, userId }), type).toEqual([['user.created', `user:${userId}`, { user_id: userId, email: 'ada@corp.example', plan: 'pro' }]]);
      expect(await hooks({ type, userId: userId + 1000 }), type).toEqual([]);
    }
  });

  it('an email verified: user.email_verified with the address; none when the account is gone', async () => {
    expect(await hooks({ type: 'email.verified', userId })).toEqual([['user.email_verified', `user:${userId}`, { user_id: userId, email: 'ada@corp.example' }]]);
    expect(await hooks({ type: 'email.verified', userId: userId + 1000 })).toEqual([]);
  });

  it('an account deleted: user.deleted (with the email handed over), and org.member_removed for each organization it was in', async () => {
    for (const type of ['account.deleted', 'admin.user_deleted'] as const) {
      expect(await hooks({ type, userId: 7 }, { email: 'gone@corp.example', memberOf: [3, 4] }), type).toEqual([
        ['user.deleted', 'user:7', { user_id: 7, email: 'gone@corp.example' }],
        ['org.member_removed', 'org:3', { org_id: 3, user_id: 7 }],
        ['org.member_removed', 'org:4', { org_id: 4, user_id: 7 }],
      ]);
      expect(await hooks({ type, userId: 7 }), type).toEqual([['user.deleted', 'user:7', { user_id: 7 }]]);
    }
  });

  it('an operator\'s plan change without the plan before names none', async () => {
    expect(await hooks({ type: 'admin.plan_changed', userId: 7, data: { plan: 'pro', override: 'true' } }))
      .toEqual([['user.plan_changed', 'user:7', { user_id: 7, plan: 'pro', source: 'operator' }]]);
  });

  it('an account (de)activated by an operator: active is true only when the event says true', async () => {
    expect(await hooks({ type: 'admin.active_changed', userId: 7, data: { active: true } })).toEqual([['user.active_changed', 'user:7', { user_id: 7, active: true }]]);
    for (const active of [false, 'true', undefined]) {
      expect(await hooks({ type: 'admin.active_changed', userId: 7, data: { active } }), String(active)).toEqual([['user.active_changed', 'user:7', { user_id: 7, active: false }]]);
    }
  });

  it('SCIM (de)provisioning: user.active_changed only when the account\'s own flag changed', async () => {
    for (const type of ['scim.user_deactivated', 'scim.user_reactivated'] as const) {
      for (const active of [false, true]) {
        expect(await hooks({ type, userId: 7, data: { org_id: 3, account_active: active } }), `${type} ${active}`).toEqual([['user.active_changed', 'user:7', { user_id: 7, active }]]);
      }
      expect(await hooks({ type, userId: 7, data: { org_id: 3 } }), type).toEqual([]);
      expect(await hooks({ type, userId: 7, data: { org_id: 3, account_active: 'false' } }), type).toEqual([]);
    }
  });

  it('billing: an organization\'s plan when org_id names one (as a number or its digits), else the user\'s; no event id is null', async () => {
    const data = { plan: 'pro', previous_plan: 'free' };
    const org = (id: number) => [
      ['org.plan_changed', `org:${id}`, { org_id: id, ...data, source: 'billing', stripe_event_id: null }],
      ['billing.plan_changed', `org:${id}`, { owner_type: 'org', owner_id: id, ...data, stripe_event_id: null }],
    ];
    expect(await hooks({ type: 'billing.plan_changed', userId: null, data: { ...data, org_id: '12' } })).toEqual(org(12));
    expect(await hooks({ type: 'billing.plan_changed', userId: 7, data: { ...data, org_id: 5 } })).toEqual(org(5));
    expect(await hooks({ type: 'billing.plan_changed', userId: 7, data: { ...data, org_id: '5x' } })).toEqual([
      ['user.plan_changed', 'user:7', { user_id: 7, ...data, source: 'billing', stripe_event_id: null }],
      ['billing.plan_changed', 'user:7', { owner_type: 'user', owner_id: 7, ...data, stripe_event_id: null }],
    ]);
  });

  it('an organization made: org.created by its creator, with the organization\'s plan when it is still there', async () => {
    expect(await hooks({ type: 'org.created', userId, data: { org_id: String(orgId) } })).toEqual([['org.created', `org:${orgId}`, { org_id: orgId, user_id: userId, plan: 'team' }]]);
    expect(await hooks({ type: 'org.created', userId, data: { org_id: orgId + 1000 } })).toEqual([['org.created', `org:${orgId + 1000}`, { org_id: orgId + 1000, user_id: userId }]]);
  });

  it('an operator\'s plan change of an organization names the plan before only when the event has it', async () => {
    expect(await hooks({ type: 'admin.org_plan_changed', userId: null, data: { org_id: 3, plan: 'pro', previous: 4 } }))
      .toEqual([['org.plan_changed', 'org:3', { org_id: 3, plan: 'pro', source: 'operator' }]]);
  });

  it('members: added with their role, removed without one; the member named by member_id, else the event\'s user', async () => {
    expect(await hooks({ type: 'org.member_added', userId: 7, data: { org_id: 3, member_id: '8', role: 'admin' } })).toEqual([['org.member_added', 'org:3', { org_id: 3, user_id: 8, role: 'admin' }]]);
    expect(await hooks({ type: 'org.member_added', userId: 7, data: { org_id: 3, role: 1 } })).toEqual([['org.member_added', 'org:3', { org_id: 3, user_id: 7 }]]);
    expect(await hooks({ type: 'org.member_removed', userId: 7, data: { org_id: '3', member_id: 8, role: 'admin' } })).toEqual([['org.member_removed', 'org:3', { org_id: 3, user_id: 8 }]]);
    expect(await hooks({ type: 'org.member_removed', userId: 7, data: { org_id: 3 } })).toEqual([['org.member_removed', 'org:3', { org_id: 3, user_id: 7 }]]);
  });

  it('a role changed: from and to as previous_role and role', async () => {
    expect(await hooks({ type: 'org.role_changed', userId: 7, data: { org_id: 3, member_id: 8, from: 'member', to: 'admin' } }))
      .toEqual([['org.role_changed', 'org:3', { org_id: 3, user_id: 8, role: 'admin', previous_role: 'member' }]]);
    expect(await hooks({ type: 'org.role_changed', userId: 7, data: { org_id: 3, from: 'admin', to: 'member' } }))
      .toEqual([['org.role_changed', 'org:3', { org_id: 3, user_id: 7, role: 'member', previous_role: 'admin' }]]);
  });

  it('a domain verified or lost: about the organization, with or without a user', async () => {
    for (const type of ['org.domain_verified', 'org.domain_unverified'] as const) {
      for (const user of [null, 7]) {
        expect(await hooks({ type, userId: user, data: { org_id: '3', domain: 'corp.example' } }), `${type} ${user}`).toEqual([[type, 'org:3', { org_id: 3, domain: 'corp.example' }]]);
      }
    }
  });

  it('keys: the organization\'s when org_id names one, else the user\'s; the key\'s id read as a number, or null', async () => {
    for (const type of ['api_key.created', 'api_key.revoked'] as const) {
      expect(await hooks({ type, userId: 7, data: { id: '41' } }), type).toEqual([[type, 'user:7', { key_id: 41, owner_type: 'user', owner_id: 7 }]]);
      expect(await hooks({ type, userId: 7, data: { id: 42, org_id: '3' } }), type).toEqual([[type, 'org:3', { key_id: 42, owner_type: 'org', owner_id: 3 }]]);
      expect(await hooks({ type, userId: 7, data: { id: 'k_1', org_id: 'acme' } }), type).toEqual([[type, 'user:7', { key_id: null, owner_type: 'user', owner_id: 7 }]]);
      expect(await hooks({ type, userId: 7, data: { id: [41], org_id: ['3'] } }), type).toEqual([[type, 'user:7', { key_id: null, owner_type: 'user', owner_id: 7 }]]);
    }
  });

  it('an event recorded without data: read as data that names nothing', async () => {
    expect(await hooks({ type: 'admin.active_changed', userId: 7 })).toEqual([['user.active_changed', 'user:7', { user_id: 7, active: false }]]);
    expect(await hooks({ type: 'api_key.revoked', userId: 7 })).toEqual([['api_key.revoked', 'user:7', { key_id: null, owner_type: 'user', owner_id: 7 }]]);
    expect(await hooks({ type: 'scim.user_reactivated', userId: 7 })).toEqual([]);
  });

  it('none for an event no hook stands for, nor for a user\'s event that names no user', async () => {
    expect(await hooks({ type: 'user.imported', userId })).toEqual([]);
    for (const user of [null, undefined]) {
      for (const type of ['user.registered', 'account.deleted', 'admin.plan_changed', 'org.member_added', 'api_key.created', 'scim.user_deactivated'] as const) {
        expect(await hooks({ type, userId: user, data: { org_id: 3, plan: 'pro', account_active: false } }), `${type} ${user}`).toEqual([]);
      }
    }
  });
});

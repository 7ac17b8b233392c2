// CONTRACT §29, one story per event: every plan change of an owner is its user.plan_changed or
// org.plan_changed, whoever made it, with `source`; billing's also its billing.plan_changed. The
// mapping from the audit event, table-driven (the end-to-end paths: hooks.test.ts for operators,
// hooks.billing.test.ts for Stripe events).
import { describe, expect, it } from 'vitest';
import { hooksOfAudit } from '../../src/hooks/fromAudit.js';
import type { AuditEvent } from '../../src/storage/events/audit.js';
import type { Queryable } from '../../src/storage/database/db.js';

// None of the plan mappers reads the database: a transaction that throws proves it.
const noDatabase = { query: () => { throw new Error('read the database'); } } as unknown as Queryable;
const hooks = async (event: AuditEvent, facts = {}) => (await hooksOfAudit(event, noDatabase, facts)).map((h) => [h.type, h.subject, h.data]);

describe('plan change hooks and their source', () => {
  it('an operator\'s change of a user\'s plan: source operator, override only when it was one', async () => {
    expect(await hooks({ type: 'admin.plan_changed', actor: 'admin', userId: 7, data: { plan: 'pro' } }, { previous_plan: 'free' })).toEqual([
      ['user.plan_changed', 'user:7', { user_id: 7, plan: 'pro', previous_plan: 'free', source: 'operator' }],
    ]);
    expect(await hooks({ type: 'admin.plan_changed', actor: 'operator', userId: 7, data: { plan: 'free', override: true } }, { previous_plan: 'pro' })).toEqual([
      ['user.plan_changed', 'user:7', { user_id: 7, plan: 'free', previous_plan: 'pro', source: 'operator', override: true }],
    ]);
  });

  it('an operator\'s change of an organization\'s plan: org.plan_changed, source operator', async () => {
    expect(await hooks({ type: 'admin.org_plan_changed', actor: 'cli', userId: null, data: { org_id: 3, plan: 'pro', previous: 'free', override: true } })).toEqual([
      ['org.plan_changed', 'org:3', { org_id: 3, plan: 'pro', previous_plan: 'free', source: 'operator', override: true }],
    ]);
  });

  it('billing\'s change of a user\'s plan: user.plan_changed (source billing, the event) and billing.plan_changed', async () => {
    expect(await hooks({ type: 'billing.plan_changed', actor: 'billing', userId: 9, data: { event_id: 'evt_1', plan: 'pro', previous_plan: 'free' } })).toEqual([
      ['user.plan_changed', 'user:9', { user_id: 9, plan: 'pro', previous_plan: 'free', source: 'billing', stripe_event_id: 'evt_1' }],
      ['billing.plan_changed', 'user:9', { owner_type: 'user', owner_id: 9, plan: 'pro', previous_plan: 'free', stripe_event_id: 'evt_1' }],
    ]);
  });

  it('a past-due grace that ended: source system, no Stripe event', async () => {
    const data = { reason: 'past_due_grace_ended', plan: 'free', previous_plan: 'pro', org_id: 4 };
    expect(await hooks({ type: 'billing.plan_changed', actor: 'system', userId: null, data })).toEqual([
      ['org.plan_changed', 'org:4', { org_id: 4, plan: 'free', previous_plan: 'pro', source: 'system' }],
      ['billing.plan_changed', 'org:4', { owner_type: 'org', owner_id: 4, plan: 'free', previous_plan: 'pro', stripe_event_id: null }],
    ]);
  });
});

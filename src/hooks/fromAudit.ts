// Which operator hooks (CONTRACT §24) an audit event stands for. Every change §24 lists is already
// recorded in the audit log inside its own transaction (CONTRACT §17), by the admin API, the
// console, the public API and billing alike: hooks are derived there (audit.ts), so no call site
// can record the change and forget the hook. What the audit row does not keep (an email, a plan
// before the change) is read in the same transaction, or handed over in `facts`.
import type { AuditEvent } from '../storage/events/index.js';
import type { Queryable } from '../storage/database/index.js';
import { orgSubject, userSubject, type HookEvent } from './hooks.js';

/** What a call site knows that the audit row does not store, for the hook only. */
export interface HookFacts {
  previous_plan?: string;
  email?: string;
  /** A deleted user's organizations (storage's deleteUser answers with them, so a deleted user is its own facts): it left each one. */
  memberOf?: readonly number[];
}

/** An audit event as the mappers read it: `data` always an object (none recorded reads as empty). */
type Event = AuditEvent & { data: Record<string, unknown> };
type Mapper = (event: Event, tx: Queryable, facts: HookFacts) => Promise<HookEvent[]>;

const num = (v: unknown): number | undefined => (typeof v === 'number' ? v : typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : undefined);

async function userRow(tx: Queryable, id: number): Promise<{ email: string; plan: string } | undefined> {
  return (await tx.query<{ email: string; plan: string }>('SELECT email, plan FROM users WHERE id = $1', [id]))[0];
}

const userEvent = (type: HookEvent['type'], userId: number, data: Record<string, unknown>): HookEvent =>
  ({ type, subject: userSubject(userId), data: { user_id: userId, ...data } });

const created: Mapper = async (e, tx) => {
  const row = await userRow(tx, e.userId!);
  return row ? [userEvent('user.created', e.userId!, { email: row.email, plan: row.plan })] : [];
};

const verified: Mapper = async (e, tx) => {
  const row = await userRow(tx, e.userId!);
  return row ? [userEvent('user.email_verified', e.userId!, { email: row.email })] : [];
};

// A deleted user leaves its organizations too: a backend keeping members in sync hears it per organization.
const deleted: Mapper = async (e, _tx, facts) => [
  userEvent('user.deleted', e.userId!, facts.email ? { email: facts.email } : {}),
  ...(facts.memberOf ?? []).map((orgId): HookEvent => ({ type: 'org.member_removed', subject: orgSubject(orgId), data: { org_id: orgId, user_id: e.userId } })),
];

/**
 * Who changed a plan (CONTRACT §29): an operator (admin API, console, CLI, import; `override`
 * when it held against billing), billing (a Stripe event, named), or the system (a grace that ended).
 */
function planSource(e: Event): Record<string, unknown> {
  if (e.type === 'billing.plan_changed') {
    return e.actor === 'system' ? { source: 'system' } : { source: 'billing', stripe_event_id: e.data.event_id ?? null };
  }
  return { source: 'operator', ...(e.data.override === true ? { override: true } : {}) };
}

const planChanged: Mapper = async (e, _tx, facts) =>
  [userEvent('user.plan_changed', e.userId!, { plan: e.data.plan, ...(facts.previous_plan ? { previous_plan: facts.previous_plan } : {}), ...planSource(e) })];

const activeChanged: Mapper = async (e) => [userEvent('user.active_changed', e.userId!, { active: e.data.active === true })];

// A SCIM deprovisioning or its undoing (CONTRACT §31) changes the account's own flag only for an
// account the organization manages and nobody else has: then, and only then, user.active_changed.
const scimActive: Mapper = async (e) =>
  (typeof e.data.account_active === 'boolean' ? [userEvent('user.active_changed', e.userId!, { active: e.data.account_active })] : []);

// A plan set by payment is a plan change of its owner too (CONTRACT §29, one story per event): a
// backend listening to user.plan_changed or org.plan_changed alone hears every change, whoever
// made it, and billing.plan_changed says it came from billing.
const billed: Mapper = async (e) => {
  const { plan, previous_plan: previous, event_id: stripeEventId } = e.data;
  const orgId = num(e.data.org_id);
  const owner = orgId !== undefined ? { owner_type: 'org', owner_id: orgId } : { owner_type: 'user', owner_id: e.userId };
  const subject = orgId !== undefined ? orgSubject(orgId) : userSubject(e.userId!);
  const changed: HookEvent = orgId !== undefined
    ? { type: 'org.plan_changed', subject, data: { org_id: orgId, plan, previous_plan: previous, ...planSource(e) } }
    : userEvent('user.plan_changed', e.userId!, { plan, previous_plan: previous, ...planSource(e) });
  return [changed, { type: 'billing.plan_changed', subject, data: { ...owner, plan, previous_plan: previous, stripe_event_id: stripeEventId ?? null } }];
};

const orgCreated: Mapper = async (e, tx) => {
  const orgId = num(e.data.org_id)!;
  const [org] = await tx.query<{ plan: string }>('SELECT plan FROM organizations WHERE id = $1', [orgId]);
  return [{ type: 'org.created', subject: orgSubject(orgId), data: { org_id: orgId, user_id: e.userId, ...(org ? { plan: org.plan } : {}) } }];
};

// An operator's plan change for an organization (admin API, console, CLI): its audit row has no user.
const orgPlanChanged: Mapper = async (e) => {
  const orgId = num(e.data.org_id)!;
  const previous = typeof e.data.previous === 'string' ? { previous_plan: e.data.previous } : {};
  return [{ type: 'org.plan_changed', subject: orgSubject(orgId), data: { org_id: orgId, plan: e.data.plan, ...previous, ...planSource(e) } }];
};

const member = (type: 'org.member_added' | 'org.member_removed'): Mapper => async (e) => {
  const orgId = num(e.data.org_id)!;
  const role = type === 'org.member_added' && typeof e.data.role === 'string' ? { role: e.data.role } : {};
  return [{ type, subject: orgSubject(orgId), data: { org_id: orgId, user_id: num(e.data.member_id) ?? e.userId, ...role } }];
};

// A member's role changed (CONTRACT §31's hook): by an owner or admin (§22: data from, to) or by the
// organization's SAML or SCIM (the same data).
const roleChanged: Mapper = async (e) => {
  const orgId = num(e.data.org_id)!;
  return [{ type: 'org.role_changed', subject: orgSubject(orgId), data: { org_id: orgId, user_id: num(e.data.member_id) ?? e.userId, role: e.data.to, previous_role: e.data.from } }];
};

// A domain's verification won or lost (CONTRACT §31): about the organization, no user.
const domain = (type: 'org.domain_verified' | 'org.domain_unverified'): Mapper => async (e) => {
  const orgId = num(e.data.org_id)!;
  return [{ type, subject: orgSubject(orgId), data: { org_id: orgId, domain: e.data.domain } }];
};

// A key is its user's, or an organization's (§22: data.org_id names it), whose subject then orders
// its events. Every creation and revocation records the key's id; revoking several at once records
// one event per key (keys/personal.ts).
const keyEvent = (type: 'api_key.created' | 'api_key.revoked'): Mapper => async (e) => {
  const orgId = num(e.data.org_id);
  const owner = orgId === undefined ? { owner_type: 'user', owner_id: e.userId } : { owner_type: 'org', owner_id: orgId };
  const subject = orgId === undefined ? userSubject(e.userId!) : orgSubject(orgId);
  return [{ type, subject, data: { key_id: num(e.data.id) ?? null, ...owner } }];
};

const MAPPERS: Partial<Record<AuditEvent['type'], Mapper>> = {
  'user.registered': created,
  // An operator creating an account (POST /admin/v1/users, the console): a sign-up all the same.
  'admin.user_created': created,
  'email.verified': verified,
  'account.deleted': deleted,
  'admin.user_deleted': deleted,
  'admin.plan_changed': planChanged,
  'admin.active_changed': activeChanged,
  'scim.user_deactivated': scimActive,
  'scim.user_reactivated': scimActive,
  'billing.plan_changed': billed,
  'org.created': orgCreated,
  'org.member_added': member('org.member_added'),
  'org.member_removed': member('org.member_removed'),
  'org.role_changed': roleChanged,
  'org.domain_verified': domain('org.domain_verified'),
  'org.domain_unverified': domain('org.domain_unverified'),
  'admin.org_plan_changed': orgPlanChanged,
  'api_key.created': keyEvent('api_key.created'),
  'api_key.revoked': keyEvent('api_key.revoked'),
};

// Events about an organization as a whole name no user (a plan billed to one included); every other mapped event is about one.
const WITHOUT_USER = new Set<AuditEvent['type']>(['admin.org_plan_changed', 'billing.plan_changed', 'org.domain_verified', 'org.domain_unverified']);

/** The hooks an audit event stands for (none for most), read in the change's transaction `tx`. */
export async function hooksOfAudit(event: AuditEvent, tx: Queryable, facts: HookFacts = {}): Promise<HookEvent[]> {
  const mapper = MAPPERS[event.type];
  if (!mapper || (event.userId == null && !WITHOUT_USER.has(event.type))) return [];
  return mapper({ ...event, data: event.data ?? {} }, tx, facts);
}

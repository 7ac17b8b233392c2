// The billing tables (migration 026, CONTRACT §23): customers linked to owners, checkout sessions
// the gateway created, Stripe events applied, and subscriptions as last fetched from Stripe.
// Plain parameterized SQL; every write of an event's application runs in its transaction.
import type { Queryable } from '../database/db.js';
import { COUNTER_SQL } from './counters.js';

/** `user` now; `org` once organizations (§22) exist: the tables already take both. */
export type OwnerType = 'user' | 'org';
export interface Owner { type: OwnerType; id: number }

export interface SubscriptionState {
  id: string;
  customer: string;
  status: string;
  /** Every item's price, in Stripe's order. */
  prices: string[];
  /** The listed price that decides the plan, else the first item's (what billing_subscriptions.price shows). */
  price: string | null;
  currentPeriodEnd: Date | null;
  /** Set to end at its period's end (the customer cancelled in the portal, or an account was deleted). */
  cancelAtPeriodEnd: boolean;
}

export interface StoredSubscription {
  stripe_subscription_id: string;
  status: string;
  prices: string[];
  past_due_since: Date | null;
}

/** A subscription as support sees it (CONTRACT §29). */
export interface ListedSubscription extends StoredSubscription {
  price: string | null;
  current_period_end: Date | null;
  cancel_at_period_end: boolean;
  grace_ended_at: Date | null;
}

export async function customerOf(q: Queryable, owner: Owner): Promise<string | undefined> {
  const rows = await q.query<{ stripe_customer_id: string }>(
    'SELECT stripe_customer_id FROM billing_customers WHERE owner_type = $1 AND owner_id = $2', [owner.type, owner.id]);
  return rows[0]?.stripe_customer_id;
}

export async function ownerOfCustomer(q: Queryable, customer: string): Promise<Owner | undefined> {
  const rows = await q.query<{ owner_type: OwnerType; owner_id: string }>(
    'SELECT owner_type, owner_id FROM billing_customers WHERE stripe_customer_id = $1', [customer]);
  return rows[0] && { type: rows[0].owner_type, id: Number(rows[0].owner_id) };
}

/**
 * Links the customer to the owner unless either is linked already (to anything): an event never
 * relinks. Whether the link now stands (true also when it stood before).
 */
export async function linkCustomer(q: Queryable, owner: Owner, customer: string): Promise<boolean> {
  await q.query(
    'INSERT INTO billing_customers (owner_type, owner_id, stripe_customer_id) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING',
    [owner.type, owner.id, customer],
  );
  return (await customerOf(q, owner)) === customer;
}

export async function recordSession(q: Queryable, session: string, owner: Owner, price: string): Promise<void> {
  await q.query(
    'INSERT INTO billing_sessions (stripe_session_id, owner_type, owner_id, price) VALUES ($1, $2, $3, $4)', [session, owner.type, owner.id, price]);
}

/** The owner of a checkout session the gateway created; undefined for any other session. */
export async function ownerOfSession(q: Queryable, session: string): Promise<Owner | undefined> {
  const rows = await q.query<{ owner_type: OwnerType; owner_id: string }>(
    'SELECT owner_type, owner_id FROM billing_sessions WHERE stripe_session_id = $1', [session]);
  return rows[0] && { type: rows[0].owner_type, id: Number(rows[0].owner_id) };
}

/**
 * Claims the event for this transaction: false when it was applied already. A second transaction
 * claiming the same id waits on the first's uncommitted row, then sees it (false) or, if the first
 * rolled back, takes it: one application across instances.
 */
export async function claimEvent(q: Queryable, eventId: string, type: string): Promise<boolean> {
  const rows = await q.query(
    'INSERT INTO billing_events (event_id, type) VALUES ($1, $2) ON CONFLICT (event_id) DO NOTHING RETURNING event_id', [eventId, type]);
  return rows.length === 1;
}

/**
 * Stores the subscription's current state for its owner. past_due_since keeps the first moment
 * it was seen past_due while it stays so, and is cleared when it leaves that status.
 */
export async function saveSubscription(q: Queryable, owner: Owner, s: SubscriptionState, now: Date): Promise<void> {
  await q.query(
    `INSERT INTO billing_subscriptions AS b
       (stripe_subscription_id, owner_type, owner_id, stripe_customer_id, status, price, prices, current_period_end, cancel_at_period_end, past_due_since, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $10, CASE WHEN $5 = 'past_due' THEN $9::timestamptz END, $9)
     ON CONFLICT (stripe_subscription_id) DO UPDATE SET
       status = EXCLUDED.status, price = EXCLUDED.price, prices = EXCLUDED.prices, current_period_end = EXCLUDED.current_period_end,
       cancel_at_period_end = EXCLUDED.cancel_at_period_end,
       past_due_since = CASE WHEN EXCLUDED.status = 'past_due' THEN COALESCE(b.past_due_since, $9::timestamptz) END,
       grace_ended_at = CASE WHEN EXCLUDED.status = 'past_due' THEN b.grace_ended_at END, updated_at = $9`,
    [s.id, owner.type, owner.id, s.customer, s.status, s.price, s.prices, s.currentPeriodEnd, now, s.cancelAtPeriodEnd],
  );
}

export async function subscriptionsOf(q: Queryable, owner: Owner): Promise<StoredSubscription[]> {
  return q.query<StoredSubscription>(
    `SELECT stripe_subscription_id, status, prices, past_due_since FROM billing_subscriptions
     WHERE owner_type = $1 AND owner_id = $2 ORDER BY stripe_subscription_id`,
    [owner.type, owner.id],
  );
}

/** Every subscription of the owner with what support reads of it, in the order of their ids. */
export async function listedSubscriptionsOf(q: Queryable, owner: Owner): Promise<ListedSubscription[]> {
  return q.query<ListedSubscription>(
    `SELECT stripe_subscription_id, status, price, prices, current_period_end, cancel_at_period_end, past_due_since, grace_ended_at
     FROM billing_subscriptions WHERE owner_type = $1 AND owner_id = $2 ORDER BY stripe_subscription_id`,
    [owner.type, owner.id],
  );
}

/** The override standing on the owner's plan (CONTRACT §29): the plan billing computed when it was made. */
export async function overrideOf(q: Queryable, owner: Owner): Promise<{ billing_plan: string; created_at: Date } | undefined> {
  return (await q.query<{ billing_plan: string; created_at: Date }>(
    'SELECT billing_plan, created_at FROM billing_plan_overrides WHERE owner_type = $1 AND owner_id = $2', [owner.type, owner.id]))[0];
}

/** An operator's plan now holds against billing while billing computes `billingPlan`. */
export async function saveOverride(q: Queryable, owner: Owner, billingPlan: string, now: Date): Promise<void> {
  await q.query(
    `INSERT INTO billing_plan_overrides (owner_type, owner_id, billing_plan, created_at) VALUES ($1, $2, $3, $4)
     ON CONFLICT (owner_type, owner_id) DO UPDATE SET billing_plan = EXCLUDED.billing_plan, created_at = EXCLUDED.created_at`,
    [owner.type, owner.id, billingPlan, now],
  );
}

/** Ends the owner's override, if any; whether there was one. */
export async function endOverride(q: Queryable, owner: Owner): Promise<boolean> {
  return (await q.query('DELETE FROM billing_plan_overrides WHERE owner_type = $1 AND owner_id = $2 RETURNING owner_id', [owner.type, owner.id])).length > 0;
}

/** Owners with a past_due subscription first seen so at or before `since` whose grace was not ended yet. */
export async function ownersPastGrace(q: Queryable, since: Date): Promise<Owner[]> {
  const rows = await q.query<{ owner_type: OwnerType; owner_id: string }>(
    "SELECT DISTINCT owner_type, owner_id FROM billing_subscriptions WHERE status = 'past_due' AND past_due_since <= $1 AND grace_ended_at IS NULL",
    [since],
  );
  return rows.map((r) => ({ type: r.owner_type, id: Number(r.owner_id) }));
}

export async function markGraceEnded(q: Queryable, owner: Owner, since: Date, now: Date): Promise<void> {
  await q.query(
    `UPDATE billing_subscriptions SET grace_ended_at = $4
     WHERE owner_type = $1 AND owner_id = $2 AND status = 'past_due' AND past_due_since <= $3 AND grace_ended_at IS NULL`,
    [owner.type, owner.id, since, now],
  );
}

/** Serializes, until the transaction ends, the fetch and the write of one subscription across instances. */
export async function lockSubscription(q: Queryable, id: string): Promise<void> {
  await q.query("SELECT pg_advisory_xact_lock(hashtext('billing_subscription:' || $1))", [id]);
}

/** The owner's plan now, read without a lock (what GET /api/v1/billing/subscription shows beside its subscriptions). */
export async function ownerPlan(q: Queryable, owner: Owner): Promise<string | undefined> {
  return (await q.query<{ plan: string }>(`SELECT plan FROM ${COUNTER_SQL[owner.type].table} WHERE id = $1`, [owner.id]))[0]?.plan;
}

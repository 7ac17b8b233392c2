// Plans that follow payment (CONTRACT §23): checkout and portal sessions for an owner, Stripe's
// webhook events applied once, and the past_due grace ended on time. Each event is applied in one
// transaction that first claims its id (billing_events), so a replay, or the same event delivered
// to two instances at once, changes nothing the second time; a Stripe failure rolls it all back,
// claim included, and Stripe's retry applies it. The payload decides nothing: the subscription is
// fetched from Stripe and its current state applied (events come out of order, several a second).
// A plan is set the way an operator's is (storage/accounts/users.ts writePlan: users' trigger tells every
// instance within a second, the local cache is told at once; an organization's, §22, by its row's
// trigger), with its audit row.
import type { Logger } from 'pino';
import { lockAccount, type AccountChangeDeps } from '../account/change.js';
import type { Audit, AuditActor } from '../audit.js';
import type { Config } from '../config/schema.js';
import type { BillingConfig } from '../config/schema/billing.js';
import {
  claimEvent, customerOf, endOverride, ownerPlan, linkCustomer, lockSubscription, markGraceEnded, overrideOf, ownerOfCustomer, ownerOfSession, ownersPastGrace, recordSession,
  saveSubscription, subscriptionsOf, type Owner, type OwnerType, type SubscriptionState,
} from '../storage/usage/index.js';
import type { Database, Queryable } from '../storage/database/index.js';
import { lockOrganization, setOrganizationPlan } from '../storage/orgs/index.js';
import { writePlan } from '../storage/accounts/index.js';
import { cancelRunningSubscriptions } from './cancel.js';
import { billingView, computedPlan, planRules } from './operator.js';
import { idOf, StripeUnavailable, type StripeEvent, type StripeGateway } from './stripe.js';

const DAY_MS = 86_400_000;
const SUBSCRIPTION_EVENTS = new Set(['customer.subscription.created', 'customer.subscription.updated', 'customer.subscription.deleted']);
const CHECKOUT_COMPLETED = 'checkout.session.completed';

export interface BillingDeps {
  db: Database;
  stripe: StripeGateway;
  config: BillingConfig['stripe'];
  /** The live plans (a reload may reorder or add them). */
  plans: () => Config['plans'];
  audit: Pick<Audit, 'record'>;
  /** Tells this instance's identity cache at once; the users trigger tells the others. */
  forgetUser: (id: number) => void;
  clock: () => Date;
  log: Logger;
}

/** GET /api/v1/billing/subscription's body. */
export type OwnerBilling = Pick<Awaited<ReturnType<typeof billingView>>, 'plan_source' | 'grace_ends_at'> & {
  subscriptions: Array<Omit<Awaited<ReturnType<typeof billingView>>['subscriptions'][number], 'url'>>;
};

export type CheckoutOutcome = { url: string } | { error: 'priceUnknown' | 'subscriptionAlreadyActive' };
export type EventOutcome = 'applied' | 'replayed' | 'ignored';

/** Why a plan changed: a Stripe event (actor billing) or the end of a grace (actor system). */
interface Cause { actor: AuditActor; data: Record<string, unknown> }

/** How billing reads and sets the plan of each kind of owner. */
interface OwnerPlan {
  /** Locks the owner's row, after its subscription's (the event's order), and reads its plan; undefined when the owner is gone. */
  current(tx: Queryable, id: number, deps: AccountChangeDeps): Promise<string | undefined>;
  write(tx: Queryable, id: number, plan: string): Promise<unknown>;
  /** The audit row's user, and what its data adds. */
  audit(id: number): { userId: number | null; data: Record<string, unknown> };
  /** Tells this instance at once, after the commit; the other instances hear it from the row's trigger. */
  forget(id: number, forgetUser: BillingDeps['forgetUser']): void;
}

const OWNER_PLANS: Record<OwnerType, OwnerPlan> = {
  // A user's row locked as account/change.ts locks it; its plan written as an operator's is
  // (storage/accounts/users.ts writePlan: users' trigger tells the other instances, this one is told here).
  user: {
    current: async (tx, id, deps) => (await lockAccount(tx, deps, { userId: id, mode: 'update' }))?.user.plan,
    write: (tx, id, plan) => writePlan(tx, id, plan),
    audit: (id) => ({ userId: id, data: {} }),
    forget: (id, forgetUser) => forgetUser(id),
  },
  // An organization's plan (CONTRACT §22) set as an operator sets it: its row's trigger (031) tells
  // every instance, this one included, within a second; no user cache to tell.
  org: {
    current: async (tx, id) => (await lockOrganization(tx, id))?.plan,
    write: (tx, id, plan) => setOrganizationPlan(tx, id, plan),
    audit: (id) => ({ userId: null, data: { org_id: id } }),
    // Its row's trigger tells this instance too: nothing to do here.
    forget: () => undefined,
  },
};

export class Billing {
  constructor(private readonly deps: BillingDeps) {}

  /** A Checkout Session for `price` (a key of prices), reusing the owner's customer; `back`: stripe.ts's. Throws StripeUnavailable. */
  async checkout(owner: Owner, price: string, back?: string): Promise<CheckoutOutcome> {
    if (!Object.hasOwn(this.deps.config.prices, price)) return { error: 'priceUnknown' };
    const { db } = this.deps;
    const subs = await subscriptionsOf(db, owner);
    if (subs.some((s) => s.status === 'active' || s.status === 'trialing')) return { error: 'subscriptionAlreadyActive' };
    const session = await this.deps.stripe.checkoutSession(owner, price, await customerOf(db, owner), back);
    // Stored before the URL is handed out: only a session recorded here links a customer when it completes.
    await recordSession(db, session.id, owner, price);
    return { url: session.url };
  }

  /**
   * Before the owner goes (CONTRACT §23): each of its subscriptions still running (active,
   * trialing or past_due) is set to cancel at the end of its period, through Stripe. False when
   * Stripe could not be told: the caller keeps the owner, and the client may try again. A bound
   * function: the deletions of a user, an organization and an operator's erasure take it as is.
   */
  readonly cancelAtPeriodEnd = async (owner: Owner): Promise<boolean> => {
    let running: number;
    try {
      running = await cancelRunningSubscriptions(this.deps.db, this.deps.stripe, owner);
    } catch (err) {
      if (!(err instanceof StripeUnavailable)) throw err;
      this.deps.log.warn({ err: err.message, owner }, 'billing: a subscription could not be set to cancel at period end; the owner is kept');
      return false;
    }
    if (running) this.deps.log.info({ owner, subscriptions: running }, 'billing: subscriptions set to cancel at period end before the owner is deleted');
    return true;
  };

  /** A Customer Portal URL; undefined when the owner has no customer yet; `back`: stripe.ts's. Throws StripeUnavailable. */
  async portal(owner: Owner, back?: string): Promise<string | undefined> {
    const customer = await customerOf(this.deps.db, owner);
    return customer === undefined ? undefined : this.deps.stripe.portalSession(customer, back);
  }

  /**
   * What the owner may see of its billing (CONTRACT §30): §29's object as support reads it
   * (operator.ts's billingView, one computation for both), less what is the operator's: the
   * customer's id and the links into the operator's Stripe dashboard.
   */
  async subscription(owner: Owner): Promise<OwnerBilling> {
    const plan = (await ownerPlan(this.deps.db, owner)) ?? 'free';
    const rules = planRules({ plans: this.deps.plans(), billing: { stripe: this.deps.config } }, this.deps.clock());
    const { subscriptions, plan_source, grace_ends_at } = await billingView(this.deps.db, owner, plan, rules);
    return { subscriptions: subscriptions.map(({ url: _url, ...shown }) => shown), plan_source, grace_ends_at };
  }

  /** Applies a verified event once. Throws StripeUnavailable (nothing applied, the claim rolled back). */
  async apply(event: StripeEvent): Promise<EventOutcome> {
    if (event.livemode !== this.deps.stripe.livemode) return 'ignored';
    const isCheckout = event.type === CHECKOUT_COMPLETED;
    if (!isCheckout && !SUBSCRIPTION_EVENTS.has(event.type)) return 'ignored';
    const cause: Cause = { actor: 'billing', data: { event_id: event.id } };
    const { replayed, changed } = await this.deps.db.transaction(async (tx): Promise<{ replayed: boolean; changed?: Owner }> => {
      if (!(await claimEvent(tx, event.id, event.type))) return { replayed: true };
      return { replayed: false, changed: isCheckout ? await this.completeCheckout(tx, event, cause) : await this.refreshSubscription(tx, idOf(event.object.id), cause) };
    });
    this.tellAtOnce(changed);
    return replayed ? 'replayed' : 'applied';
  }

  /**
   * A completed checkout of a session the gateway created links its owner to the subscription's
   * customer (unless either is linked already), then applies the subscription.
   */
  private async completeCheckout(tx: Queryable, event: StripeEvent, cause: Cause): Promise<Owner | undefined> {
    const session = idOf(event.object.id);
    const owner = session === null ? undefined : await ownerOfSession(tx, session);
    const subscription = idOf(event.object.subscription);
    if (!owner || subscription === null) return;
    await lockSubscription(tx, subscription);
    const state = await this.deps.stripe.subscription(subscription);
    if (!(await linkCustomer(tx, owner, state.customer))) {
      this.deps.log.warn({ owner, session }, 'billing: checkout completed for an owner linked to another customer; not relinked (operator action)');
      return;
    }
    return this.applyState(tx, owner, state, cause);
  }

  private async refreshSubscription(tx: Queryable, subscription: string | null, cause: Cause): Promise<Owner | undefined> {
    if (subscription === null) return;
    await lockSubscription(tx, subscription);
    const state = await this.deps.stripe.subscription(subscription);
    // A customer no checkout of ours linked: not ours to act on (its checkout, if any, applies it).
    const owner = await ownerOfCustomer(tx, state.customer);
    return owner && this.applyState(tx, owner, state, cause);
  }

  private async applyState(tx: Queryable, owner: Owner, state: SubscriptionState, cause: Cause): Promise<Owner | undefined> {
    const before = this.computed(await subscriptionsOf(tx, owner)).plan;
    await saveSubscription(tx, owner, state, this.deps.clock());
    return this.settlePlan(tx, owner, cause, before);
  }

  private computed(subs: Awaited<ReturnType<typeof subscriptionsOf>>) {
    return computedPlan(subs, { stripe: this.deps.config, plans: this.deps.plans(), now: this.deps.clock() });
  }

  /**
   * Sets the owner's plan to what its subscriptions give now (CONTRACT §29); the owner when its
   * plan changed, to be told once the transaction commits. An operator's override holds while
   * billing computes the plan it computed when the override was made, and ends when billing
   * computes another. An owner whose plan billing does not manage keeps the plan an operator gave
   * it unless billing's plan moved (`before`, what billing computed before this event; none when a
   * grace ended: billing managed the plan until now).
   */
  private async settlePlan(tx: Queryable, owner: Owner, cause: Cause, before?: string): Promise<Owner | undefined> {
    const kind = OWNER_PLANS[owner.type];
    const current = await kind.current(tx, owner.id, this.deps);
    if (current === undefined) return;
    const { plan, managed } = this.computed(await subscriptionsOf(tx, owner));
    const held = await overrideOf(tx, owner);
    if (held?.billing_plan === plan) return;
    if (held) await endOverride(tx, owner);
    else if (!managed && before === plan) return;
    if (plan === current) return;
    await kind.write(tx, owner.id, plan);
    const audit = kind.audit(owner.id);
    const data = { ...cause.data, plan, previous_plan: current, ...audit.data };
    await this.deps.audit.record({ type: 'billing.plan_changed', actor: cause.actor, userId: audit.userId, data }, tx);
    this.deps.log.info({ owner, plan, previous: current, ...cause.data }, 'billing: plan set');
    return owner;
  }

  /**
   * This instance forgets at once what it cached of an owner whose plan changed: after the commit,
   * or a read in between would cache the old plan again.
   */
  private tellAtOnce(changed: Owner | undefined): void {
    if (changed) OWNER_PLANS[changed.type].forget(changed.id, this.deps.forgetUser);
  }

  /** Ends the grace of past_due subscriptions whose pastDueGraceDays have run out (every minute, housekeeping.ts). */
  async endGraces(): Promise<void> {
    const now = this.deps.clock();
    const since = new Date(now.getTime() - this.deps.config.pastDueGraceDays * DAY_MS);
    for (const owner of await ownersPastGrace(this.deps.db, since)) {
      const changed = await this.deps.db.transaction(async (tx) => {
        const result = await this.settlePlan(tx, owner, { actor: 'system', data: { reason: 'past_due_grace_ended' } });
        await markGraceEnded(tx, owner, since, now);
        return result;
      });
      this.tellAtOnce(changed);
    }
  }
}



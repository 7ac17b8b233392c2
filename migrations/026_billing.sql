-- Plans that follow payment (CONTRACT §23). Expand-only: new tables, and audit_events' actor
-- allowed one more value. Owners are `user` or `org` (§22); only `user` is written for now, and
-- no foreign key ties owner_id to users, so organizations plug in without a migration of these.
-- An owner is linked to one Stripe customer and a customer to one owner: an event never relinks
-- either (operator action only).
CREATE TABLE billing_customers (
  owner_type text NOT NULL CHECK (owner_type IN ('user', 'org')),
  owner_id bigint NOT NULL,
  stripe_customer_id text NOT NULL UNIQUE,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (owner_type, owner_id)
);
-- Checkout sessions the gateway created: only these link a customer to an owner when they
-- complete (a client_reference_id alone, which anyone with a Stripe account could set, links nothing).
CREATE TABLE billing_sessions (
  stripe_session_id text PRIMARY KEY,
  owner_type text NOT NULL CHECK (owner_type IN ('user', 'org')),
  owner_id bigint NOT NULL,
  price text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX billing_sessions_created ON billing_sessions (created_at);
-- Each Stripe event applied once: its row is inserted in the transaction that applies it, so a
-- replay, or the same event delivered to two instances at once, finds the row (or waits for the
-- first transaction and then finds it) and changes nothing.
CREATE TABLE billing_events (
  event_id text PRIMARY KEY,
  type text NOT NULL,
  applied_at timestamptz NOT NULL DEFAULT now()
);
-- The subscriptions' current state as last fetched from Stripe (never as an event's payload said).
-- price: the listed price (billing.stripe.prices) that decides the plan, else the first item's.
-- past_due_since: when it was first seen past_due (the grace period counts from there); null otherwise.
CREATE TABLE billing_subscriptions (
  stripe_subscription_id text PRIMARY KEY,
  owner_type text NOT NULL CHECK (owner_type IN ('user', 'org')),
  owner_id bigint NOT NULL,
  stripe_customer_id text NOT NULL,
  status text NOT NULL,
  price text,
  prices text[] NOT NULL DEFAULT '{}',
  current_period_end timestamptz,
  past_due_since timestamptz,
  -- Set by the background job once the grace of this past_due spell ended and the plan was recomputed.
  grace_ended_at timestamptz,
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX billing_subscriptions_owner ON billing_subscriptions (owner_type, owner_id);
CREATE INDEX billing_subscriptions_past_due ON billing_subscriptions (past_due_since) WHERE past_due_since IS NOT NULL AND grace_ended_at IS NULL;
-- The actors of CONTRACT §24 (billing among them); a superset, so it stands whichever migration
-- of §24 came before.
ALTER TABLE audit_events DROP CONSTRAINT IF EXISTS audit_events_actor_check;
-- NOT VALID: the rows already there hold the narrower set, so the table is not scanned under the
-- migration's lock while a rolling upgrade keeps writing to it.
ALTER TABLE audit_events ADD CONSTRAINT audit_events_actor_check
  CHECK (actor IN ('user', 'admin', 'cli', 'console', 'operator', 'billing', 'system')) NOT VALID;

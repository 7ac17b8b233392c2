-- Support sees the money, and a Stripe-managed plan is not silently overwritten (CONTRACT §29).
-- cancel_at_period_end: what the subscription fetched from Stripe says (the console shows a
-- subscription that ends at its period's end). Expand-only: a column with a default the previous
-- release neither reads nor writes.
ALTER TABLE billing_subscriptions ADD COLUMN cancel_at_period_end boolean NOT NULL DEFAULT false;
-- An operator's plan set with `override: true` against the plan billing computes: it holds while
-- billing keeps computing billing_plan (renewals, invoices, payment retries) and ends, row
-- deleted, when billing computes another plan or an operator sets the plan billing computes.
-- Expand-only: a new table. During a rolling upgrade an instance of the previous release applies
-- billing's plan without reading it (the rule of before, §23), as it did.
CREATE TABLE billing_plan_overrides (
  owner_type text NOT NULL CHECK (owner_type IN ('user', 'org')),
  owner_id bigint NOT NULL,
  -- The plan billing computed when the override was made.
  billing_plan text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (owner_type, owner_id)
);

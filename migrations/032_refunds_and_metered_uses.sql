-- Refunds and metered usage (CONTRACT §23). Expand-only: two new tables the previous release never
-- reads; it neither refunds nor meters, and its counting is unchanged.
--
-- usage_refunds: the uses given back to an owner on a UTC day, so that capPerDay holds across
-- instances: one conditional upsert takes a refund only while the day's count is under the cap
-- (src/storage/useRefunds.ts), in the transaction that lowers the counters.
CREATE TABLE usage_refunds (
  user_id integer NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  day date NOT NULL,
  refunds integer NOT NULL DEFAULT 0,
  PRIMARY KEY (user_id, day)
);

-- metered_uses: one row per use served beyond a plan's included monthly allowance (overage:
-- meter), written by the statement that counted it (src/storage/meteredUses.ts), never derived from
-- counter deltas. A refund marks its row; the reporter (src/billing/meterReporter.ts) puts rows whose
-- refund can no longer happen into one outbox message (delivery_id), whose Stripe identifier is
-- derived from them (owner, month, first and last row): a retry sends the same identifier, and
-- Stripe keeps the first.
CREATE TABLE metered_uses (
  id bigserial PRIMARY KEY,
  user_id integer NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  month date NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  refunded boolean NOT NULL DEFAULT false,
  delivery_id text
);
-- What the reporter reads: rows not yet reported, oldest first.
CREATE INDEX metered_uses_unreported ON metered_uses (created_at) WHERE delivery_id IS NULL;
-- A refund or a hand-back takes back the owner's newest unreported record of the month.
CREATE INDEX metered_uses_owner ON metered_uses (user_id, month, id) WHERE delivery_id IS NULL;

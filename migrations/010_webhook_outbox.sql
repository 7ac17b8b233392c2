-- Durable webhook deliveries (CONTRACT §9): an outbox. An event is a row written before the
-- response that caused it (in the same transaction as the change, where there is one), so neither
-- a SIGTERM nor a crash loses it. Any instance delivers it: a claim takes due rows with
-- FOR UPDATE SKIP LOCKED and leases them for longer than an attempt can last, so one attempt runs
-- at a time across instances, and the lease of an instance that died expires for another to take
-- over. The id is the webhook-id, the body the exact bytes signed: both are fixed here, once, and
-- every retry on any instance sends the same message. Finished rows are kept 7 days (src/pro/deliveries.ts
-- purges them) for GET /admin/v1/users/{id}/webhook-deliveries.
CREATE TABLE webhook_deliveries (
  id text PRIMARY KEY,
  user_id integer NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  type text NOT NULL,
  body text NOT NULL,
  -- pending: waiting or in flight; delivered: a 2xx; failed: refused, blocked or out of retries;
  -- skipped: nothing to send (no webhook, or the owner is not an active pro user).
  status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed', 'skipped')),
  attempts integer NOT NULL DEFAULT 0,
  -- webhooks.retries + 1 of the instance that accepted it: a message's fate does not depend on
  -- which instance happens to claim its retries.
  max_attempts integer NOT NULL CHECK (max_attempts >= 1),
  next_attempt_at timestamptz NOT NULL DEFAULT now(),
  -- The claim of the attempt in flight, and when it lapses.
  lease text,
  leased_until timestamptz,
  last_error text,
  created_at timestamptz NOT NULL DEFAULT now(),
  last_attempt_at timestamptz,
  finished_at timestamptz,
  CHECK ((status = 'pending') = (finished_at IS NULL))
);

-- What a claim reads: the pending rows only, a handful at any time.
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
-- The admin listing, newest first.
CREATE INDEX webhook_deliveries_user ON webhook_deliveries (user_id, created_at DESC);
-- The purge of finished rows.
CREATE INDEX webhook_deliveries_finished ON webhook_deliveries (finished_at) WHERE status <> 'pending';

-- A row that may be attempted now and that nobody holds (a new event, an attempt handed back at
-- shutdown, a retry an operator asked for by SQL) wakes every instance's worker through the change
-- feed, instead of waiting for its poll. Sent at commit; the same notification is sent once per
-- transaction however many rows it touches.
CREATE FUNCTION gw_notify_webhook_due() RETURNS trigger AS $$
BEGIN
  PERFORM pg_notify('gw_webhook_due', '');
  RETURN NULL;
END
$$ LANGUAGE plpgsql;

CREATE TRIGGER webhook_deliveries_due AFTER INSERT OR UPDATE ON webhook_deliveries FOR EACH ROW
  WHEN (NEW.status = 'pending' AND NEW.lease IS NULL AND NEW.next_attempt_at <= now())
  EXECUTE FUNCTION gw_notify_webhook_due();

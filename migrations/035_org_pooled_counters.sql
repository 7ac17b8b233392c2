-- Pooled counters of organizations (CONTRACT §22, "Whose plan and whose counter"): an organization
-- on a plan other than `free` counts every use of its members and keys on one counter, with every
-- guarantee of a user's (§12, §23): the same four columns as on users (003, 027), reserved by the
-- same conditional UPDATE (src/storage/dailyUsage.ts names the table), so the row's lock serializes
-- every instance's reservations. Finished days roll up into org_usage_days as users' do into
-- usage_days (008), refunds are capped per organization and day in org_usage_refunds (032's
-- usage_refunds for users), and a served use past a metered allowance is recorded with org_id
-- (metered_uses.user_id null). Expand-only: new columns with defaults, new tables, a nullable
-- column, triggers; the previous release neither reads nor writes any of them.
ALTER TABLE organizations ADD COLUMN daily_usage integer NOT NULL DEFAULT 0;
ALTER TABLE organizations ADD COLUMN last_usage_date date;
ALTER TABLE organizations ADD COLUMN monthly_usage integer NOT NULL DEFAULT 0;
ALTER TABLE organizations ADD COLUMN last_usage_month date;

CREATE TABLE org_usage_days (
  org_id integer NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  day date NOT NULL,
  uses integer NOT NULL,
  PRIMARY KEY (org_id, day)
);
CREATE INDEX org_usage_days_by_day ON org_usage_days (day);

CREATE FUNCTION gw_roll_up_org_daily_usage() RETURNS trigger AS $$
BEGIN
  INSERT INTO org_usage_days (org_id, day, uses) VALUES (OLD.id, OLD.last_usage_date, OLD.daily_usage)
  ON CONFLICT (org_id, day) DO UPDATE SET uses = EXCLUDED.uses;
  RETURN NULL;
END
$$ LANGUAGE plpgsql;

CREATE TRIGGER organizations_roll_up_daily_usage AFTER UPDATE ON organizations FOR EACH ROW
  WHEN (OLD.last_usage_date IS NOT NULL AND OLD.daily_usage > 0
        AND NEW.last_usage_date IS DISTINCT FROM OLD.last_usage_date)
  EXECUTE FUNCTION gw_roll_up_org_daily_usage();

CREATE TABLE org_usage_refunds (
  org_id integer NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  day date NOT NULL,
  refunds integer NOT NULL DEFAULT 0,
  PRIMARY KEY (org_id, day)
);

ALTER TABLE metered_uses ALTER COLUMN user_id DROP NOT NULL;
ALTER TABLE metered_uses ADD COLUMN org_id integer REFERENCES organizations (id) ON DELETE CASCADE;
CREATE INDEX metered_uses_org_owner ON metered_uses (org_id, month, id) WHERE delivery_id IS NULL AND org_id IS NOT NULL;

-- As 004 and 027 do for a user: a count lowered by hand (or handed back, or refunded) must reach
-- the Redis gates at once. Same channel as a user's, the id prefixed `org:` (storage/changeFeed.ts);
-- not 031's channel, which would also make every instance reload the organization's memberships.
CREATE FUNCTION gw_notify_org_usage_reset() RETURNS trigger AS $$
BEGIN
  PERFORM pg_notify('gw_daily_usage_reset', 'org:' || NEW.id::text);
  RETURN NULL;
END
$$ LANGUAGE plpgsql;

CREATE TRIGGER organizations_usage_lowered AFTER UPDATE ON organizations FOR EACH ROW
  WHEN ((OLD.last_usage_date IS NOT NULL AND (NEW.last_usage_date IS NULL OR NEW.last_usage_date < OLD.last_usage_date))
        OR (NEW.last_usage_date IS NOT DISTINCT FROM OLD.last_usage_date AND NEW.daily_usage < OLD.daily_usage)
        OR (OLD.last_usage_month IS NOT NULL AND (NEW.last_usage_month IS NULL OR NEW.last_usage_month < OLD.last_usage_month))
        OR (NEW.last_usage_month IS NOT DISTINCT FROM OLD.last_usage_month AND NEW.monthly_usage < OLD.monthly_usage))
  EXECUTE FUNCTION gw_notify_org_usage_reset();

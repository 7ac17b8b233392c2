-- Monthly quotas (CONTRACT §23): the counted uses of the user's current UTC month, kept beside the
-- day's on the users row so that one conditional UPDATE reserves a use on every window at once or
-- on none (src/storage/dailyUsage.ts): the row's lock already serializes the day's count, and the
-- month's rides on it. last_usage_month is the first day of the month monthly_usage counts.
-- Expand-only: the previous release neither reads nor writes these columns, and its inserts get
-- the defaults.
ALTER TABLE users ADD COLUMN monthly_usage integer NOT NULL DEFAULT 0;
ALTER TABLE users ADD COLUMN last_usage_month date;

-- As 004 does for the day: an operator who lowers the month's count by hand must be obeyed at
-- once, but the Redis gate remembers the month as used up. The same channel tells every instance
-- to drop that user's gates (src/pipeline/guards/dailyLimit.ts drops the day's and the month's).
CREATE TRIGGER users_monthly_usage_reset AFTER UPDATE ON users FOR EACH ROW
  WHEN ((OLD.last_usage_month IS NOT NULL AND (NEW.last_usage_month IS NULL OR NEW.last_usage_month < OLD.last_usage_month))
        OR (NEW.last_usage_month IS NOT DISTINCT FROM OLD.last_usage_month AND NEW.monthly_usage < OLD.monthly_usage))
  EXECUTE FUNCTION gw_notify_daily_usage_reset();

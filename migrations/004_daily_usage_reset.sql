-- An operator who lowers a user's daily count by hand (support granting another use today, a
-- correction) must be obeyed at once, but the Redis gate in front of Postgres remembers the day
-- as used up. This tells every instance to drop that user's gate (src/guards/dailyLimit.ts).
-- The gateway itself only raises the count or moves it to a later day, which never fires.
CREATE FUNCTION gw_notify_daily_usage_reset() RETURNS trigger AS $$
BEGIN
  PERFORM pg_notify('gw_daily_usage_reset', NEW.id::text);
  RETURN NULL;
END
$$ LANGUAGE plpgsql;

CREATE TRIGGER users_daily_usage_reset AFTER UPDATE ON users FOR EACH ROW
  WHEN ((OLD.last_usage_date IS NOT NULL AND (NEW.last_usage_date IS NULL OR NEW.last_usage_date < OLD.last_usage_date))
        OR (NEW.last_usage_date IS NOT DISTINCT FROM OLD.last_usage_date AND NEW.daily_usage < OLD.daily_usage))
  EXECUTE FUNCTION gw_notify_daily_usage_reset();

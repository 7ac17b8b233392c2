-- Plans are data (CONTRACT §12): any plan gateway.yaml names exists, so the fixed list of the
-- first migration goes. A plan is still a short lower-case name (it travels in x-user-plan and
-- in metric labels), never free text.
ALTER TABLE users DROP CONSTRAINT IF EXISTS users_plan_check;
ALTER TABLE users ADD CONSTRAINT users_plan_name CHECK (plan ~ '^[a-z][a-z0-9_-]{0,31}$');
ALTER TABLE subscriptions DROP CONSTRAINT IF EXISTS subscriptions_plan_check;
ALTER TABLE subscriptions ADD CONSTRAINT subscriptions_plan_name CHECK (plan ~ '^[a-z][a-z0-9_-]{0,31}$');

-- The daily rollup: users.daily_usage holds the counted uses of users.last_usage_date only, so
-- when a user's day moves on, the finished day is kept here (GET /admin/v1/users/{id}/usage shows
-- the last 30 days: these rows and the current one). A trigger, not the gateway's code: the day
-- moves once per user and day whoever moves it, and no request pays for it.
CREATE TABLE usage_days (
  user_id integer NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  day date NOT NULL,
  uses integer NOT NULL,
  PRIMARY KEY (user_id, day)
);

CREATE FUNCTION gw_roll_up_daily_usage() RETURNS trigger AS $$
BEGIN
  INSERT INTO usage_days (user_id, day, uses) VALUES (OLD.id, OLD.last_usage_date, OLD.daily_usage)
  ON CONFLICT (user_id, day) DO UPDATE SET uses = EXCLUDED.uses;
  RETURN NULL;
END
$$ LANGUAGE plpgsql;

CREATE TRIGGER users_roll_up_daily_usage AFTER UPDATE ON users FOR EACH ROW
  WHEN (OLD.last_usage_date IS NOT NULL AND OLD.daily_usage > 0
        AND NEW.last_usage_date IS DISTINCT FROM OLD.last_usage_date)
  EXECUTE FUNCTION gw_roll_up_daily_usage();

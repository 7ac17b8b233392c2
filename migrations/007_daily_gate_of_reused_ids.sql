-- 006 tells the instances' identity caches of a user id that comes (back) into being (an INSERT
-- with an explicit id, ids restarted after a DELETE, an UPDATE of the id), but the Redis daily gate
-- is kept per user id too: the former holder's "day used up" would refuse the newcomer, whose row
-- has counted nothing, for the rest of the day. The new id is announced on the daily-reset channel
-- as well, so every instance drops its gate (src/guards/dailyLimit.ts). TRUNCATE is 006's.
CREATE TRIGGER users_daily_gate_new_id AFTER INSERT ON users FOR EACH ROW
  EXECUTE FUNCTION gw_notify_daily_usage_reset();
CREATE TRIGGER users_daily_gate_id_changed AFTER UPDATE ON users FOR EACH ROW
  WHEN (OLD.id IS DISTINCT FROM NEW.id)
  EXECUTE FUNCTION gw_notify_daily_usage_reset();

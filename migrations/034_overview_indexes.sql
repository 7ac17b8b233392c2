-- The console's overview (CONTRACT §24, GET /admin/v1/overview) reads the last 30 UTC days across
-- every user and every key. The primary keys, (user_id, day) and (key_id, day), serve one user's or
-- one key's days; these serve a range of days for all of them. Expand-only: indexes the previous
-- release never names.
CREATE INDEX usage_days_by_day ON usage_days (day);
CREATE INDEX api_key_usage_by_day ON api_key_usage (day);

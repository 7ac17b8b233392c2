-- The hourly purge of reported metered uses (src/storage/usageRetention.ts) finds them by month:
-- without this index every sweep would read the whole table, one row per use past an allowance.
-- Partial: only rows the reporter has marked, the ones a purge may take. Expand-only: an index the
-- previous release never names.
CREATE INDEX metered_uses_reported ON metered_uses (month) WHERE delivery_id IS NOT NULL;

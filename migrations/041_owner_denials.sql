-- Refusals per owner per UTC day (CONTRACT §30: GET /api/v1/user/usage and /api/v1/orgs/{id}/usage
-- answer `denied` beside `uses`). Kept on the rollup rows of 008 (users) and 035 (organizations):
-- each instance counts the quota refusals of a counter in memory and adds them here once a second
-- (src/storage/ownerDenials.ts), so a denied repeat never writes on the request path and the
-- instances' counts sum. A row of the current day may now exist before the day's rollup: the
-- rollup's ON CONFLICT sets `uses` only, and keeps the refusals. Numbered 041: 040 is billing's.
-- Expand-only: a column with a default, which the previous release neither reads nor writes (its
-- rollup inserts get 0).
ALTER TABLE usage_days ADD COLUMN denied integer NOT NULL DEFAULT 0;
ALTER TABLE org_usage_days ADD COLUMN denied integer NOT NULL DEFAULT 0;

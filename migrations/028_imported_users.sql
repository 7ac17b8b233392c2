-- Moving in (CONTRACT §27): an imported user keeps the id it had in the system it came from as
-- external_id, unique among users that have one, searchable by operators and optionally sent
-- upstream (x-user-external-id). Expand-only: the previous release neither reads nor writes it,
-- and its inserts leave it null.
ALTER TABLE users ADD COLUMN external_id text;
CREATE UNIQUE INDEX users_external_id_key ON users (external_id) WHERE external_id IS NOT NULL;

-- The costs of the imported password hashes (CONTRACT §27, §13): one row per format and
-- parameters an import stored (its shape: '$2b$12$', 'pbkdf2_sha256$600000$'), with a hash of
-- that shape which matches no password, and its estimated cost. Every instance keeps the dearest
-- in memory and pays a check of it on a failed login whose own check was cheaper (an unknown
-- email's, a native account's), so that a not-yet-migrated account dearer than argon2id cannot be
-- told from an unknown email by the time its wrong password takes. The dummy differs from a real
-- hash only in its salt and digest (each replaced by 'A's of the same length, so it costs the
-- same): it is no one's secret. Recorded by the importer in each batch's transaction; a shape no
-- stored hash has any more is dropped by the hourly housekeeping. Every change is announced on
-- gw_imported_hash_costs_changed, and every instance reloads these few rows at once.
-- Expand-only: a new table the previous release does not know.
CREATE TABLE imported_hash_costs (
  dummy_hash text PRIMARY KEY,
  -- The stored hashes of this cost begin so: what the housekeeping looks for.
  shape text NOT NULL,
  -- In argon2id verifications of the gateway's own parameters (importedHashes.ts, hashCost).
  work double precision NOT NULL,
  recorded_at timestamptz NOT NULL DEFAULT now()
);

CREATE FUNCTION gw_notify_imported_hash_costs_changed() RETURNS trigger AS $$
BEGIN
  PERFORM pg_notify('gw_imported_hash_costs_changed', '');
  RETURN NULL;
END
$$ LANGUAGE plpgsql;

CREATE TRIGGER imported_hash_costs_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON imported_hash_costs
  FOR EACH STATEMENT EXECUTE FUNCTION gw_notify_imported_hash_costs_changed();

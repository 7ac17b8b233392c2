-- The DNS look-ups an organization's owners asked for (CONTRACT §31: at most 10 per organization
-- per hour, on every instance together): counted and written under the organization's row lock, so
-- parallel requests on several instances cannot pass the limit. Rows older than an hour count for
-- nothing; the hourly clean-up removes them (storage/expiredRows.ts is not involved: the verify
-- route deletes its organization's old rows as it writes a new one).
-- Expand-only: a new table, which the previous release neither reads nor writes.
CREATE TABLE org_domain_lookups (
  org_id integer NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  at timestamptz NOT NULL
);
CREATE INDEX org_domain_lookups_by_org ON org_domain_lookups (org_id, at);

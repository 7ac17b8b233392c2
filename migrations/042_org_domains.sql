-- An organization's domains (CONTRACT §31): claimed by an owner, verified by a DNS TXT record or by
-- an operator, re-checked daily. Created before the SAML and SCIM parts that read it, so that both
-- rely on one definition of "a verified domain of the organization".
-- `domain` is stored lower-case, as its IDNA A-label, without a trailing dot (the code normalizes).
-- A domain is verified by at most one organization: the partial unique index, not the code, holds
-- that under concurrent verifications across instances. A pending claim by several organizations
-- is allowed (each has its own TXT value); the first to verify wins, the others then get 409.
-- Expand-only: a new table, which the previous release neither reads nor writes.
CREATE TABLE org_domains (
  org_id integer NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  domain text NOT NULL,
  status text NOT NULL CHECK (status IN ('pending', 'verified', 'unverified')),
  txt_value text NOT NULL,
  verified_by text CHECK (verified_by IN ('dns', 'operator')),
  verified_at timestamptz,
  last_checked_at timestamptz,
  -- Consecutive daily re-checks that found the record gone (NXDOMAIN or another value); resolver
  -- errors do not count. At 3 the domain becomes unverified.
  missed_checks integer NOT NULL DEFAULT 0,
  expires_at timestamptz NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (org_id, domain)
);
CREATE UNIQUE INDEX org_domains_verified_once ON org_domains (domain) WHERE status = 'verified';

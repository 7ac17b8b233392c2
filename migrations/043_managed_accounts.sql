-- Accounts an organization manages (CONTRACT §31, "Whose account", "Deprovisioning"): the ones its
-- SAML sign-in or its SCIM directory created. Deprovisioning reads it to tell such an account
-- (deactivated when it belongs to no other organization) from one its owner made and only linked;
-- SCIM reads it before changing an account's email. A linked account never gets a row: whoever
-- registered it keeps it. The row goes with the organization or the account.
-- SAML links (connection, NameID) are user_identities rows (019) with provider 'saml' and issuer
-- 'saml:<connection id>': the user sees them with their other links, and the "provider links"
-- a claim removes are one table.
-- Expand-only: a new table and a wider CHECK, which the previous release neither reads nor writes.
CREATE TABLE org_managed_accounts (
  org_id integer NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  user_id integer NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  created_by text NOT NULL CHECK (created_by IN ('saml', 'scim')),
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (org_id, user_id)
);
CREATE INDEX org_managed_accounts_by_user ON org_managed_accounts (user_id);

-- CONTRACT §31: a SCIM token acts as `scim` (actor_id: the token's id), beside §24's actors.
ALTER TABLE audit_events DROP CONSTRAINT IF EXISTS audit_events_actor_check;
ALTER TABLE audit_events ADD CONSTRAINT audit_events_actor_check
  CHECK (actor IN ('user', 'admin', 'cli', 'console', 'operator', 'billing', 'system', 'scim')) NOT VALID;

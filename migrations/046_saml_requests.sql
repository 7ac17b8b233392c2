-- SAML sign-ins under way and assertions already accepted (CONTRACT §31), both shared by every
-- instance. A request is the AuthnRequest's ID (the IdP's InResponseTo) with where the browser
-- goes back; RelayState is a random reference to it, stored as SHA-256 (never a URL). It lives
-- 10 minutes and is used up by one conditional UPDATE, so of two ACS posts on two instances
-- exactly one goes on. An accepted assertion's ID is inserted with ON CONFLICT DO NOTHING under
-- its primary key: a replay on any instance finds it, until its NotOnOrAfter.
-- `method` on a login code: how its sign-in went (saml: login.succeeded's data.method).
-- Expand-only: new tables and nullable columns, which the previous release neither reads nor writes.
CREATE TABLE saml_requests (
  relay_hash text PRIMARY KEY,
  request_id text NOT NULL UNIQUE,
  connection_id text NOT NULL REFERENCES saml_connections (id) ON DELETE CASCADE,
  return_to text NOT NULL,
  app_challenge text NOT NULL,
  expires_at timestamptz NOT NULL,
  used_at timestamptz
);
CREATE INDEX saml_requests_by_expiry ON saml_requests (expires_at);
CREATE TABLE saml_seen_assertions (
  connection_id text NOT NULL,
  assertion_id text NOT NULL,
  expires_at timestamptz NOT NULL,
  PRIMARY KEY (connection_id, assertion_id)
);
CREATE INDEX saml_seen_assertions_by_expiry ON saml_seen_assertions (expires_at);
ALTER TABLE oidc_login_codes ADD COLUMN method text;

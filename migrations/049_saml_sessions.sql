-- How a sign-in through an organization's SAML connection went on (CONTRACT §31): the connection
-- is kept on the login code the ACS hands the application, on the mfa_token of a user who still
-- owes a second factor, and on the session the exchange starts, so that turning `enforce` on ends
-- the domain's sessions "that did not start through the connection" and keeps those that did.
-- The login code also keeps the sign-in's `amr` (space-separated, as sessions.amr): `fed mfa` when
-- organizations.sso.trustIdpMfa takes the IdP's MFA for aal2; NULL is `fed`, as before.
-- No foreign key: a connection's id is random and never reused, and a session keeps how it began
-- after its connection is deleted (enforce ends with it; a new connection has another id).
-- Expand-only: nullable columns, which the previous release neither reads nor writes.
ALTER TABLE oidc_login_codes ADD COLUMN amr text, ADD COLUMN saml_connection_id text;
ALTER TABLE mfa_tokens ADD COLUMN saml_connection_id text;
ALTER TABLE sessions ADD COLUMN saml_connection_id text;

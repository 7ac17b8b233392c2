-- An organization's SAML 2.0 connection (CONTRACT §31): made from the IdP's metadata XML (never
-- fetched by the gateway), one per organization. `id` is random and public (it names the
-- connection's SP entity ID and ACS URL, so that an Audience names one connection and an id tells
-- nothing about the organization's). The SP key pair is the gateway's own, made per connection:
-- the private key is encrypted at rest with the TOTP secrets' key (CONTRACT §14), the certificate
-- is published in the SP metadata. The IdP's signing certificates are kept as PEM, every one of
-- the metadata's (a rollover lists two).
-- Expand-only: a new table, which the previous release neither reads nor writes.
CREATE TABLE saml_connections (
  id text PRIMARY KEY,
  org_id integer NOT NULL UNIQUE REFERENCES organizations (id) ON DELETE CASCADE,
  metadata_xml text NOT NULL,
  idp_entity_id text NOT NULL,
  idp_sso_url text NOT NULL,
  idp_certificates jsonb NOT NULL,
  want_requests_signed boolean NOT NULL,
  settings jsonb NOT NULL,
  sp_key_encrypted text NOT NULL,
  sp_certificate text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);

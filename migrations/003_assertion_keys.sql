-- Ed25519 keys that sign x-gateway-assertion (CONTRACT §3), shared by every instance.
-- A key is 'next' (published, not yet signing), then 'current' (signing), then 'retired'
-- (published a little longer, until every assertion it signed has expired). Publishing the next
-- key ahead of time means an upstream's cached JWKS already knows a key when it starts signing.
CREATE TABLE assertion_keys (
  kid text PRIMARY KEY,
  state text NOT NULL CHECK (state IN ('next', 'current', 'retired')),
  -- NULL once retired: a key that will never sign again keeps no private part at rest.
  private_jwk jsonb,
  public_jwk jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  activated_at timestamptz,
  retired_at timestamptz,
  CHECK (state = 'retired' OR private_jwk IS NOT NULL)
);
-- At most one current and one next key: two instances creating them at once end with one each.
CREATE UNIQUE INDEX assertion_keys_one_per_live_state ON assertion_keys (state) WHERE state IN ('next', 'current');

-- Every instance holds the keys in memory; this tells them a rotation happened, whoever made it.
CREATE FUNCTION gw_notify_assertion_keys_changed() RETURNS trigger AS $$
BEGIN
  PERFORM pg_notify('gw_assertion_keys_changed', '');
  RETURN NULL;
END
$$ LANGUAGE plpgsql;

CREATE TRIGGER assertion_keys_changed AFTER INSERT OR UPDATE OR DELETE ON assertion_keys
  FOR EACH STATEMENT EXECUTE FUNCTION gw_notify_assertion_keys_changed();

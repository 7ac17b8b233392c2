-- Requests and denials per API key per UTC day (CONTRACT §21: GET /api/v1/user/api-keys/{id}/usage).
-- Each instance counts in memory, off the request path, and adds its counts here in batches
-- (storage/apiKeyUsage.ts): every flush adds to the row, so instances sum exactly.
-- No foreign key: `TRUNCATE api_tokens` (every key revoked at once in an incident, 006) must keep
-- working as written. The triggers below go with the keys instead.
CREATE TABLE api_key_usage (
  key_id bigint NOT NULL,
  day date NOT NULL,
  requests bigint NOT NULL DEFAULT 0,
  denied bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (key_id, day)
);

CREATE FUNCTION gw_api_key_usage_deleted() RETURNS trigger AS $$
BEGIN
  IF TG_OP = 'TRUNCATE' THEN
    TRUNCATE api_key_usage;
  ELSE
    DELETE FROM api_key_usage WHERE key_id = OLD.id;
  END IF;
  RETURN NULL;
END
$$ LANGUAGE plpgsql;
CREATE TRIGGER api_key_usage_of_deleted_key AFTER DELETE ON api_tokens FOR EACH ROW EXECUTE FUNCTION gw_api_key_usage_deleted();
CREATE TRIGGER api_key_usage_of_truncated_keys AFTER TRUNCATE ON api_tokens FOR EACH STATEMENT EXECUTE FUNCTION gw_api_key_usage_deleted();

-- Instances cache a key with its expiry and scopes (storage/identityCache.ts). A roll moves a key's
-- expires_at (to now, with no grace), and an operator may change either by hand: like a
-- revocation, the change must reach every instance, not wait for the entry to be evicted.
DROP TRIGGER api_tokens_revoked ON api_tokens;
CREATE TRIGGER api_tokens_revoked AFTER UPDATE ON api_tokens FOR EACH ROW
  WHEN (OLD.revoked IS DISTINCT FROM NEW.revoked OR OLD.user_id IS DISTINCT FROM NEW.user_id
        OR OLD.token_hash IS DISTINCT FROM NEW.token_hash OR OLD.expires_at IS DISTINCT FROM NEW.expires_at
        OR OLD.scopes IS DISTINCT FROM NEW.scopes)
  EXECUTE FUNCTION gw_notify_api_token_changed();

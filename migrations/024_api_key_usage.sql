-- Requests and denials per API key per UTC day (CONTRACT §21: GET /api/v1/user/api-keys/{id}/usage).
-- Each instance counts in memory, off the request path, and adds its counts here in batches
-- (storage/apiKeyUsage.ts): every flush adds to the row, so instances sum exactly.
CREATE TABLE api_key_usage (
  key_id bigint NOT NULL REFERENCES api_tokens (id) ON DELETE CASCADE,
  day date NOT NULL,
  requests bigint NOT NULL DEFAULT 0,
  denied bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (key_id, day)
);

-- Instances cache a key with its expiry and scopes (storage/identityCache.ts). A roll moves a key's
-- expires_at (to now, with no grace), and an operator may change either by hand: like a
-- revocation, the change must reach every instance, not wait for the entry to be evicted.
DROP TRIGGER api_tokens_revoked ON api_tokens;
CREATE TRIGGER api_tokens_revoked AFTER UPDATE ON api_tokens FOR EACH ROW
  WHEN (OLD.revoked IS DISTINCT FROM NEW.revoked OR OLD.user_id IS DISTINCT FROM NEW.user_id
        OR OLD.token_hash IS DISTINCT FROM NEW.token_hash OR OLD.expires_at IS DISTINCT FROM NEW.expires_at
        OR OLD.scopes IS DISTINCT FROM NEW.scopes)
  EXECUTE FUNCTION gw_notify_api_token_changed();

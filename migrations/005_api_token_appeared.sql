-- Instances also remember key hashes that matched no key (src/guards/identityCache.ts), so that a
-- client sending made-up keys does not cost a query each. Such a memory must hear of a key that
-- comes into being, however it was made: an INSERT (the gateway's, or an operator importing keys)
-- or an UPDATE that gives a row another hash now announces the new hash too. (Un-revoking a row,
-- or moving it to another user, keeps its hash, which 001's trigger already announces.)
CREATE OR REPLACE FUNCTION gw_notify_api_token_changed() RETURNS trigger AS $$
BEGIN
  IF TG_OP <> 'INSERT' THEN
    PERFORM pg_notify('gw_api_token_changed', OLD.token_hash);
  END IF;
  IF TG_OP = 'INSERT' OR (TG_OP = 'UPDATE' AND NEW.token_hash IS DISTINCT FROM OLD.token_hash) THEN
    PERFORM pg_notify('gw_api_token_changed', NEW.token_hash);
  END IF;
  RETURN NULL;
END
$$ LANGUAGE plpgsql;

CREATE TRIGGER api_tokens_inserted AFTER INSERT ON api_tokens FOR EACH ROW
  EXECUTE FUNCTION gw_notify_api_token_changed();

-- TRUNCATE fires no row trigger, so emptying users or api_tokens (revoking every key at once in
-- an incident, resetting a staging database) announced nothing, and every instance went on
-- serving the users and keys it had cached. This tells every instance to forget them all, and,
-- for users, to drop today's daily gates in Redis (src/guards/identityCache.ts).
CREATE FUNCTION gw_notify_identities_truncated() RETURNS trigger AS $$
BEGIN
  PERFORM pg_notify('gw_identities_truncated', TG_TABLE_NAME);
  RETURN NULL;
END
$$ LANGUAGE plpgsql;

CREATE TRIGGER users_truncated AFTER TRUNCATE ON users
  FOR EACH STATEMENT EXECUTE FUNCTION gw_notify_identities_truncated();
CREATE TRIGGER api_tokens_truncated AFTER TRUNCATE ON api_tokens
  FOR EACH STATEMENT EXECUTE FUNCTION gw_notify_identities_truncated();

-- Instances also remember ids that named no user. An id can come (back) into being: after
-- TRUNCATE ... RESTART IDENTITY, an INSERT with an explicit id, an UPDATE of the id. As 005 does
-- for key hashes, the new id is announced too.
CREATE OR REPLACE FUNCTION gw_notify_user_changed() RETURNS trigger AS $$
BEGIN
  IF TG_OP <> 'INSERT' THEN
    PERFORM pg_notify('gw_user_changed', OLD.id::text);
  END IF;
  IF TG_OP = 'INSERT' OR (TG_OP = 'UPDATE' AND NEW.id IS DISTINCT FROM OLD.id) THEN
    PERFORM pg_notify('gw_user_changed', NEW.id::text);
  END IF;
  RETURN NULL;
END
$$ LANGUAGE plpgsql;

CREATE TRIGGER users_inserted AFTER INSERT ON users FOR EACH ROW
  EXECUTE FUNCTION gw_notify_user_changed();

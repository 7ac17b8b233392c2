-- Tokens older than the last credential change are refused (CONTRACT §33). A password change or
-- reset, TOTP confirmed or removed, a passkey removed, "sign out everywhere" and an operator's
-- session revocation add one to the user's credential generation; access tokens carry the
-- generation they were minted under (`gen`), and one minted under an older generation is refused.
-- `iat` cannot do it: it is in whole seconds, and a token minted in the second of a change would
-- pass. Instances cache users with it, so a change is announced like a plan change (001): every
-- instance drops the user and reads the new generation within a second, with no query per request.
-- Expand-only: a column with a default the previous release neither reads nor writes (its tokens,
-- without `gen`, count as generation 0 until the user's generation moves).
ALTER TABLE users ADD COLUMN credential_generation integer NOT NULL DEFAULT 0;
CREATE TRIGGER users_credentials_changed AFTER UPDATE ON users FOR EACH ROW
  WHEN (OLD.credential_generation IS DISTINCT FROM NEW.credential_generation)
  EXECUTE FUNCTION gw_notify_user_changed();

-- API keys for a public API (CONTRACT §21): several per user, each with a name, optional scopes
-- and expiry, and the first characters of the key (`start`) to recognise it by. Keys made before
-- are the user's `default` key, without scopes, expiry or start. A rolled key (rolled_at) stays
-- valid until its expires_at and no longer counts toward apiKeys.maxPerOwner.
ALTER TABLE api_tokens ADD COLUMN name text NOT NULL DEFAULT 'default';
ALTER TABLE api_tokens ADD COLUMN scopes text[];
ALTER TABLE api_tokens ADD COLUMN expires_at timestamptz;
ALTER TABLE api_tokens ADD COLUMN start text;
ALTER TABLE api_tokens ADD COLUMN rolled_at timestamptz;

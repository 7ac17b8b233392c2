-- Users without a password (CONTRACT §14, §15): an account made by an identity provider has none
-- until its user sets one. Login refuses such an account as it refuses a wrong password.
ALTER TABLE users ALTER COLUMN password_hash DROP NOT NULL;

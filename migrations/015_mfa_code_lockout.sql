-- Wrong second-factor codes (CONTRACT §14): 10 for a user within 15 minutes lock code
-- verification for that user for 15 minutes, across instances (one conditional UPDATE counts).
-- failures_since: the start of the current 15-minute window; codes_locked_until: the lock's end.
ALTER TABLE mfa_totp ADD COLUMN code_failures integer NOT NULL DEFAULT 0;
ALTER TABLE mfa_totp ADD COLUMN failures_since timestamptz;
ALTER TABLE mfa_totp ADD COLUMN codes_locked_until timestamptz;

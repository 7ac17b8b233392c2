-- Sign-in links by email (CONTRACT §14): a third purpose of email_tokens, 15 minutes, single use,
-- kept as the SHA-256 of the token like the others.
ALTER TABLE email_tokens DROP CONSTRAINT email_tokens_purpose_check;
ALTER TABLE email_tokens ADD CONSTRAINT email_tokens_purpose_check CHECK (purpose IN ('reset', 'verify', 'magic'));

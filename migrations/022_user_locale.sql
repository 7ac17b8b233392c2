-- The user's language for mails (CONTRACT §20): set at register from a `locale` field or
-- Accept-Language, changed with PATCH /api/v1/user/me. NULL: none chosen, mails follow
-- errors.language, else the language of the request that asked for the mail.
ALTER TABLE users ADD COLUMN locale text;

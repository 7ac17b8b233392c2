-- Whether the provider vouched for the account's address when it signed in (email_verified for
-- that very address). A link it did not vouch for may be someone else's who took the address first
-- (pre-hijacking): it loses its standing when the mailbox owner takes the account (a sign-in or
-- reset link, src/auth/links.ts). Links made before this column: vouched when the account's address
-- is verified and is the one the provider asserted, the nearest this database can tell.
ALTER TABLE user_identities ADD COLUMN vouched boolean NOT NULL DEFAULT false;
UPDATE user_identities ui SET vouched = true
  FROM users u WHERE u.id = ui.user_id AND u.email_verified_at IS NOT NULL AND ui.email = u.email;

// What an email must be to be an account's (CONTRACT §8, §19, §26): one mailbox, no control
// character, nothing an upstream could decode into another address; and the form it is stored
// and looked up in. Beneath everything that takes an email: auth, the admin API, the identity
// headers.

const MAX_EMAIL_LENGTH = 320;
// RFC 5321's limit on a local part, in octets (UTF-8, RFC 6531).
const MAX_LOCAL_OCTETS = 64;
// Control characters (NUL, CR, LF, DEL, C1) are no part of an address and could never be sent in
// x-user-email: accepted, `a@b.test\r\nx-user-id: 1` would lock its owner out of every proxied
// route (CONTRACT §8). U+FFFD, and a lone surrogate (stored as U+FFFD), stand for bytes that were
// not text: not the address typed. `%` would let one address pass for another once an upstream
// percent-decodes x-user-email: `%c5%82ukasz@x.pl` (sent as is) and `łukasz@x.pl` (sent as
// `%C5%82ukasz@x.pl`) both read `łukasz@x.pl`.
const UNFIT_FOR_EMAIL = /[\p{Cc}\p{Cs}\uFFFD%]/u;

// One mailbox, `local@domain` (RFC 5321 §4.1.2 with RFC 6531's UTF-8), and nothing a mail library
// or an upstream would read as more: no display name (`ceo@bank.test <attacker@evil.test>` mails
// the second), no list (`a@x.test,b@y.test` mails both), comment or group (CONTRACT §19).
// Non-ASCII letters are welcome (`łukasz@x.pl`); spaces, separators (U+2028, U+2029) and
// invisible format characters are not. Nor is a domain literal (`eve@[127.0.0.1]`,
// `a@[IPv6:::1]`, CONTRACT §26): it names a host, not a domain, so mail to it goes wherever the
// literal points (the gateway's own network included), past domain allow-lists and MX policy.
const NON_ASCII = String.raw`[^\x00-\x7f\p{Z}\p{C}]`;
const ATEXT = String.raw`(?:[A-Za-z0-9!#$&'*+\-/=?^_\x60{|}~]|${NON_ASCII})`;
const DOT_STRING = String.raw`${ATEXT}+(?:\.${ATEXT}+)*`;
// A quoted local part (`"john..doe"@x.test`) holds what a dot-string may, dots anywhere: never
// the characters that split or name addresses (`,` `<` `>` `;` `:` `@`), spaces or escapes.
const QUOTED = String.raw`"(?:${ATEXT}|\.)+"`;
const LABEL = String.raw`(?:[A-Za-z0-9]|${NON_ASCII})(?:(?:[A-Za-z0-9-]|${NON_ASCII})*(?:[A-Za-z0-9]|${NON_ASCII}))?`;
const MAILBOX = new RegExp(String.raw`^(${DOT_STRING}|${QUOTED})@(${LABEL}(?:\.${LABEL})*)$`, 'u');

/** Whether `email` is exactly one mailbox that can be stored and mailed (CONTRACT §8, §19, §26). */
export function isSingleMailbox(email: string): boolean {
  if (email.length > MAX_EMAIL_LENGTH || UNFIT_FOR_EMAIL.test(email)) return false;
  const match = MAILBOX.exec(email);
  if (!match) return false;
  const [, local] = match as unknown as [string, string];
  return Buffer.byteLength(local) <= MAX_LOCAL_OCTETS;
}

/** The email as stored (trimmed, lower-cased), or undefined when it cannot be an account's. */
export function normalizeEmail(raw: string): string | undefined {
  const email = lookupForm(raw);
  return isSingleMailbox(email) ? email : undefined;
}

/** How an address is looked up (login, support): trimmed and lower-cased, whatever its shape. */
export function lookupForm(raw: string): string {
  return raw.trim().toLowerCase();
}

/** Postgres text cannot hold a NUL character (it refuses the query): no account has one in its email. */
export function storable(text: string): boolean {
  return !text.includes('\0');
}

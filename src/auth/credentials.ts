// What an email or a new password must be, wherever one comes in (register, forgot, change, reset).
import { passwordTooShortMessage, type Denial } from '../errors.js';
import { isTooLong } from './passwords.js';

const MAX_EMAIL_LENGTH = 320;
// Control characters (NUL, CR, LF, DEL, C1) are no part of an address and could never be sent in
// x-user-email: accepted, `a@b.test\r\nx-user-id: 1` would lock its owner out of every proxied
// route (CONTRACT §8). U+FFFD, and a lone surrogate (stored as U+FFFD), stand for bytes that were
// not text: not the address typed. `%` would let one address pass for another once an upstream
// percent-decodes x-user-email: `%c5%82ukasz@x.pl` (sent as is) and `łukasz@x.pl` (sent as
// `%C5%82ukasz@x.pl`) both read `łukasz@x.pl`.
const UNFIT_FOR_EMAIL = /[\p{Cc}\p{Cs}\uFFFD%]/u;

/** The email as stored (trimmed, lower-cased), or undefined when it cannot be an account's. */
export function normalizeEmail(raw: string): string | undefined {
  const email = raw.trim().toLowerCase();
  return email && email.includes('@') && email.length <= MAX_EMAIL_LENGTH && !UNFIT_FOR_EMAIL.test(email) ? email : undefined;
}

/** Postgres text cannot hold a NUL character (it refuses the query): no account has one in its email. */
export function storable(text: string): boolean {
  return !text.includes('\0');
}

/** Why a new password is refused, or undefined. Counted in characters (code points), as a person counts them. */
export function newPasswordDenial(password: string, minLength: number): Denial | undefined {
  if ([...password].length < minLength) return { code: 'passwordTooShort', message: passwordTooShortMessage(minLength) };
  if (isTooLong(password)) return { code: 'passwordTooLong' };
  return undefined;
}

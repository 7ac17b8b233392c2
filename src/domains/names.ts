// Domain names as CONTRACT §31 stores them: lower-case, the IDNA A-label form (node:url's
// domainToASCII, WHATWG's UTS #46 processing, the form DNS and mail use), no trailing dot. One
// form, so that `Bücher.example`, `xn--bcher-kva.example.` and `XN--BCHER-KVA.EXAMPLE` are one
// claim, and the unique index of migration 042 holds across all of them.
import { isIP } from 'node:net';
import { domainToASCII } from 'node:url';
import { parse } from 'tldts';

const LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;
const MAX_NAME = 253;

/** The stored form of a domain name, or undefined when it is none (empty, a label too long, a character no host name has). An IP address is returned as is: the caller refuses it. */
export function normalizeDomain(raw: unknown): string | undefined {
  if (typeof raw !== 'string' || raw.length > 1024) return undefined;
  const trimmed = raw.trim().replace(/\.$/, '');
  if (isIP(trimmed) || isIP(trimmed.replace(/^\[(.*)\]$/, '$1'))) return trimmed.toLowerCase();
  const ascii = domainToASCII(trimmed).toLowerCase();
  if (!ascii || ascii.length > MAX_NAME) return undefined;
  const labels = ascii.split('.');
  return labels.length >= 2 && labels.every((label) => LABEL.test(label)) ? ascii : undefined;
}

/** The stored form of an email's domain (emails are stored lower-case, §7), or undefined. */
export function emailDomain(email: string): string | undefined {
  const at = email.lastIndexOf('@');
  return at < 0 ? undefined : normalizeDomain(email.slice(at + 1));
}

/**
 * Whether an organization may claim the (normalized) domain: not an IP address, not a public
 * suffix (the Public Suffix List tldts ships, its private section included: `github.io` is
 * everyone's), not a public mail domain.
 */
export function claimable(domain: string, publicMail: ReadonlySet<string>): boolean {
  // An IP address, bracketed or not, has no public suffix in tldts' reading (names.test.ts holds it).
  const parsed = parse(domain, { allowPrivateDomains: true });
  if (!parsed.publicSuffix || parsed.publicSuffix === domain) return false;
  return !publicMail.has(domain);
}

/** The TXT record's name a claim of `domain` is proven by. */
export const txtNameOf = (domain: string) => `_gateway-verify.${domain}`;

// Public mail domains (CONTRACT §31): a domain anyone can have an address at is no organization's,
// so none may claim it; whoever verified `gmail.com` would otherwise take every Gmail user's SAML
// and SCIM. The shipped list holds the large free providers; organizations.sso.publicMailDomains
// adds an operator's own (one a line, `#` starts a comment), read once at start.
import { readFile } from 'node:fs/promises';
import { normalizeDomain } from './names.js';

/** The free mail providers most addresses are at, and their country variants. */
export const SHIPPED_PUBLIC_MAIL_DOMAINS: readonly string[] = [
  'gmail.com', 'googlemail.com', 'outlook.com', 'hotmail.com', 'hotmail.fr', 'hotmail.co.uk', 'live.com', 'live.fr', 'msn.com',
  'yahoo.com', 'yahoo.fr', 'yahoo.co.uk', 'yahoo.de', 'yahoo.co.jp', 'ymail.com', 'rocketmail.com', 'aol.com', 'aim.com',
  'icloud.com', 'me.com', 'mac.com', 'proton.me', 'protonmail.com', 'pm.me', 'tutanota.com', 'tuta.io', 'gmx.com', 'gmx.de',
  'gmx.net', 'gmx.fr', 'web.de', 't-online.de', 'mail.com', 'mail.ru', 'yandex.com', 'yandex.ru', 'zoho.com', 'fastmail.com',
  'hey.com', 'qq.com', '163.com', '126.com', 'naver.com', 'orange.fr', 'wanadoo.fr', 'free.fr', 'sfr.fr', 'laposte.net',
  'libero.it', 'virgilio.it', 'seznam.cz', 'wp.pl', 'o2.pl', 'interia.pl', 'rediffmail.com', 'comcast.net', 'verizon.net',
  'att.net', 'sbcglobal.net', 'btinternet.com', 'sky.com', 'bluewin.ch', 'mailbox.org', 'posteo.de', 'duck.com',
];

/** The domains of a list file's text; `problems` names each line that is no domain. */
export function parseDomainList(text: string): { domains: string[]; problems: string[] } {
  const domains: string[] = [];
  const problems: string[] = [];
  for (const [i, raw] of text.split(/\r?\n/).entries()) {
    const line = raw.replace(/#.*/, '').trim();
    if (!line) continue;
    const domain = normalizeDomain(line);
    if (domain) domains.push(domain);
    else problems.push(`line ${i + 1}: ${JSON.stringify(line.slice(0, 80))} is not a domain name`);
  }
  return { domains, problems };
}

/** The shipped list with the file's domains (config/files.ts checks the file can be read; its lines are checked here, at start). */
export async function publicMailDomains(file: string | undefined): Promise<ReadonlySet<string>> {
  const extra = file ? parseDomainList(await readFile(file, 'utf8')) : { domains: [], problems: [] };
  // A line that is no domain would silently protect nothing: the start fails and names it.
  if (extra.problems.length) throw new Error(`organizations.sso.publicMailDomains: ${file}: ${extra.problems.slice(0, 3).join('; ')}`);
  return new Set([...SHIPPED_PUBLIC_MAIL_DOMAINS, ...extra.domains]);
}

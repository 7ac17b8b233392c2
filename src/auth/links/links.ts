// Single-use links sent by email (CONTRACT §13, §14): password reset, email verification and
// sign-in. A link carries 32 random bytes; only their SHA-256 is stored (email_tokens), so a copy
// of the database opens no account. The raw token exists in the mail (or in `gateway users
// reset-link`'s output) and nowhere else: never in a log.
import type { IncomingHttpHeaders } from 'node:http';
import { changeAccount } from '../../account/change.js';
import type { Audit } from '../../audit.js';
import type { Config } from '../../config/schema.js';
import { mailLinks } from '../../config/schema/portal.js';
import type { Database, Queryable } from '../../storage/database/index.js';
import { type Client, insertEmailToken, issuedSince, type LinkPurpose, removeUnvouchedLinks, revokeAllForUser, users, useUp } from '../../storage/accounts/index.js';
import type { MailWords } from '../../mail/index.js';
import type { Mail, Mailer } from '../mail.js';
import type { SsoGate } from '../providers/saml/enforce.js';
import { randomToken, sha256Hex } from '../../credentials/digest.js';

export type { LinkPurpose };

/**
 * How long a link works: a reset or sign-in link briefly (each hands over the account), a
 * verification one a day.
 */
export const LINK_TTL_MS: Record<LinkPurpose, number> = { reset: 30 * 60_000, verify: 24 * 3_600_000, magic: 15 * 60_000 };
/**
 * At most one mail per purpose per user in this long: requests from many addresses (each under the
 * auth rate limit) cannot fill someone's inbox. A link sent earlier still works meanwhile.
 */
export const LINK_MAIL_INTERVAL_MS = 60_000;

/** The application's page each kind of link opens (a URL with {token}); a purpose without one sends none. */
export type LinkTemplates = Partial<Record<LinkPurpose, string>>;

export function linkTemplates(config: Pick<Config, 'mail' | 'auth' | 'portal'>): LinkTemplates {
  // Each the setting, else the portal's page (CONTRACT §30).
  const links = mailLinks(config);
  return { reset: links.reset, verify: links.verify, magic: links.magic };
}

/**
 * A new link for the user: stores its hash, returns the URL (the template with the token in it).
 * `ttlMs`: the purpose's own unless said (an operator's invitation is a reset link valid 7 days).
 */
export async function makeLink(db: Queryable, user: { id: number; email: string }, purpose: LinkPurpose, template: string, now: Date, ttlMs = LINK_TTL_MS[purpose]): Promise<string> {
  const token = randomToken(32);
  await insertEmailToken(db, user.id, purpose, sha256Hex(token), user.email, now, new Date(now.getTime() + ttlMs));
  return template.replaceAll('{token}', token);
}

/** The mail that carries a link, in `language` (mail/words.ts); undefined: no text for it. */
export function linkMail(words: MailWords, purpose: LinkPurpose, language: string, email: string, url: string): Mail | undefined {
  const rendered = words.compose(purpose, language, { link: url, email, expires_in_minutes: LINK_TTL_MS[purpose] / 60_000 });
  return rendered && { to: email, ...rendered };
}

export interface LinkMailDeps {
  db: Database;
  mailer: Mailer;
  templates: LinkTemplates;
  /** The mails' words and the choice of their language. */
  words: MailWords;
  clock: () => Date;
  /** Enforcement (CONTRACT §31): absent, nothing is enforced. */
  sso?: SsoGate;
}

/**
 * Queues a link mail, off the request path: `find` names the account (undefined, or inactive: no
 * mail) and runs in the queue too, so the request's answer and timing do not depend on it.
 */
export function queueLinkMail(
  deps: LinkMailDeps, purpose: LinkPurpose, userId: number | undefined, find: () => Promise<{ id: number; email: string; is_active: number } | undefined>, headers: IncomingHttpHeaders,
): void {
  const { mailer, words } = deps;
  const template = deps.templates[purpose];
  if (!template) return;
  // Read now: the job runs after the request is answered. The user's locale, read in the job, comes first.
  const fallback = words.requestLanguage(headers);
  mailer.enqueue(purpose, userId, async () => {
    const found = await find();
    if (!found || found.is_active !== 1) return undefined;
    // An address that must sign in through its organization gets no sign-in or reset link (CONTRACT §31); the answer was the same.
    if ((purpose === 'magic' || purpose === 'reset') && (await deps.sso?.requiredFor(found.email))) return undefined;
    // The user's row locked (account/change.ts): of concurrent requests, on any instance, the first
    // makes the link and the others see it, so an account gets one mail a minute, not one each.
    const link = await changeAccount(deps, { userId: found.id, mode: 'update' }, async ({ tx, user, now }) => {
      if (user.is_active !== 1 || (await issuedSince(tx, user.id, purpose, new Date(now.getTime() - LINK_MAIL_INTERVAL_MS)))) return undefined;
      return { email: user.email, locale: await users.localeOf(tx, user.id), url: await makeLink(tx, user, purpose, template, now) };
    });
    return link && linkMail(words, purpose, words.languageFor(link.locale, fallback), link.email, link.url);
  });
}

/**
 * Uses the link up and runs `then` in one transaction, the user's row locked first
 * (account/change.ts). Undefined when the link was used meanwhile (of concurrent uses, one wins), or was sent
 * to an address that is no longer the account's.
 */
export async function useLink<T>(
  db: Database, clock: () => Date, token: string, purpose: LinkPurpose, userId: number, then: (tx: Queryable, user: users.User, now: Date) => Promise<T>,
): Promise<T | undefined> {
  return changeAccount({ db, clock }, { userId, mode: 'update' }, async ({ tx, user, now }) => {
    const used = await useUp(tx, sha256Hex(token), purpose, now);
    if (!used || used.email !== user.email) return undefined;
    return then(tx, user, now);
  });
}

/**
 * A link that hands over the account (a sign-in link, a password reset) came back from its mailbox:
 * the account is the mailbox owner's from now on. Someone may have taken the address first without
 * proving it (pre-hijacking): signed in through a provider that did not vouch for it, or registered
 * it with a password, and may still hold a session. So the links no provider vouched for go; and
 * when one went, or the address was not verified until now, every session ends and, unless the
 * link sets a password itself (a reset), the password set before goes too. Then the address is
 * verified. Run in useLink's transaction (the user's row locked).
 */
export async function mailboxTakesOver(tx: Queryable, user: users.User, now: Date, deps: { audit: Audit; client: Client; setsPassword: boolean }): Promise<void> {
  // The address proven is the user's doing; what the gateway ends because of it, its own rule's (system).
  const event = (type: 'oidc.unlinked' | 'email.verified' | 'session.revoked' | 'password.changed', data: Record<string, unknown> = {}) =>
    deps.audit.record({ type, actor: type === 'email.verified' ? 'user' : 'system', userId: user.id, ...deps.client, data }, tx);
  const firstProof = user.email_verified_at === null;
  const unlinked = await removeUnvouchedLinks(tx, user.id);
  for (const link of unlinked) await event('oidc.unlinked', { provider: link.provider, issuer: link.issuer, reason: 'mailbox_proven' });
  if (firstProof && (await users.markEmailVerified(tx, user.id, user.email, now))) await event('email.verified');
  if (!firstProof && unlinked.length === 0) return;
  const ended = await revokeAllForUser(tx, user.id, 'mailbox');
  // Whoever held the account before its mailbox's owner loses its access tokens too (CONTRACT §33);
  // the pair a magic link issues next for `user` is minted under the new generation.
  await users.endOlderTokens(tx, user);
  if (ended > 0) await event('session.revoked', { sessions: ended, reason: 'mailbox_proven' });
  if (!deps.setsPassword && (await users.removePassword(tx, user.id, now))) await event('password.changed', { removed: true, reason: 'mailbox_proven' });
}

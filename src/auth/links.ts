// Single-use links sent by email (CONTRACT §13): password reset and email verification. A link
// carries 32 random bytes; only their SHA-256 is stored (email_tokens), so a copy of the database
// opens no account. The raw token exists in the mail (or in `gateway users reset-link`'s output)
// and nowhere else: never in a log.
import type { Config } from '../config/schema.js';
import type { Database, Queryable } from '../storage/db.js';
import { insertEmailToken, issuedSince, type LinkPurpose } from '../storage/emailTokens.js';
import type { Mail, Mailer } from './mail.js';
import { randomToken, sha256Hex } from '../digest.js';

export type { LinkPurpose };

/** How long a link works: a reset link briefly (it hands over the account), a verification one a day. */
export const LINK_TTL_MS: Record<LinkPurpose, number> = { reset: 30 * 60_000, verify: 24 * 3_600_000 };
/**
 * At most one mail per purpose per user in this long: requests from many addresses (each under the
 * auth rate limit) cannot fill someone's inbox. A link sent earlier still works meanwhile.
 */
export const LINK_MAIL_INTERVAL_MS = 60_000;

export type LinkTemplates = Pick<NonNullable<Config['mail']>, 'resetUrl' | 'verifyUrl'>;

/** A new link for the user: stores its hash, returns the URL (the template with the token in it). */
export async function makeLink(db: Queryable, user: { id: number; email: string }, purpose: LinkPurpose, templates: LinkTemplates, now: Date): Promise<string> {
  const token = randomToken(32);
  await insertEmailToken(db, user.id, purpose, sha256Hex(token), user.email, now, new Date(now.getTime() + LINK_TTL_MS[purpose]));
  const template = purpose === 'reset' ? templates.resetUrl : templates.verifyUrl;
  return template.replaceAll('{token}', token);
}

/** The mail that carries a link: plain text, French. */
export function linkMail(purpose: LinkPurpose, email: string, url: string): Mail {
  if (purpose === 'reset') {
    return {
      to: email,
      subject: 'Réinitialisation de votre mot de passe',
      text: [
        'Bonjour,',
        '',
        `Une réinitialisation du mot de passe du compte ${email} a été demandée.`,
        'Pour choisir un nouveau mot de passe, ouvrez ce lien dans les 30 minutes :',
        '',
        url,
        '',
        'Ce lien ne fonctionne qu’une fois. Si vous n’êtes pas à l’origine de cette demande, ignorez ce message : votre mot de passe ne change pas.',
        '',
      ].join('\n'),
    };
  }
  return {
    to: email,
    subject: 'Confirmez votre adresse email',
    text: [
      'Bonjour,',
      '',
      `Pour confirmer que l’adresse ${email} est bien la vôtre, ouvrez ce lien dans les 24 heures :`,
      '',
      url,
      '',
      'Ce lien ne fonctionne qu’une fois. Si vous n’avez pas créé de compte, ignorez ce message.',
      '',
    ].join('\n'),
  };
}

export interface LinkMailDeps {
  db: Database;
  mailer: Mailer;
  templates: LinkTemplates | undefined;
  clock: () => Date;
}

/**
 * Queues a link mail, off the request path: `find` names the account (undefined, or inactive: no
 * mail) and runs in the queue too, so the request's answer and timing do not depend on it.
 */
export function queueLinkMail(deps: LinkMailDeps, purpose: LinkPurpose, userId: number | undefined, find: () => Promise<{ id: number; email: string; is_active: number } | undefined>): void {
  const { db, mailer, templates, clock } = deps;
  if (!templates) return;
  mailer.enqueue(purpose, userId, async () => {
    const user = await find();
    if (!user || user.is_active !== 1) return undefined;
    const now = clock();
    if (await issuedSince(db, user.id, purpose, new Date(now.getTime() - LINK_MAIL_INTERVAL_MS))) return undefined;
    return linkMail(purpose, user.email, await makeLink(db, user, purpose, templates, now));
  });
}

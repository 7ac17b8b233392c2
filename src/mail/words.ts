// The words of the account mails (CONTRACT §20): built-in French (the spec's, unchanged) and English
// for the link mails, the operator's templates over them, and which language a mail is in: the
// user's locale, else errors.language when it is fr or en, else (negotiate) the language of the
// request that asked for the mail, else French.
import type { IncomingHttpHeaders } from 'node:http';
import { negotiateLanguage, type ErrorStyle } from '../errors/index.js';
import { readMailTemplates, renderMail, type MailKind, type MailTemplate, type MailTemplates, type MailValues, type RenderedMail } from './templates.js';

const ONCE_FR = 'Ce lien ne fonctionne qu’une fois.';
const ONCE_EN = 'This link works once.';
const lines = (...text: string[]) => [...text, ''].join('\n');

/** The built-in texts: fr exactly as the gateway always sent them. */
const BUILT_IN: ReadonlyMap<string, ReadonlyMap<MailKind, MailTemplate>> = new Map([
  ['fr', new Map<MailKind, MailTemplate>([
    ['reset', { subject: 'Réinitialisation de votre mot de passe', text: lines('Bonjour,', '',
      'Une réinitialisation du mot de passe du compte {{email}} a été demandée.', 'Pour choisir un nouveau mot de passe, ouvrez ce lien dans les 30 minutes :', '',
      '{{link}}', '', `${ONCE_FR} Si vous n’êtes pas à l’origine de cette demande, ignorez ce message : votre mot de passe ne change pas.`) }],
    ['magic', { subject: 'Votre lien de connexion', text: lines('Bonjour,', '',
      'Une connexion au compte {{email}} a été demandée.', 'Pour vous connecter, ouvrez ce lien dans les 15 minutes :', '',
      '{{link}}', '', `${ONCE_FR} Si vous n’êtes pas à l’origine de cette demande, ignorez ce message : personne ne peut se connecter sans lui.`) }],
    ['verify', { subject: 'Confirmez votre adresse email', text: lines('Bonjour,', '',
      'Pour confirmer que l’adresse {{email}} est bien la vôtre, ouvrez ce lien dans les 24 heures :', '',
      '{{link}}', '', `${ONCE_FR} Si vous n’avez pas créé de compte, ignorez ce message.`) }],
    // The organization's name is its creator's words: quoted text, never in the subject (a line mail
    // lists show as the sender's), never a link (CONTRACT §22).
    ['org_invitation', { subject: 'Invitation à rejoindre une organisation', text: lines('Bonjour,', '',
      '{{inviter_email}} vous invite à rejoindre l’organisation « {{org_name}} » avec l’adresse {{email}}.', 'Pour accepter, ouvrez ce lien :', '',
      '{{link}}', '', `${ONCE_FR} Si vous ne vous attendiez pas à cette invitation, ignorez ce message.`) }],
    // An operator made the account (CONTRACT §24): the link sets its first password, within 7 days.
    ['account_invitation', { subject: 'Votre compte a été créé', text: lines('Bonjour,', '',
      'Un compte a été créé pour vous avec l’adresse {{email}}.', 'Pour choisir votre mot de passe, ouvrez ce lien dans les 7 jours :', '',
      '{{link}}', '', `${ONCE_FR} Si vous ne vous attendiez pas à ce compte, ignorez ce message.`) }],
  ])],
  ['en', new Map<MailKind, MailTemplate>([
    ['reset', { subject: 'Reset your password', text: lines('Hello,', '',
      'A password reset was requested for the account {{email}}.', 'To choose a new password, open this link within 30 minutes:', '',
      '{{link}}', '', `${ONCE_EN} If you did not ask for it, ignore this message: your password does not change.`) }],
    ['magic', { subject: 'Your sign-in link', text: lines('Hello,', '',
      'A sign-in to the account {{email}} was requested.', 'To sign in, open this link within 15 minutes:', '',
      '{{link}}', '', `${ONCE_EN} If you did not ask for it, ignore this message: no one can sign in without it.`) }],
    ['verify', { subject: 'Confirm your email address', text: lines('Hello,', '',
      'To confirm that the address {{email}} is yours, open this link within 24 hours:', '',
      '{{link}}', '', `${ONCE_EN} If you did not create an account, ignore this message.`) }],
    ['org_invitation', { subject: 'Invitation to join an organization', text: lines('Hello,', '',
      '{{inviter_email}} invites you to join the organization “{{org_name}}” with the address {{email}}.', 'To accept, open this link:', '',
      '{{link}}', '', `${ONCE_EN} If you did not expect this invitation, ignore this message.`) }],
    ['account_invitation', { subject: 'Your account was created', text: lines('Hello,', '',
      'An account was created for you with the address {{email}}.', 'To choose your password, open this link within 7 days:', '',
      '{{link}}', '', `${ONCE_EN} If you did not expect this account, ignore this message.`) }],
  ])],
]);

/** What `mail` of gateway.yaml says about the words (config/schema.ts), its folder resolved against the file. */
export interface MailWordsSettings {
  templates?: string;
  product?: string;
  from?: string;
}

/** {{product}}: mail.product, else the display name of mail.from, else auth-gateway. */
export function productName(settings: MailWordsSettings | undefined): string {
  if (settings?.product) return settings.product;
  const display = /^\s*"?([^"<]*?)"?\s*</.exec(settings?.from ?? '')?.[1]?.trim();
  return display || 'auth-gateway';
}

/** Thrown at start when `mail.templates` holds a file `gateway check` would refuse. */
export class MailTemplatesError extends Error {}

export class MailWords {
  /** The languages with mail texts: fr, en and the template folders'. */
  readonly languages: readonly string[];

  constructor(private readonly style: Pick<ErrorStyle, 'language'>, private readonly templates: MailTemplates, readonly product: string) {
    this.languages = [...new Set(['fr', 'en', ...templates.keys()])];
  }

  /** The language of a mail a request asks for, when its user chose none: errors.language, or the request's (negotiate). */
  requestLanguage(headers: IncomingHttpHeaders): string {
    if (this.style.language !== 'negotiate') return this.style.language;
    const header = headers['accept-language'];
    return negotiateLanguage(typeof header === 'string' ? header : undefined, this.languages, 'fr');
  }

  /** The user's locale when there are mail texts in it, else `fallback` (requestLanguage). */
  languageFor(locale: string | null, fallback: string): string {
    return locale !== null && this.languages.includes(locale) ? locale : fallback;
  }

  /** The mail of `kind` in `language` (the operator's template, else the built-in one, else French); undefined: no text for it. */
  compose(kind: MailKind, language: string, values: MailValues): RenderedMail | undefined {
    const template = this.templates.get(language)?.get(kind) ?? BUILT_IN.get(language)?.get(kind)
      ?? this.templates.get('fr')?.get(kind) ?? BUILT_IN.get('fr')!.get(kind);
    return template && renderMail(template, { product: this.product, ...values });
  }
}

/** The instance's mail words: the operator's templates read and checked (none: the built-in texts). */
export async function mailWordsOf(style: Pick<ErrorStyle, 'language'>, settings: MailWordsSettings | undefined): Promise<MailWords> {
  const read = settings?.templates ? await readMailTemplates(settings.templates) : { templates: new Map(), problems: [] };
  if (read.problems.length) throw new MailTemplatesError(`mail.templates: ${read.problems.join('; ')}`);
  return new MailWords(style, read.templates, productName(settings));
}

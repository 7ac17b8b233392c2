// mail: the account mails' relay and the links they carry (password reset, email verification,
// invitations); linkTemplate is also what auth.magicLink's url must be.
import { z } from 'zod';
import { isUrl, optionalText, text } from './values.js';

/** Hosts a plain-HTTP link may name: the operator's own machine (a laptop, a test), never the network. */
const LOOPBACK_HOSTS = new Set(['127.0.0.1', '[::1]', 'localhost']);
// A link's token hands over an account (CONTRACT §20): sent over plain HTTP it could be read on
// the way, so http:// is for loopback only.
export const linkTemplate = z.string().superRefine((text, ctx) => {
  if (!text.includes('{token}')) ctx.addIssue({ code: 'custom', message: 'expected a URL containing {token}, where the link\'s token goes' });
  else if (!isUrl(text.replaceAll('{token}', 'x'), /^https?:$/)) ctx.addIssue({ code: 'custom', message: `expected an http:// or https:// URL, got ${JSON.stringify(text)}` });
  else if (new URL(text.replaceAll('{token}', 'x')).protocol === 'http:' && !LOOPBACK_HOSTS.has(new URL(text.replaceAll('{token}', 'x')).hostname)) {
    ctx.addIssue({ code: 'custom', message: `expected an https:// URL (http:// only on 127.0.0.1, ::1 or localhost: the link's token would cross the network in clear), got ${JSON.stringify(text)}` });
  }
});

export const mailSchema = z.strictObject({
  // Empty (as `${SMTP_URL:-}` gives when unset): no mail is sent; `gateway users reset-link` still makes links.
  smtp: text.refine((url) => url === '' || isUrl(url, /^smtps?:$/), { message: 'expected an smtp:// or smtps:// URL (or nothing: no mail is sent)' })
    .meta({ examples: ['smtp://user:pass@smtp.example.com:587'], description: 'The SMTP relay: smtp://user:pass@host:587 (STARTTLS when offered) or smtps://user:pass@host:465; empty: no mail is sent.' }),
  from: text.meta({ examples: ['Gateway <no-reply@example.com>'], description: 'The sender of the mails, e.g. "Gateway <no-reply@example.com>"; needed with smtp.' }),
  resetUrl: linkTemplate.optional().meta({ examples: ['https://app.example.com/reset?token={token}'], description: "The application's password reset page, with {token} where the link's token goes; required unless portal.enabled (then the portal's page)." }),
  verifyUrl: linkTemplate.optional().meta({ examples: ['https://app.example.com/verify?token={token}'], description: "The application's email verification page, with {token} where the link's token goes; required unless portal.enabled (then the portal's page)." }),
  invitationUrl: linkTemplate.optional().meta({ examples: ['https://app.example.com/join?token={token}'], description: "The application's page that accepts an organization's invitation, with {token} where the link's token goes; required with organizations unless portal.enabled (then the portal's page)." }),
  templates: optionalText.meta({
    examples: ['./mail-templates'],
    description: 'A folder of <lang>/<kind>.subject.txt, <kind>.txt and optional <kind>.html (kinds verify, reset, '
      + 'magic, org_invitation, account_invitation) replacing the built-in texts (gateway check reads them).',
  }),
  product: optionalText.meta({ examples: ['Weather'], description: 'The product\'s name, {{product}} in mail templates; unset: the display name of from, else auth-gateway.' }),
}).meta({ description: 'Account mails (password reset, email verification and sign-in links), in the user\'s language. Without it, or with smtp empty, password/forgot and email/resend answer 503.' });

// Sign-in links by email (CONTRACT §14), under /api/v1/auth, registered only with auth.magicLink
// (without it both answer 404): POST /magic-link mails a 15-minute single-use link to an existing
// account, as enumeration-proof as password/forgot; POST /magic-link/verify turns it into a session
// (`amr: ["email"]`), or into the second-factor answer of a login for a user with TOTP.
import type { FastifyInstance } from 'fastify';
import { sendError, successBody } from '../../errors/index.js';
import { textField } from '../../http.js';
import type { Audit } from '../../audit.js';
import { emailTokens, users } from '../../storage/accounts/index.js';
import { normalizeEmail } from '../../credentials/emailAddress.js';
import { mailboxTakesOver, queueLinkMail, useLink, type LinkMailDeps } from './links.js';
import { answerOneFactorSignIn, signInByOneFactor } from '../signIn.js';
import { clientOf } from '../sessions.js';
import { sha256Hex } from '../../credentials/digest.js';
import type { Tokens } from '../../credentials/tokens.js';
import { sendSsoRequired } from '../providers/saml/enforce.js';
import { credentials, errors, message, mfaChallenge, tokenPair, type EndpointSchema } from '../../openapi.js';

export const MAGIC_LINK_AMR: readonly string[] = ['email'];

export interface MagicLinkRoutesDeps extends LinkMailDeps {
  tokens: Tokens;
  audit: Audit;
}

/** Each route's OpenAPI fragment (documentation only: src/openapi.ts), by handler. */
const DOCS = {
  requestLink: {
    tags: ['accounts'], summary: 'Mail a 15-minute sign-in link if the account exists (the same answer whatever the address); only with auth.magicLink', body: credentials(['email']),
    response: { 202: message, ...errors('emailInvalid', 'rateLimited', 'mailUnavailable') },
  },
  verifyLink: {
    tags: ['accounts'], summary: 'Sign in with a sign-in link\'s token (amr ["email"]): the token pair, or an mfa_token for POST /api/v1/auth/mfa/verify', body: credentials(['token']),
    response: { 200: tokenPair, ...errors('linkInvalid', 'rateLimited', 'storageUnavailable'), 403: mfaChallenge('ssoRequired') },
  },
} satisfies Record<string, EndpointSchema>;

export async function magicLinkRoutes(app: FastifyInstance, deps: MagicLinkRoutesDeps): Promise<void> {
  const { db, clock, audit, mailer } = deps;

  app.post('/magic-link', { schema: DOCS.requestLink }, async (request, reply) => {
    if (!mailer.enabled) return sendError(reply, 'mailUnavailable');
    const email = normalizeEmail(textField(request.body, 'email'));
    if (!email) return sendError(reply, 'emailInvalid');
    // As password/forgot: the lookup runs in the mail queue, so neither the answer nor its time
    // tells whether the account exists; an unknown address creates nothing and gets no mail.
    queueLinkMail(deps, 'magic', undefined, () => users.findByEmail(db, email), request.headers);
    return reply.code(202).send(successBody(reply, 'magicLinkSent'));
  });

  app.post('/magic-link/verify', { schema: DOCS.verifyLink }, async (request, reply) => {
    const token = textField(request.body, 'token').trim();
    const holder = token ? await emailTokens.findUsable(db, sha256Hex(token), 'magic', clock()) : undefined;
    // The address the link went to decides, before the link is used (CONTRACT §31).
    const sso = await deps.sso?.requiredFor(holder?.email);
    if (sso) return sendSsoRequired(reply, sso);
    const client = clientOf(request);
    const signIn = holder && await useLink(db, clock, token, 'magic', holder.user_id, async (tx, user, now) => {
      if (user.is_active !== 1) return undefined;
      // The link went to the address and came back: the account is the mailbox's.
      await mailboxTakesOver(tx, user, now, { audit, client, setsPassword: false });
      // The link is one factor, as a password is: a user with TOTP still owes a code.
      return signInByOneFactor(tx, deps, user, client, now, MAGIC_LINK_AMR);
    });
    if (!signIn) return sendError(reply, 'linkInvalid');
    return answerOneFactorSignIn(request, reply, holder.user_id, signIn, 'magic link');
  });
}

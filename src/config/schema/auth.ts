// auth: tokens, passwords, rate limits, the second factor, passkeys, sign-in links and identity
// providers (providers.ts); relyingParty is the operators' passkeys' too (admin.ts).
import { z } from 'zod';
import { ASYMMETRIC, bool, duration, envReference, int, optionalText, SECRET_MIN, text } from './values.js';
import { linkTemplate } from './mail.js';
import { oidcSchema, originProblem } from './providers.js';

// Defaults of values that a transform or preprocess reads are prefaults: written as in the file and
// parsed like it, so `gateway schema` can show them (a default is the parsed value, a number).
// A WebAuthn relying party: the users' (auth.passkeys, §14) or the operators' (admin.passkeys, §24).
export const relyingParty = (rpName: z.ZodType<string>) => z.strictObject({
  rpId: z.string().regex(/^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/, 'expected a host name in lower case, such as app.example.com (no scheme, no port)')
    .meta({ examples: ['app.example.com'] }),
  rpName,
  origins: z.array(z.string().min(1).meta({ title: 'origin', examples: ['https://app.example.com'] })).min(1),
}).superRefine(({ rpId, origins }, ctx) => {
  // A browser refuses a ceremony whose rpId is not its page's host or a parent of it: say so at
  // `gateway check`, not at the first user's sign-in.
  origins.forEach((origin, i) => {
    const problem = originProblem(origin, rpId);
    if (problem) ctx.addIssue({ code: 'custom', path: ['origins', i], message: problem });
  });
});

export const authSchema = z.strictObject({
  jwt: z.strictObject({
    algorithm: z.enum(['HS256', ...ASYMMETRIC]).default('HS256'),
    secret: text.meta({ examples: ['${JWT_SECRET}'] }),
    privateKeyFile: optionalText.meta({ examples: ['keys/jwt.pem'] }),
    // CONTRACT §25: keys rotated out, which verify tokens they signed but never sign.
    // An empty entry is skipped, so `- ${JWT_SECRET_PREVIOUS:-}` can stay in a file between rotations.
    previous: z.array(z.string().nullable().meta({ title: 'previous key', examples: ['${JWT_SECRET_PREVIOUS:-}', 'keys/jwt-2026-01.pub.pem'] })).default([])
      .transform((keys) => keys.filter((key): key is string => Boolean(key))).meta({
        description: 'Keys rotated out, verify only: HS256 secrets, or for the other algorithms PEM public keys (files, or PEM text). '
          + 'Tokens they signed stay valid; removing one ends every session it signed. Empty entries are skipped.',
      }),
    issuer: optionalText.meta({ examples: ['https://gw.example.com'] }),
    audience: optionalText.meta({ examples: ['my-app'] }),
  }).meta({
    // The rules of configSchema's check below: an HS256 secret (the default algorithm) of 32
    // characters or none; a private key file for the others.
    allOf: [
      {
        if: { properties: { algorithm: { const: 'HS256' } } },
        then: { properties: { secret: { anyOf: [{ type: 'null' }, { const: '' }, { type: 'string', minLength: SECRET_MIN }, envReference] } } },
      },
      {
        if: { required: ['algorithm'], properties: { algorithm: { enum: [...ASYMMETRIC] } } },
        then: { required: ['privateKeyFile'], properties: { privateKeyFile: { type: 'string', minLength: 1 } } },
      },
    ],
  }).prefault({}),
  accessTokenTtl: duration.prefault('15m'),
  refreshTokenTtl: duration.prefault('30d'),
  passwordMinLength: int(1, 1024).prefault(8),
  refreshReuse: z.enum(['reject', 'revoke-all']).default('reject'),
  rateLimit: z.strictObject({
    max: int(0).prefault(20),
    window: duration.prefault('1m'),
  }).prefault({}),
  requireVerifiedEmail: bool().prefault(false).meta({ description: 'true: login of an account whose email is not verified gets 403 (needs mail.smtp).' }),
  mfa: z.strictObject({
    issuer: z.string().min(1).default('auth-gateway').meta({ description: 'The label authenticator apps show for TOTP (otpauth issuer).' }),
  }).prefault({}),
  // CONTRACT §14 (docs/second-factor.md#passkeys).
  passkeys: relyingParty(z.string().min(1).meta({ examples: ['Example'] }))
    .optional().meta({ description: 'WebAuthn relying party (passkeys): rpId (the host name passkeys are bound to), rpName (shown by the authenticator), origins (the pages that run the ceremonies, https:// or http://localhost); absent: the passkey endpoints answer 404.' }),
  magicLink: z.strictObject({
    url: linkTemplate.optional().meta({ examples: ['https://app.example.com/sign-in?token={token}'], description: 'The page a sign-in link opens, {token} where its token goes; required unless portal.enabled (then the portal\'s page).' }),
  }).optional().meta({ description: 'Sign-in links by email (needs mail); absent: 404.' }),
  oidc: oidcSchema.optional(),
}).prefault({});

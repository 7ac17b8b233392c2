// GET {path}api/config: what the portal's pages need to know of this gateway before anyone signs
// in (no credential; the portal's CSRF rule and headers, guard.ts). Computed once from the
// configuration, but for the scopes, which follow the live routes (a reload changes them).
//
// The shape, which the pages rely on (every key always present; null where a setting is unset):
//
//   {
//     "product": { "name": "Acme API", "accent": "#3b5bdb", "logo": "/portal/logo" | null,
//                  "support": "help@example.com" | null, "terms": "https://…" | null, "privacy": "https://…" | null },
//     "docs": "https://docs.example.com" | null,
//     "path": "/portal/",                          portal.path: where every page lives
//     "publicUrl": "https://portal.example.com",   the portal's origin
//     "language": { "available": ["fr", "en"], "default": "fr" | "en", "negotiate": false },
//                                                  errors.language: fr, en, or negotiate (the browser's, else fr)
//     "features": {
//       "registration": true,                      POST /api/v1/auth/register is open (spec §4)
//       "mail": true,                              mail.smtp set: forgotten password, verification and invitation mails go out
//       "billing": false,                          billing.stripe set: plan and billing pages, checkout and Stripe's portal
//       "passkeys": false,                         auth.passkeys set
//       "magicLink": false,                        auth.magicLink set (and mail)
//       "organizations": false,                    organizations.enabled
//       "sso": false,                              "sign in with your organization" (§31): SAML is served (organizations.sso
//                                                  beside auth.oidc) and its publicUrl is publicUrl (else false and
//                                                  `gateway check` says why): start at /api/v1/auth/sso?email=…&return_to={signedIn}&code_challenge=…
//       "providers": [{ "id": "github", "name": "GitHub" }]
//                                                  auth.oidc's providers, only when auth.oidc.publicUrl is publicUrl
//                                                  (else [] and `gateway check` says why): start at
//                                                  /api/v1/auth/oidc/{id}/start?return_to={signedIn}&code_challenge=…
//     },
//     "signedIn": "https://portal.example.com/portal/signed-in",  the return_to of a provider sign-in
//     "scopes": ["reports:read"],                  the scopes the routes declare: what a key may be given
//     "apiKeys": { "plans": ["pro"] | "all", "maxPerOwner": 10 },
//     "passwordMinLength": 8,
//     "returnTo": ["https://app.example.com/"]     portal.returnTo: the only targets of the "back to the app" link
//   }
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Config } from '../config/schema.js';
import { portalSignedInUrl, type PortalConfig } from '../config/schema/portal.js';
import type { EndpointSchema } from '../openapi.js';

/** The shape above, as sent. */
export interface PortalSettings {
  product: { name: string; accent: string; logo: string | null; support: string | null; terms: string | null; privacy: string | null };
  docs: string | null;
  path: string;
  publicUrl: string;
  language: { available: string[]; default: 'fr' | 'en'; negotiate: boolean };
  features: {
    registration: boolean; mail: boolean; billing: boolean; passkeys: boolean; magicLink: boolean; organizations: boolean; sso: boolean;
    providers: Array<{ id: string; name: string }>;
  };
  signedIn: string;
  scopes: string[];
  apiKeys: { plans: string[] | 'all'; maxPerOwner: number };
  passwordMinLength: number;
  returnTo: string[];
}

/** Known issuers' names; any other provider is shown by its configured id. */
const NAMED_ISSUERS: Record<string, string> = { 'https://accounts.google.com': 'Google', 'https://github.com': 'GitHub', 'https://login.microsoftonline.com': 'Microsoft' };

/**
 * The providers the pages may offer: only when auth.oidc.publicUrl is the portal's origin, so that
 * the sign-in cookie set at the start reaches the portal's exchange (CONTRACT §15, §26).
 */
export function shownProviders(config: Pick<Config, 'auth'>, portal: PortalConfig): Array<{ id: string; name: string }> {
  const oidc = config.auth.oidc;
  if (!oidc || new URL(oidc.publicUrl).origin !== portal.publicUrl) return [];
  return Object.entries(oidc.providers).map(([id, provider]) => ({ id, name: NAMED_ISSUERS[provider.issuer] ?? id }));
}

/**
 * "Sign in with your organization" (CONTRACT §31): only where SAML is served (organizations.sso
 * beside auth.oidc) and its ACS is on the portal's origin, for the same reason as the providers'
 * buttons: the ACS sets the sign-in cookie that the portal's exchange must receive.
 */
export function shownSso(config: Pick<Config, 'auth' | 'organizations'>, portal: PortalConfig): boolean {
  const sso = config.organizations?.enabled ? config.organizations.sso : undefined;
  const oidc = config.auth.oidc;
  if (!sso || !oidc) return false;
  return new URL(sso.publicUrl ?? oidc.publicUrl).origin === portal.publicUrl;
}

/** Everything but the scopes, fixed at start. */
export function fixedSettings(config: Config, portal: PortalConfig): Omit<PortalSettings, 'scopes'> {
  const { product } = portal;
  const language = config.errors.language;
  return {
    product: {
      name: product.name, accent: product.accent, logo: product.logo ? `${portal.path}logo` : null,
      support: product.support ?? null, terms: product.terms ?? null, privacy: product.privacy ?? null,
    },
    docs: portal.docs ?? null,
    path: portal.path,
    publicUrl: portal.publicUrl,
    language: { available: ['fr', 'en'], default: language === 'en' ? 'en' : 'fr', negotiate: language === 'negotiate' },
    features: {
      registration: true,
      mail: Boolean(config.mail?.smtp),
      billing: config.billing !== undefined,
      passkeys: config.auth.passkeys !== undefined,
      // auth.magicLink needs mail (the configuration refuses it without).
      magicLink: config.auth.magicLink !== undefined,
      organizations: config.organizations?.enabled === true,
      sso: shownSso(config, portal),
      providers: shownProviders(config, portal),
    },
    signedIn: portalSignedInUrl(portal)!,
    apiKeys: { plans: config.apiKeys.plans, maxPerOwner: config.apiKeys.maxPerOwner },
    passwordMinLength: config.auth.passwordMinLength,
    returnTo: portal.returnTo,
  };
}

/** The scopes the live routes declare, sorted, each once. */
function declaredScopes(request: FastifyRequest): string[] {
  return [...new Set(request.context.live.settings.routes.flatMap((route) => route.scopes ?? []))].sort();
}

const nullableText = { type: ['string', 'null'] };
const CONFIG_DOC = {
  tags: ['portal'], summary: 'What the portal\'s pages need to know before sign-in: product, languages, features, scopes, returnTo (no credential; X-Gateway-Portal: 1)',
  response: {
    200: {
      type: 'object',
      properties: {
        product: { type: 'object', properties: { name: { type: 'string' }, accent: { type: 'string' }, logo: nullableText, support: nullableText, terms: nullableText, privacy: nullableText } },
        docs: nullableText, path: { type: 'string' }, publicUrl: { type: 'string' },
        language: { type: 'object', properties: { available: { type: 'array', items: { type: 'string' } }, default: { type: 'string' }, negotiate: { type: 'boolean' } } },
        features: { type: 'object' }, signedIn: { type: 'string' }, scopes: { type: 'array', items: { type: 'string' } },
        apiKeys: { type: 'object' }, passwordMinLength: { type: 'integer' }, returnTo: { type: 'array', items: { type: 'string' } },
      },
    },
  },
} satisfies EndpointSchema;

export function configRoute(scope: FastifyInstance, config: Config, portal: PortalConfig): void {
  const fixed = fixedSettings(config, portal);
  scope.get(`${portal.path}api/config`, { schema: CONFIG_DOC }, async (request): Promise<PortalSettings> => ({ ...fixed, scopes: declaredScopes(request) }));
}

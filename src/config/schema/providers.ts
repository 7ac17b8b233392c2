// Sign-in settings that check one another: WebAuthn origins, identity providers (CONTRACT §15,
// §26), and whether the sign-in cookie can bind a login code.
import { z } from 'zod';
import { isIP } from 'node:net';
import { bool, secureUrl } from './values.js';

/** Why `origin` cannot run WebAuthn ceremonies for `rpId` (undefined: it can). */
export function originProblem(origin: string, rpId: string): string | undefined {
  let url: URL;
  try {
    url = new URL(origin);
  } catch {
    return `expected an origin such as https://${rpId}, got ${JSON.stringify(origin)}`;
  }
  if (url.origin !== origin) return `expected an origin (scheme, host and port only: ${url.origin}), got ${JSON.stringify(origin)}`;
  const host = url.hostname;
  if (host !== rpId && !host.endsWith(`.${rpId}`)) return `${origin} is not on ${rpId} or a subdomain of it: browsers refuse the ceremony`;
  if (url.protocol !== 'https:' && host !== 'localhost' && !host.endsWith('.localhost')) return `${origin}: browsers allow passkeys only on https:// pages (or http://localhost)`;
  return undefined;
}


// Identity providers (CONTRACT §15). Issuers and the gateway's public URL are https://, except on
// loopback hosts (local providers, tests): a sign-in carried over plain HTTP could be read or
// changed on the way.
export const returnToEntry = z.string().transform((text, ctx) => {
  let url: URL | undefined;
  try {
    url = new URL(text);
  } catch { /* reported below */ }
  if (!url || !/^https?:$/.test(url.protocol) || url.username || url.password || url.search || url.hash || text.includes('#') || text.endsWith('?')) {
    ctx.addIssue({ code: 'custom', message: `expected an http:// or https:// URL without query or fragment, such as https://app.example.com/signed-in, got ${JSON.stringify(text)}` });
    return z.NEVER;
  }
  // Compared as text with what the application sends (CONTRACT §26): written as browsers write it
  // (URL.href), or an entry could never match, or match a URL other than the one it seems to be.
  if (url.href !== text) {
    ctx.addIssue({ code: 'custom', message: `expected the exact URL as browsers write it: ${url.href}, got ${JSON.stringify(text)}` });
    return z.NEVER;
  }
  return text;
}).meta({ title: 'URL', examples: ['https://app.example.com/signed-in'] });
export const OIDC_PROVIDER_NAME = /^[a-z0-9][a-z0-9_-]{0,31}$/;
/** Google's issuer: its addresses are its own to vouch for, and its ID tokens name a Workspace domain in `hd`. */
export const GOOGLE_ISSUER = 'https://accounts.google.com';
export const emailDomain = z.string().regex(/^[^\s@]+\.[^\s@.]+$/, 'expected a domain such as example.com').transform((d) => d.toLowerCase()).meta({ examples: ['example.com'] });
// Which addresses a provider may vouch for (CONTRACT §26): any provider can assert any address
// verified, and a provider anyone can run, or sign up to, asserts the victim's.
export const vouching = {
  trustEmail: bool().optional().meta({ description: 'true: the provider\'s verified email links to an existing account of that email and marks new accounts verified. Default: true for https://accounts.google.com, false otherwise (GitHub included).' }),
  emailDomains: z.array(emailDomain).min(1).optional().meta({
    description: 'The domains whose addresses this provider may link or sign up (exact, case-insensitive); for Google the hd claim must be the email\'s domain. Absent: any.',
  }),
  allowSignUp: bool().prefault(true).meta({ description: 'false: the provider signs in accounts already linked or linked by email, and creates none.' }),
};
export const scopeToken = z.string().regex(/^[\x21\x23-\x5b\x5d-\x7e]+$/, 'expected a scope token');
export const oidcProviderSchema = z.strictObject({
  kind: z.literal('oidc').optional().meta({ description: 'oidc (the default): an OpenID Connect provider, found by discovery.' }),
  issuer: secureUrl('https://accounts.google.com').meta({ description: 'The provider\'s issuer; its discovery document is {issuer}/.well-known/openid-configuration.' }),
  clientId: z.string().min(1).meta({ examples: ['gateway'] }),
  clientSecret: z.string().min(1).meta({ examples: ['${GOOGLE_CLIENT_SECRET}'], description: 'The client secret the provider gave the gateway (sent to its token endpoint only).' }),
  scopes: z.array(scopeToken).default(['openid', 'email', 'profile'])
    .refine((scopes) => scopes.includes('openid'), 'expected openid among the scopes'),
  ...vouching,
});
/** GitHub's identities: (this issuer, the account's numeric id), which a rename of the login keeps. */
export const GITHUB_ISSUER = 'https://github.com';
export const GITHUB_AUTHORIZE_URL = 'https://github.com/login/oauth/authorize';
// GitHub is OAuth 2 without OpenID Connect (no discovery, no ID token): its endpoints are named
// here, settable so that tests and the demo run against a local fake (CONTRACT §26).
export const githubProviderSchema = z.strictObject({
  kind: z.literal('github').meta({ description: 'github: Sign in with GitHub (an OAuth App or a GitHub App\'s user authorization).' }),
  clientId: z.string().min(1).meta({ examples: ['Iv1.0123456789abcdef'] }),
  clientSecret: z.string().min(1).meta({ examples: ['${GITHUB_CLIENT_SECRET}'], description: 'The client secret GitHub gave the gateway (sent to its token endpoint only).' }),
  scopes: z.array(scopeToken).default(['read:user', 'user:email']),
  apiBase: secureUrl('https://api.github.com').default('https://api.github.com').meta({ description: 'GitHub\'s REST API: {apiBase}/user and {apiBase}/user/emails. Default: https://api.github.com.' }),
  authorizeUrl: secureUrl(GITHUB_AUTHORIZE_URL).default(GITHUB_AUTHORIZE_URL).meta({ description: 'Where the browser authorizes the gateway. Default: https://github.com/login/oauth/authorize.' }),
  tokenUrl: secureUrl('https://github.com/login/oauth/access_token').optional().meta({ description: 'Where the gateway exchanges the code. Default: /login/oauth/access_token at the origin of authorizeUrl.' }),
  ...vouching,
});
export const providerSchema = z.discriminatedUnion('kind', [oidcProviderSchema, githubProviderSchema], {
  error: (issue) => (issue.code === 'invalid_union' ? 'expected oidc (the default) or github' : undefined),
}).transform((provider) => provider.kind === 'github'
  ? { ...provider, issuer: GITHUB_ISSUER, trustEmail: provider.trustEmail ?? false, tokenUrl: provider.tokenUrl ?? `${new URL(provider.authorizeUrl).origin}/login/oauth/access_token` }
  : { ...provider, kind: 'oidc' as const, trustEmail: provider.trustEmail ?? provider.issuer === GOOGLE_ISSUER });
export const oidcSchema = z.strictObject({
  publicUrl: secureUrl('https://gw.example.com').meta({ description: 'The gateway as browsers reach it: each provider\'s redirect URI is {publicUrl}/api/v1/auth/oidc/{provider}/callback.' }),
  returnTo: z.array(returnToEntry).min(1).meta({ description: 'Where a sign-in may send the browser back: exact URLs, a return_to allowed only when identical to one (on an http://127.0.0.1 or http://[::1] entry, any port).' }),
  bindToBrowser: bool().optional().meta({
    description: 'true: the login code is bound to the browser by the gw_oidc cookie, which the exchange must carry (every returnTo origin same-site with publicUrl, '
      + 'and allowed by cors with credentials: true); false: by the application\'s PKCE verifier alone. Default: true when every returnTo origin is same-site with publicUrl.',
  }),
  providers: z.record(z.string().meta({ examples: ['google'] }), providerSchema).superRefine((providers, ctx) => {
    for (const name of Object.keys(providers)) {
      if (!OIDC_PROVIDER_NAME.test(name)) ctx.addIssue({ code: 'custom', path: [name], message: 'expected a provider name of lower-case letters, digits, - and _ (it is a URL segment)' });
    }
  }),
}).superRefine((oidc, ctx) => {
  if (oidc.bindToBrowser === true && !everyReturnToSameSite(oidc)) {
    ctx.addIssue({
      code: 'custom', path: ['bindToBrowser'],
      message: 'true needs every returnTo origin same-site with publicUrl: browsers send the gw_oidc cookie to the exchange from the gateway\'s site only',
    });
  }
  // Defaulted (not set) is kept apart: an explicit true that cannot work is a config error, a
  // default that cannot work a warning (configWarnings), so a file valid before stays valid.
}).transform((oidc) => ({ ...oidc, bindToBrowser: oidc.bindToBrowser ?? everyReturnToSameSite(oidc), bindToBrowserDefaulted: oidc.bindToBrowser === undefined }))
  .meta({ description: 'Sign in with identity providers (OpenID Connect, and GitHub with kind: github; docs/identity-providers.md); absent: the endpoints answer 404.' });

// Whether two URLs are of one site, as browsers decide which cookies a request carries (RFC 6265bis
// §5.2, schemeful): the same scheme, and the same registrable domain, or the same IP address.
// The registrable domain is taken as the host's last two labels: the gateway carries no copy of
// the Public Suffix List. That errs one way only, towards "same site" for two hosts under a
// suffix of several labels (a.example.co.uk and b.other.co.uk, x.github.io and y.github.io):
// bindToBrowser then defaults to true, the browser does not send the cookie, and every exchange
// is refused (fail closed, never a weaker binding); bindToBrowser: false is then the setting.
export function siteOf(url: URL): string {
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  return `${url.protocol}//${isIP(host) ? host : host.split('.').slice(-2).join('.')}`;
}
export const sameSite = (a: string, b: string) => siteOf(new URL(a)) === siteOf(new URL(b));

/**
 * The return pages' origins whose exchange would not carry the gw_oidc cookie: posted from another
 * origin, it carries the cookie only when CORS allows that origin with credentials (own endpoints
 * follow the global policy).
 */
export function originsWithoutCookie(cfg: { cors?: { origins: string[]; credentials: boolean }; auth: { oidc?: { publicUrl: string; returnTo: string[] } } }): string[] {
  const oidc = cfg.auth.oidc;
  if (!oidc) return [];
  const gateway = new URL(oidc.publicUrl).origin;
  return [...new Set(oidc.returnTo.map((entry) => new URL(entry).origin))]
    .filter((origin) => origin !== gateway && !(cfg.cors?.credentials === true && cfg.cors.origins.includes(origin)));
}

/** Whether the sign-in cookie can bind the login code (CONTRACT §26): the pages that exchange it are of the gateway's site. */
export function everyReturnToSameSite(oidc: { publicUrl: string; returnTo: string[] }): boolean {
  return oidc.returnTo.every((entry) => sameSite(entry, oidc.publicUrl));
}

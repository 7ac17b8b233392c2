// portal (CONTRACT §30): the customer portal's settings. The pages themselves are a later piece;
// what is here is what the HTTP API already reads (billing's `"return": "portal"` sends Stripe back
// to `{publicUrl}{path}billing`) and what `gateway check` refuses: an accent that is not #rrggbb,
// terms, privacy or docs that are not https:// URLs, a support address that is not one mailbox, a
// logo that is not a PNG or SVG file (config/files.ts reads it: under 100 KB), a publicUrl that is
// more than an origin or plain http:// off loopback, and a route under `path` (routes.ts: an own
// endpoint). The product's name and the other texts are shown as text by whatever shows them.
import { z } from 'zod';
import { isSingleMailbox } from '../../credentials/emailAddress.js';
import { bool, LOOPBACK_HOSTS } from './values.js';
import { returnToEntry } from './providers.js';

/** What gateway.schema.json says of an https:// URL setting. */
const httpsUrl = (what: string, example: string) => z.string()
  .refine((u) => URL.canParse(u) && new URL(u).protocol === 'https:', `expected an https:// URL (${what}) such as ${example}`)
  .meta({ examples: [example] });

/** The portal's origin: scheme, host and port only, as browsers write it; https:// except on loopback. */
const publicUrl = z.string().transform((text, ctx) => {
  const url = URL.canParse(text) ? new URL(text) : undefined;
  const secure = url && (url.protocol === 'https:' || (url.protocol === 'http:' && LOOPBACK_HOSTS.has(url.hostname)));
  // Nothing but the origin, written as browsers send it in Origin (a trailing / allowed).
  const originOnly = url && text.replace(/\/$/, '').toLowerCase() === url.origin.toLowerCase();
  if (!secure || !originOnly) {
    ctx.addIssue({ code: 'custom', message: `expected the portal's origin, an https:// URL without path, query or fragment such as https://portal.example.com (http:// only on 127.0.0.1, ::1 or localhost), got ${JSON.stringify(text)}` });
    return z.NEVER;
  }
  return url.origin;
}).meta({ examples: ['https://portal.example.com'], description: 'The portal\'s own origin (required): no route is served on it (CONTRACT §30).' });

/** `/portal/`: begins and ends with a slash, path characters only. */
const PORTAL_PATH = /^\/(?:[A-Za-z0-9._~-]+\/)*$/;

export const portalSchema = z.strictObject({
  enabled: bool().prefault(false),
  path: z.string().regex(PORTAL_PATH, 'expected a path that begins and ends with /, such as /portal/').refine((p) => p !== '/', 'expected a path under /, such as /portal/ (/ would take every route)')
    .default('/portal/').meta({ description: 'Where the portal is served, an own endpoint: no route may be declared under it.' }),
  publicUrl,
  sharedOrigin: bool().prefault(false)
    .meta({ description: 'true: the portal is served on every host, beside the routes (gateway check warns: every upstream on that origin is trusted with customers\' sessions).' }),
  product: z.strictObject({
    name: z.string().min(1).max(64).meta({ examples: ['Acme API'] }),
    logo: z.string().regex(/\.(?:png|svg)$/i, 'expected a PNG or SVG file (.png or .svg) under 100 KB').optional()
      .meta({ examples: ['./logo.svg'], description: 'A PNG or SVG file under 100 KB, relative to this file.' }),
    accent: z.string().regex(/^#[0-9a-fA-F]{6}$/, 'expected a colour as #rrggbb, such as "#3b5bdb"').default('#3b5bdb').meta({ examples: ['#3b5bdb'] }),
    support: z.string().refine((e) => isSingleMailbox(e), 'expected one email address, such as help@example.com').optional().meta({ examples: ['help@example.com'] }),
    terms: httpsUrl('the terms of service', 'https://example.com/terms').optional(),
    privacy: httpsUrl('the privacy policy', 'https://example.com/privacy').optional(),
  }),
  returnTo: z.array(returnToEntry).default([]).meta({ description: 'Where the pages\' "back to the app" link may point: exact URLs (as auth.oidc.returnTo\'s, CONTRACT §26).' }),
  docs: httpsUrl('the product\'s API documentation', 'https://docs.example.com').optional(),
}).meta({ description: 'The customer portal (CONTRACT §30, docs/portal.md): self-service pages for the product\'s own customers on an origin of their own.' });

export type PortalConfig = z.output<typeof portalSchema>;

/** portal.path with the portal on: every path under it is an own endpoint (live/requestContext.ts); else undefined. */
export function portalPath(cfg: { portal?: PortalConfig }): string | undefined {
  return cfg.portal?.enabled ? cfg.portal.path : undefined;
}

/** Where Stripe sends a customer back to the portal (billing's `"return": "portal"`); undefined without an enabled portal. */
export function portalBillingUrl(portal: PortalConfig | undefined): string | undefined {
  return portal?.enabled ? `${portal.publicUrl}${portal.path}billing` : undefined;
}

/** The portal's page that each kind of mail link opens (CONTRACT §30), `{token}` where the token goes. */
const PORTAL_LINK_PAGES = { verify: 'verify-email', reset: 'reset-password', invitation: 'join', magic: 'magic' } as const;
export type MailLinkKind = keyof typeof PORTAL_LINK_PAGES;

/** The mail-link settings as the file has them: each may be left out with the portal on. */
export interface MailLinkSettings {
  mail?: { resetUrl?: string; verifyUrl?: string; invitationUrl?: string };
  auth: { magicLink?: { url?: string } };
  portal?: PortalConfig;
}

/**
 * The page each mail link opens: the setting when set (it wins), else, with the portal on, the
 * portal's page (`{publicUrl}{path}verify-email?token={token}`, …); undefined: no such link.
 */
export function mailLinks(cfg: MailLinkSettings): Partial<Record<MailLinkKind, string>> {
  const portal = cfg.portal?.enabled ? cfg.portal : undefined;
  const page = (kind: MailLinkKind) => (portal ? `${portal.publicUrl}${portal.path}${PORTAL_LINK_PAGES[kind]}?token={token}` : undefined);
  return {
    verify: cfg.mail?.verifyUrl ?? page('verify'),
    reset: cfg.mail?.resetUrl ?? page('reset'),
    invitation: cfg.mail?.invitationUrl ?? page('invitation'),
    magic: cfg.auth.magicLink?.url ?? (cfg.auth.magicLink ? page('magic') : undefined),
  };
}

/** Where a provider or SSO sign-in started from the portal comes back: an entry of auth.oidc.returnTo (CONTRACT §30). */
export function portalSignedInUrl(portal: PortalConfig | undefined): string | undefined {
  return portal?.enabled ? `${portal.publicUrl}${portal.path}signed-in` : undefined;
}

/** What checkPortalSettings reads of the file. */
export interface PortalCheckSettings extends MailLinkSettings {
  auth: MailLinkSettings['auth'] & { passkeys?: { rpId: string; origins: string[] } };
}

type Issue = { code: 'custom'; path: Array<string | number>; message: string };

/**
 * The rules between the portal and other sections: the mail links it makes optional are required
 * without it, and passkeys must work on its origin (a browser refuses a ceremony whose page is not
 * among the relying party's origins, or whose rpId is neither its host nor a parent of it).
 */
export function checkPortalSettings(cfg: PortalCheckSettings, addIssue: (issue: Issue) => void): void {
  const portal = cfg.portal?.enabled ? cfg.portal : undefined;
  const without = 'required unless portal.enabled (whose pages it then opens): the application\'s page, a URL with {token}';
  if (cfg.mail && !portal) {
    for (const key of ['resetUrl', 'verifyUrl'] as const) if (!cfg.mail[key]) addIssue({ code: 'custom', path: ['mail', key], message: without });
  }
  if (cfg.auth.magicLink && !cfg.auth.magicLink.url && !portal) addIssue({ code: 'custom', path: ['auth', 'magicLink', 'url'], message: without });
  const passkeys = cfg.auth.passkeys;
  if (!portal || !passkeys) return;
  const host = new URL(portal.publicUrl).hostname;
  if (!passkeys.origins.includes(portal.publicUrl)) {
    addIssue({ code: 'custom', path: ['auth', 'passkeys', 'origins'], message: `expected portal.publicUrl (${portal.publicUrl}) among the origins: the portal's pages run passkey ceremonies there` });
  }
  if (host !== passkeys.rpId && !host.endsWith(`.${passkeys.rpId}`)) {
    const message = `expected the portal's host (${host}) or a parent domain of it: browsers refuse a passkey of another rpId on the portal's pages`;
    addIssue({ code: 'custom', path: ['auth', 'passkeys', 'rpId'], message });
  }
}

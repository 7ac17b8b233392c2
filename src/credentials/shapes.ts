// The shapes of the gateway's own credentials besides API keys (whose format is keys/format.ts):
// what it issues and what it looks for wherever a client may have put one (proxy/ownTokens.ts), so
// the two can never drift apart.

// A JWS compact serialization starts with a base64url JSON object: `{"` is `eyJ`. Matching from
// there also finds a token glued to what precedes it (`bearer<token>`).
export const JWS_PREFIX = 'eyJ';
export const JWS_PATTERN = /eyJ[\w-]*\.[\w-]+\.[\w-]+/g;

/** The console's session cookie (admin listener): never forwarded upstream by the public listener. */
export const CONSOLE_COOKIE = 'gw_console';
/** The cookie that binds an identity-provider sign-in to its browser (auth/providers/routes.ts): never forwarded upstream either. */
export const OIDC_COOKIE = 'gw_oidc';
/**
 * The customer portal's session cookie (CONTRACT §30): `__Host-gw_portal` over https (Secure, host
 * only, Path=/), `gw_portal` over http on loopback, where browsers refuse the `__Host-` prefix.
 */
export const PORTAL_COOKIE = 'gw_portal';
export const PORTAL_HOST_COOKIE = `__Host-${PORTAL_COOKIE}`;
/**
 * Every cookie that is the gateway's own: never forwarded upstream nor left in X-Gateway-Clean-Cookie
 * (proxy/ownTokens.ts), and an upstream's Set-Cookie naming one is dropped (proxy/headers.ts), so an
 * application can neither read a customer's session nor replace or clear it.
 */
export const GATEWAY_COOKIES: ReadonlySet<string> = new Set([CONSOLE_COOKIE, OIDC_COOKIE, PORTAL_COOKIE, PORTAL_HOST_COOKIE]);

/** The name of a cookie pair (`name=value`, as in Cookie or at the start of Set-Cookie), spaces trimmed. */
export function cookieName(pair: string): string {
  const eq = pair.indexOf('=');
  return (eq === -1 ? pair : pair.slice(0, eq)).trim();
}

/** An operator's personal admin token (CONTRACT §24): `gwop_` and 43 base64url characters (256 bits), stored as SHA-256. */
export const OPERATOR_TOKEN_PREFIX = 'gwop_';

// The configured sign-in providers (auth.oidc, CONTRACT §15, §26), whatever their kind: each made
// by the registry (registry.ts) under its name, and what the configuration allows of every one of
// them alike: where the browser may return, and which addresses a provider may link or sign up.
import { GOOGLE_ISSUER } from '../../config/schema.js';
import { PROVIDER_KINDS, type ProviderConstructor } from './registry.js';
import type { ProviderSettings, ProvidersSettings, SignInProvider } from './signInProvider.js';

/**
 * Whether the provider may link or sign up an account of `email` (CONTRACT §26): with
 * emailDomains, the address's domain listed (exact, case-insensitive) and, for Google, the ID
 * token's `hd` equal to it: a consumer Google account may carry an address of a company's domain
 * without being the company's.
 */
export function domainAllowed(settings: ProviderSettings, email: string, hostedDomain: string | undefined): boolean {
  if (!settings.emailDomains) return true;
  const domain = email.slice(email.lastIndexOf('@') + 1).toLowerCase();
  if (!settings.emailDomains.includes(domain)) return false;
  return settings.issuer !== GOOGLE_ISSUER || hostedDomain?.toLowerCase() === domain;
}

/** Every configured provider, by its name in the configuration (the URL segment). */
export class SignInProviders {
  private readonly byName = new Map<string, SignInProvider>();

  /** `kinds`: the registry (registry.ts); a test may hand it a kind of its own. */
  constructor(readonly settings: ProvidersSettings, kinds: Readonly<Record<string, ProviderConstructor<never>>> = PROVIDER_KINDS) {
    for (const [name, provider] of Object.entries(settings.providers)) {
      const redirectUri = `${settings.publicUrl}/api/v1/auth/oidc/${name}/callback`;
      // The one place the kind of a provider matters: the routes see a SignInProvider. The
      // registry pairs each kind with the constructor of its settings, which TypeScript cannot
      // follow through a lookup by the kind.
      const make = Object.hasOwn(kinds, provider.kind) ? kinds[provider.kind] as ProviderConstructor | undefined : undefined;
      if (!make) throw new Error(`no sign-in provider of kind ${provider.kind}`);
      this.byName.set(name, make(name, provider, redirectUri));
    }
  }

  /** Whether a configured provider takes its answer as a posted form (the POST callback is registered only then). */
  get anyPostsBack(): boolean {
    return [...this.byName.values()].some((provider) => provider.postsBack === true);
  }

  get(name: string): SignInProvider | undefined {
    // A Map: no name (`__proto__`, `constructor`) reads anything but a configured provider.
    return this.byName.get(name);
  }

  /** The issuer of a configured provider's name. */
  issuerOf(name: string): string | undefined {
    return this.get(name)?.settings.issuer;
  }

  /**
   * The return_to, if it is an entry of auth.oidc.returnTo character for character (CONTRACT §26,
   * RFC 9700 §4.1.3), or the same URL on another port for an http:// loopback entry (a native
   * application's local server). Never parsed nor normalised: a prefix, a query or an encoded
   * separator let an application's own open redirect carry the login code elsewhere (issue 45).
   */
  allowedReturnTo(raw: string): string | undefined {
    return allowedReturnTo(this.settings.returnTo, raw);
  }
}

/** `raw` when it is an entry of `returnTo` as SignInProviders.allowedReturnTo says (also for SAML sign-ins, CONTRACT §31). */
export function allowedReturnTo(returnTo: readonly string[], raw: string): string | undefined {
  return returnTo.some((entry) => raw === entry || sameOnAnotherLoopbackPort(raw, entry)) ? raw : undefined;
}

// An http:// loopback URL split as text: scheme and host, port, the rest (RFC 8252 §7.3: the port
// of a native application's loopback redirect is chosen when it runs). Entries are as URL.href
// writes them (config/schema.ts), so the host is spelled one way and a path follows. With the s
// flag the path's `.*` runs to the end of the text: no `$` needed.
const LOOPBACK_URL = /^(http:\/\/(?:127\.0\.0\.1|\[::1\]))(?::([1-9][0-9]{0,4}))?(\/.*)/s;

/** Whether `raw` is the loopback `entry` with nothing but the port changed (a real port: 1 to 65535, no leading zero). */
function sameOnAnotherLoopbackPort(raw: string, entry: string): boolean {
  const allowed = LOOPBACK_URL.exec(entry);
  const asked = allowed && LOOPBACK_URL.exec(raw);
  if (!allowed || !asked) return false;
  return asked[1] === allowed[1] && asked[3] === allowed[3] && (asked[2] === undefined || Number(asked[2]) <= 65535);
}

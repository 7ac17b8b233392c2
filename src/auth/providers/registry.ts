// The kinds of sign-in provider, as data (STYLE 30, as oauth2-proxy's providers/providers.go): each
// `kind` of auth.oidc.providers maps to the constructor of its SignInProvider, and nothing else.
// A new protocol is a file beside this one and a line here; the routes, the configured set
// (configured.ts) and the linking rules read every kind alike.
import { GitHubProvider } from './github.js';
import { OidcProvider } from './oidc.js';
import type { ProviderSettings, SignInProvider } from './signInProvider.js';

/** What makes a provider of one kind: its name (the URL segment), its settings, its callback's URL. */
export type ProviderConstructor<S extends ProviderSettings = ProviderSettings> = (name: string, settings: S, redirectUri: string) => SignInProvider;

/** Every kind the configuration accepts, with its constructor. */
export type ProviderKinds = { readonly [K in ProviderSettings['kind']]: ProviderConstructor<Extract<ProviderSettings, { kind: K }>> };

export const PROVIDER_KINDS: ProviderKinds = {
  oidc: (name, settings, redirectUri) => new OidcProvider(name, settings, redirectUri),
  github: (name, settings, redirectUri) => new GitHubProvider(name, settings, redirectUri),
};

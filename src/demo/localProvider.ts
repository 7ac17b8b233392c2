// The demo's identity provider (`npm run demo`, CONTRACT §15; `npm run idp`, src/demo/idp.ts): panva's
// oidc-provider on loopback with one user, so that a sign-in runs the whole flow on this machine:
// its login form (any password: it is a demo, the login is what names the user), its consent
// page, the gateway's callback, and the page's exchange. Nothing here is fit for anything but a
// developer's machine: development interactions, in-memory storage, random keys at each start.
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** The one user the demo provider knows: sign in as `grace`. */
export const DEMO_IDP_USER = { login: 'grace', email: 'grace@example.com' };
export const DEMO_IDP_CLIENT_ID = 'demo-gateway';

export interface LocalProviderOptions {
  /** The gateway callbacks its one client may return to ({publicUrl}/api/v1/auth/oidc/{name}/callback). */
  redirectUris: string[];
  /** Its port on 127.0.0.1; 0 (the default): one the system picks. */
  port?: number;
  clientId?: string;
  /** Default: a random one. */
  clientSecret?: string;
}

export interface LocalProvider {
  issuer: string;
  clientId: string;
  clientSecret: string;
  close(): Promise<void>;
}

export interface DemoIdp {
  issuer: string;
  /** The ${DEMO_…} values demo/gateway.demo.yaml reads for auth.oidc. */
  env: Record<string, string>;
  close(): Promise<void>;
}

/** Starts the provider on 127.0.0.1 with one confidential client and DEMO_IDP_USER. */
export async function startLocalProvider(options: LocalProviderOptions): Promise<LocalProvider> {
  // Loaded here: nothing but the demo and `npm run idp` run a provider.
  const { default: Provider } = await import('oidc-provider');
  const server = http.createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, '127.0.0.1', () => resolve());
  });
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const clientId = options.clientId ?? DEMO_IDP_CLIENT_ID;
  const clientSecret = options.clientSecret ?? randomBytes(24).toString('base64url');
  const provider = new Provider(issuer, {
    clients: [{
      client_id: clientId, client_secret: clientSecret, client_name: 'Demo gateway',
      redirect_uris: options.redirectUris, grant_types: ['authorization_code'], response_types: ['code'],
    }],
    claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name'] },
    cookies: { keys: [randomBytes(32).toString('base64url')] },
    pkce: { required: () => true },
    findAccount: (_ctx, sub) => (sub === DEMO_IDP_USER.login
      ? { accountId: sub, claims: () => ({ sub, email: DEMO_IDP_USER.email, email_verified: true, name: 'Grace Hopper' }) }
      : undefined),
  });
  server.on('request', provider.callback());
  return {
    issuer,
    clientId,
    clientSecret,
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}

/** Starts the demo's provider; `gatewayUrl` is the gateway as the browser reaches it (its callback is registered). */
export async function startDemoIdp(gatewayUrl: string): Promise<DemoIdp> {
  const idp = await startLocalProvider({ redirectUris: [`${gatewayUrl}/api/v1/auth/oidc/demo/callback`] });
  return {
    issuer: idp.issuer,
    env: { DEMO_IDP_ISSUER: idp.issuer, DEMO_IDP_CLIENT_SECRET: idp.clientSecret, DEMO_PUBLIC_URL: gatewayUrl },
    close: () => idp.close(),
  };
}

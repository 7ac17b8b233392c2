// The demo's identity provider (`npm run demo`, CONTRACT §15): panva's oidc-provider on loopback
// with one user, so that "Sign in with Demo IdP" on the demo's page runs the whole flow on this
// machine: its login form (any password: it is a demo, the login is what names the user), its
// consent page, the gateway's callback, and the page's exchange. Nothing here is fit for anything
// but the demo: development interactions, in-memory storage, random keys at each start.
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** The one user the demo provider knows: sign in as `grace`. */
export const DEMO_IDP_USER = { login: 'grace', email: 'grace@example.com' };
export const DEMO_IDP_CLIENT_ID = 'demo-gateway';

export interface DemoIdp {
  issuer: string;
  /** The ${DEMO_…} values demo/gateway.demo.yaml reads for auth.oidc. */
  env: Record<string, string>;
  close(): Promise<void>;
}

/** Starts the provider; `gatewayUrl` is the gateway as the browser reaches it (its callback is registered). */
export async function startDemoIdp(gatewayUrl: string): Promise<DemoIdp> {
  // Loaded here: nothing but the demo runs a provider.
  const { default: Provider } = await import('oidc-provider');
  const server = http.createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const clientSecret = randomBytes(24).toString('base64url');
  const provider = new Provider(issuer, {
    clients: [{
      client_id: DEMO_IDP_CLIENT_ID, client_secret: clientSecret, client_name: 'Demo gateway',
      redirect_uris: [`${gatewayUrl}/api/v1/auth/oidc/demo/callback`], grant_types: ['authorization_code'], response_types: ['code'],
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
    env: { DEMO_IDP_ISSUER: issuer, DEMO_IDP_CLIENT_SECRET: clientSecret, DEMO_PUBLIC_URL: gatewayUrl },
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}

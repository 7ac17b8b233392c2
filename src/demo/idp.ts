// `npm run idp`: the demo's identity provider (src/demo/localProvider.ts) as a process of its own, for
// docs/identity-providers.md's local example (`local-provider`): a fixed port, client and secret,
// so that the variables it prints stay true from one start to the next. It registers the callback
// of the provider named `local` at GATEWAY_PUBLIC_URL. A developer's tool, on loopback only: its
// secret is in the docs, which is no harm on 127.0.0.1 and the reason it is nothing more.
// Ctrl-C stops it.
import '../cli/nodeVersion.js';
import { DEMO_IDP_USER, startLocalProvider, type LocalProvider } from './localProvider.js';

/** The documented defaults (docs/identity-providers.md); IDP_PORT moves the port when 9000 is taken. */
const LOCAL_IDP = { port: 9000, clientId: 'gateway', clientSecret: 'a-local-client-secret', provider: 'local' };

function instructions(idp: LocalProvider, publicUrl: string, appOrigin: string): string {
  return [
    `A local OpenID provider is listening on ${idp.issuer} (docs/identity-providers.md, "A provider on this machine").`,
    `It sends browsers back to ${publicUrl}/api/v1/auth/oidc/${LOCAL_IDP.provider}/callback only.`,
    'With the page\'s local-provider example as gateway.yaml, start the gateway with:',
    '',
    `export OIDC_ISSUER=${idp.issuer}`,
    `export OIDC_CLIENT_ID=${idp.clientId}`,
    `export OIDC_CLIENT_SECRET=${idp.clientSecret}`,
    `export GATEWAY_PUBLIC_URL=${publicUrl}`,
    `export APP_ORIGIN=${appOrigin}`,
    '',
    `Sign in at the provider as ${DEMO_IDP_USER.login} (any password): ${DEMO_IDP_USER.email}, email_verified true.`,
    'Press Ctrl-C to stop it.',
    '',
  ].join('\n');
}

async function main(): Promise<void> {
  const publicUrl = (process.env.GATEWAY_PUBLIC_URL ?? 'http://localhost:8080').replace(/\/+$/, '');
  const appOrigin = process.env.APP_ORIGIN ?? 'http://127.0.0.1:5173';
  let idp: LocalProvider;
  try {
    idp = await startLocalProvider({
      redirectUris: [`${publicUrl}/api/v1/auth/oidc/${LOCAL_IDP.provider}/callback`],
      port: process.env.IDP_PORT ? Number(process.env.IDP_PORT) : LOCAL_IDP.port,
      clientId: LOCAL_IDP.clientId,
      clientSecret: LOCAL_IDP.clientSecret,
    });
  } catch (err) {
    console.error(`The local provider could not start: ${err instanceof Error ? err.message : String(err)} (IDP_PORT=… picks another port)`);
    process.exitCode = 1;
    return;
  }
  const stop = () => void idp.close().then(() => process.exit(0));
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  console.log(instructions(idp, publicUrl, appOrigin));
}

void main();

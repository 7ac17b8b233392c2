// Real upstreams that trust only what the gateway signs: a fastify app using gatewayAssertionPlugin
// and a plain node:http server calling verifyGatewayAssertion. They listen (port 0) before the
// gateway starts, since its config needs their URLs, and learn the gateway's JWKS URL after.
// startAssertionSetup starts them with the gateway and user the assertion suites share.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import Fastify, { type FastifyInstance } from 'fastify';
import { decodeJwt, decodeProtectedHeader } from 'jose';
import type { Config } from '../../src/config/schema.js';
import { gatewayAssertionPlugin, GatewayAssertionError, verifyGatewayAssertion, type VerifyOptions } from '../../src/verify/index.js';
import { startEchoUpstream, type EchoUpstream } from './echoUpstream.js';
import { makeUser, startTestGateway, testConfig, type TestGateway, type TestUser } from './gateway.js';

export interface VerifyingUpstream {
  url: string;
  /** Requests that passed the verifier and reached the handler. */
  accepted: number;
  /** Starts verifying (until then every request gets 503). */
  protect(options: VerifyOptions): Promise<void>;
  close(): Promise<void>;
}

async function listen(server: http.Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function closeServer(server: http.Server): Promise<void> {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
}

/** fastify + gatewayAssertionPlugin; answers {identity, assertion} to requests it accepts. */
export async function startFastifyUpstream(): Promise<VerifyingUpstream> {
  let handler: http.RequestListener | undefined;
  let app: FastifyInstance | undefined;
  const server = http.createServer((req, res) => {
    if (handler) return handler(req, res);
    res.writeHead(503).end();
  });
  const upstream: VerifyingUpstream = {
    url: await listen(server),
    accepted: 0,
    async protect(options) {
      // fastify serves on the server already listening, so its port can go into the gateway config first.
      app = Fastify({ serverFactory: (h) => { handler = h; return server; } });
      await app.register(async (scope) => {
        await scope.register(gatewayAssertionPlugin, options);
        scope.all('/*', async (request) => {
          upstream.accepted++;
          return { identity: request.gatewayIdentity, assertion: request.headers['x-gateway-assertion'] };
        });
      });
      await app.ready();
    },
    async close() {
      await app?.close();
      await closeServer(server);
    },
  };
  return upstream;
}

/** Plain node:http + verifyGatewayAssertion; refusals answer 401 {error: <reason>}. */
export async function startPlainUpstream(): Promise<VerifyingUpstream> {
  let options: VerifyOptions | undefined;
  const server = http.createServer(async (req, res) => {
    if (!options) return void res.writeHead(503).end();
    try {
      const identity = await verifyGatewayAssertion(req.headers, options);
      upstream.accepted++;
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ identity }));
    } catch (err) {
      const status = err instanceof GatewayAssertionError && err.reason !== 'keys-unavailable' ? 401 : 503;
      res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify({ error: err instanceof GatewayAssertionError ? err.reason : 'error' }));
    }
  });
  const upstream: VerifyingUpstream = {
    url: await listen(server),
    accepted: 0,
    async protect(o) { options = o; },
    close: () => closeServer(server),
  };
  return upstream;
}

export function decodeAssertion(token: string): { header: Record<string, unknown>; claims: Record<string, unknown> } {
  return { header: decodeProtectedHeader(token) as Record<string, unknown>, claims: decodeJwt(token) as Record<string, unknown> };
}

/**
 * The assertion suites' gateway: it signs for `secure` (startFastifyUpstream), `plain`
 * (startPlainUpstream) and `echo` (an echo upstream, to read what upstreams receive), each its
 * route's audience, and for nothing on `/unsigned` (the secure server again); `/public` reaches
 * the secure server anonymously.
 */
export function assertionTestConfig(secureUrl: string, plainUrl: string, echoUrl: string): Config {
  return testConfig({
    upstreams: {
      secure: { url: secureUrl, assertion: true },
      plain: { url: plainUrl, assertion: true },
      echo: { url: echoUrl, assertion: true },
      // The same verifying server, but the gateway signs nothing for it.
      unsigned: { url: secureUrl, assertion: false },
    },
    routes: [
      { path: '/secure', upstream: 'secure' },
      { path: '/plain', upstream: 'plain' },
      { path: '/echo', upstream: 'echo' },
      { path: '/unsigned', upstream: 'unsigned' },
      { path: '/public', upstream: 'secure', auth: 'none' },
    ],
  });
}

export interface AssertionSetup {
  gw: TestGateway;
  /** fastify + gatewayAssertionPlugin, audience "secure". */
  secure: VerifyingUpstream;
  /** node:http + verifyGatewayAssertion, audience "plain". */
  plain: VerifyingUpstream;
  /** Records what upstreams receive, audience "echo". */
  echo: EchoUpstream;
  jwksUrl: string;
  /** A premium user, signed in. */
  user: TestUser;
  close(): Promise<void>;
}

/** The upstreams of assertionTestConfig, its gateway, both verifiers protecting, and a user. */
export async function startAssertionSetup(): Promise<AssertionSetup> {
  const [secure, plain, echo] = await Promise.all([startFastifyUpstream(), startPlainUpstream(), startEchoUpstream()]);
  const gw = await startTestGateway(assertionTestConfig(secure.url, plain.url, echo.url));
  const jwksUrl = `${gw.url}/.well-known/gateway-assertion-keys.json`;
  await secure.protect({ jwksUrl, audience: 'secure' });
  await plain.protect({ jwksUrl, audience: 'plain' });
  const user = await makeUser(gw, { plan: 'premium' });
  return {
    gw, secure, plain, echo, jwksUrl, user,
    async close() {
      await gw.close();
      await Promise.all([secure.close(), plain.close(), echo.close()]);
    },
  };
}

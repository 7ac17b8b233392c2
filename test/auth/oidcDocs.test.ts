// docs/identity-providers.md#local-provider, run as it is written against a real provider on
// loopback (test/helpers/oidcProvider.ts): start, sign in at the provider, callback, exchange.
// Then the page's `npm run idp` (#local-idp), as a reader runs it, with the gateway of that example
// and the variables the command prints, and a sign-in through both over HTTP (issue 45).
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import path from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { s256 } from '../../src/auth/providers/oidc.js';
import { ensureBuilt, ROOT } from '../helpers/cli.js';
import { claims, closeSql, describeWithServices, newEmail, startTestGateway, testConfigFromYaml, throwawayDatabase } from '../helpers/gateway.js';
import { docsBlock, docsExample } from '../helpers/docs.js';
import { signInAtProvider, startTestProvider } from '../helpers/oidcProvider.js';
import { sparePort } from '../helpers/ports.js';

const EXCHANGE = '/api/v1/auth/oidc/exchange';

describeWithServices('identity providers: the documented configuration', () => {
  afterAll(() => closeSql());

  it('docs/identity-providers.md#local-provider runs as written against a local provider', async () => {
    const publicUrl = 'http://localhost:9';
    const idp = await startTestProvider([`${publicUrl}/api/v1/auth/oidc/local/callback`]);
    const gw = await startTestGateway(testConfigFromYaml(docsExample('identity-providers', 'local-provider'), {
      OIDC_ISSUER: idp.issuer, OIDC_CLIENT_ID: idp.clientId, OIDC_CLIENT_SECRET: idp.clientSecret, GATEWAY_PUBLIC_URL: publicUrl, APP_ORIGIN: 'http://127.0.0.1:5173',
    }));
    try {
      const subject = `sub-${randomUUID()}`;
      idp.users.set(subject, { email: newEmail('docs'), email_verified: true });
      const verifier = randomBytes(32).toString('base64url');
      const started = await gw.get(`/api/v1/auth/oidc/local/start?return_to=${encodeURIComponent('http://127.0.0.1:5173/')}&code_challenge=${s256(verifier)}`);
      expect(started.status).toBe(302);
      const back = await signInAtProvider(String(started.headers.location), subject);
      const cookie = String((started.headers['set-cookie'] as string[])[0]).split(';')[0]!;
      const res = await gw.get(`${back.pathname}${back.search}`, { headers: { cookie } });
      const fragment = new URLSearchParams(new URL(String(res.headers.location)).hash.slice(1));
      const pair = await gw.post(EXCHANGE, { login_code: fragment.get('login_code'), code_verifier: verifier });
      expect(pair.status).toBe(200);
      expect(claims(pair.json.access_token)).toMatchObject({ amr: ['fed'] });
    } finally {
      await gw.close();
      await idp.close();
    }
  });

  it('docs/identity-providers.md#local-idp: `npm run idp` is the provider the local example signs in with', async () => {
    ensureBuilt();
    const publicUrl = `http://localhost:${await sparePort()}`;
    const appOrigin = 'http://127.0.0.1:5173';
    // As a reader's shell runs it, but for the port (9000 may be taken here) and the build, which
    // ensureBuilt has done (npm runs no preidp script with ignore-scripts, and the rest as written).
    const idp = await startCommand(docsBlock('identity-providers', 'local-idp'), {
      IDP_PORT: String(await sparePort()), GATEWAY_PUBLIC_URL: publicUrl, APP_ORIGIN: appOrigin, npm_config_ignore_scripts: 'true',
    });
    const db = await throwawayDatabase({ migrated: true });
    try {
      // The variables it prints, as `export NAME=value` lines, are what the example reads.
      const printed = Object.fromEntries([...idp.output.matchAll(/^export (\w+)=(\S+)$/gm)].map((m) => [m[1]!, m[2]!]));
      expect(Object.keys(printed)).toEqual(['OIDC_ISSUER', 'OIDC_CLIENT_ID', 'OIDC_CLIENT_SECRET', 'GATEWAY_PUBLIC_URL', 'APP_ORIGIN']);
      expect(printed).toMatchObject({ OIDC_CLIENT_ID: 'gateway', OIDC_CLIENT_SECRET: 'a-local-client-secret', GATEWAY_PUBLIC_URL: publicUrl });
      const config = testConfigFromYaml(docsExample('identity-providers', 'local-provider'), printed);
      const gw = await startTestGateway({
        ...config,
        server: { ...config.server, port: Number(new URL(publicUrl).port) },
        storage: { ...config.storage, postgres: db.url, redisKeyPrefix: db.storage.redisKeyPrefix },
      });
      try {
        const verifier = randomBytes(32).toString('base64url');
        const back = await signInThroughGateway(`${publicUrl}/api/v1/auth/oidc/local/start?return_to=${encodeURIComponent(`${appOrigin}/`)}&code_challenge=${s256(verifier)}`, 'grace');
        expect(back.origin).toBe(appOrigin);
        const fragment = new URLSearchParams(back.hash.slice(1));
        const res = await fetch(`${publicUrl}/api/v1/auth/oidc/exchange`, {
          method: 'POST', headers: { 'content-type': 'application/json', origin: appOrigin },
          body: JSON.stringify({ login_code: fragment.get('login_code'), code_verifier: verifier }),
        });
        expect(res.status).toBe(200);
        const pair = await res.json() as { access_token: string };
        expect(claims(pair.access_token)).toMatchObject({ amr: ['fed'] });
        const me = await fetch(`${publicUrl}/api/v1/user/me`, { headers: { authorization: `Bearer ${pair.access_token}` } });
        expect(await me.json()).toMatchObject({ email: 'grace@example.com' });
      } finally {
        await gw.close();
      }
    } finally {
      await idp.stop();
      await db.drop();
    }
  }, 60_000);
});

/** A shell block started in bash from the repository root, once it printed `Press Ctrl-C`; stop() is the reader's Ctrl-C. */
async function startCommand(block: string, env: Record<string, string>): Promise<{ output: string; stop(): Promise<void> }> {
  // node (and the npm it runs) of this run first, as commands.test.ts does.
  const PATH = [path.dirname(process.execPath), process.env.PATH ?? ''].join(path.delimiter);
  const child: ChildProcess = spawn('bash', ['-e', '-c', block], { cwd: ROOT, env: { PATH, HOME: process.env.HOME ?? ROOT, ...env }, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let output = '';
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes('Press Ctrl-C')) resolve();
    });
    child.stderr!.on('data', (chunk: Buffer) => { output += chunk.toString(); });
    void exited.then(() => reject(new Error(`\`${block.trim()}\` exited:\n${output}`)));
  });
  return {
    output,
    stop: async () => {
      process.kill(-child.pid!, 'SIGINT'); // bash, npm and node: the terminal's process group
      await exited;
    },
  };
}

/**
 * A browser's sign-in, as a plain HTTP client with cookies: the gateway's start, the provider's
 * login (as `login`) and consent forms, the gateway's callback; returns the page it sends the
 * browser back to (the application's, with the login code in the fragment).
 */
async function signInThroughGateway(startUrl: string, login: string): Promise<URL> {
  const jar = new Map<string, string>();
  const step = async (url: URL) => {
    const res = await fetch(url, { redirect: 'manual', headers: { cookie: [...jar].map(([k, v]) => `${k}=${v}`).join('; ') } });
    for (const set of res.headers.getSetCookie()) {
      const [name, ...value] = set.split(';')[0]!.split('=');
      jar.set(name!.trim(), value.join('='));
    }
    expect(res.status, `${url.pathname}: ${await res.text()}`).toBe(302);
    return new URL(res.headers.get('location')!, url);
  };
  const atProvider = await step(new URL(startUrl));
  const callback = await signInAtProvider(atProvider.href, login);
  expect(callback.origin).toBe(new URL(startUrl).origin);
  return step(callback);
}


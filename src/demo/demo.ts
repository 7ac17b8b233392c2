// `npm run demo`: the gateway doing its job on this machine, with nothing to install or configure.
// Starts a small echo upstream, a mail catcher (an SMTP server that prints the links it receives),
// a fake of Stripe (stripeFake.ts: checkout, and the webhook a payment sends) and the gateway
// (embedded PGlite in a fresh temporary directory, demo/gateway.demo.yaml: one route per guard),
// then prints curl commands to paste, and the address of a browser page
// (demo/browser.html, served by the upstream: another origin than the gateway's) that does the same
// through CORS. A trace receiver prints each request's OpenTelemetry trace as it arrives.
// Ctrl-C stops them all and deletes the temporary data.
import '../cli/nodeVersion.js';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../config/load.js';
import type { Config } from '../config/schema.js';
import { importUsers, readUsers } from '../import/index.js';
import { knownPlans } from '../pipeline/plans.js';
import { DEMO_GITHUB_LOGIN, DEMO_GITHUB_USER, startGitHubFake, type GitHubFake } from './githubFake.js';
import { startEchoUpstream, startMailCatcher, startTraceReceiver, type Inbox } from './servers.js';
import { startStripeFake, type StripeFake } from '../stripeFake/index.js';
import { walkthrough } from './walkthrough.js';
import { startDemoIdp, type DemoIdp } from './localProvider.js';
import { createLogger } from '../telemetry/logger.js';
import { startGateway, type RunningGateway } from '../server.js';

const CONFIG_FILE = fileURLToPath(new URL('../../demo/gateway.demo.yaml', import.meta.url));
const USERS_FILE = fileURLToPath(new URL('../../demo/users.csv', import.meta.url));

/** The preferred port when it is free on 127.0.0.1, else one the system picks (not 0: port 0 means no admin or decisions listener). */
async function freePort(preferred: number): Promise<number> {
  const tryPort = (port: number) => new Promise<number | undefined>((resolve) => {
    const probe = net.createServer();
    probe.once('error', () => resolve(undefined));
    probe.listen(port, '127.0.0.1', () => {
      const { port: bound } = probe.address() as net.AddressInfo;
      probe.close(() => resolve(bound));
    });
  });
  return (await tryPort(preferred)) ?? (await tryPort(0)) ?? 0;
}

/** A link that signs a browser in to the console once, within 10 minutes (docs/console.md), minted with the admin key. */
async function consoleLink(adminUrl: string | undefined, adminKey: string): Promise<string | undefined> {
  if (!adminUrl) return undefined;
  const res = await fetch(`${adminUrl}/console/tickets`, { method: 'POST', headers: { authorization: `Bearer ${adminKey}` } });
  return res.status === 201 ? ((await res.json()) as { url: string }).url : undefined;
}

/** The environment demo/gateway.demo.yaml reads: where this run's parts listen, and its fresh secrets. */
async function demoEnvironment(page: string, dataDir: string, mailServer: net.Server, traces: net.Server, stripe: StripeFake): Promise<{ adminKey: string; env: NodeJS.ProcessEnv }> {
  const adminKey = `demo-admin-${randomBytes(12).toString('hex')}`;
  const env = {
    ...process.env,
    DEMO_DATA_DIR: dataDir,
    DEMO_UPSTREAM: page.slice(0, -1),
    // The page's origin, as a browser writes it whichever name you open it by.
    DEMO_PAGE_ORIGIN: page.slice(0, -1),
    DEMO_PAGE_ORIGIN_LOCALHOST: page.slice(0, -1).replace('127.0.0.1', 'localhost'),
    DEMO_JWT_SECRET: randomBytes(48).toString('base64url'),
    DEMO_ADMIN_KEY: adminKey,
    DEMO_SMTP_URL: `smtp://127.0.0.1:${(mailServer.address() as net.AddressInfo).port}`,
    DEMO_OTLP_ENDPOINT: `http://127.0.0.1:${(traces.address() as net.AddressInfo).port}`,
    DEMO_STRIPE_URL: stripe.url,
    DEMO_STRIPE_WEBHOOK_SECRET: `whsec_${randomBytes(24).toString('base64url')}`,
    DEMO_PORT: process.env.PORT ? undefined : String(await freePort(8080)),
    // Whoever sets PORT (a second demo, a test) chose the ports: the admin and decisions listeners take any free ones.
    DEMO_ADMIN_PORT: String(await freePort(process.env.PORT ? 0 : 9090)),
    DEMO_DECISIONS_PORT: String(await freePort(process.env.PORT ? 0 : 9191)),
  };
  return { adminKey, env };
}

async function main(): Promise<void> {
  console.log('Starting the demo: an echo upstream and the gateway on embedded storage…');
  // The embedded database in data/, the mail catcher's tokens in mail/; all deleted at the end.
  const root = mkdtempSync(path.join(os.tmpdir(), 'gateway-demo-'));
  const dataDir = path.join(root, 'data');
  const tokensDir = path.join(root, 'mail');
  mkdirSync(tokensDir);
  let gatewayUrl = '';
  const inbox: Inbox = new Map();
  const upstream = await startEchoUpstream(() => gatewayUrl, inbox);
  const page = `http://127.0.0.1:${(upstream.address() as net.AddressInfo).port}/`;
  const mail = await startMailCatcher(tokensDir, inbox);
  const traces = await startTraceReceiver();
  // Stripe, as far as the gateway calls it (checkout, subscriptions): paying a checkout URL sends the webhook.
  const stripe = await startStripeFake();
  let gateway: RunningGateway | undefined;
  let idp: DemoIdp | undefined;
  let github: GitHubFake | undefined;
  let stopping: Promise<void> | undefined;
  const stop = () => (stopping ??= (async () => {
    await gateway?.close().catch((err: unknown) => console.error(`while stopping the gateway: ${String(err)}`));
    await idp?.close();
    await github?.close();
    await stripe.close();
    upstream.closeAllConnections();
    await new Promise<void>((resolve) => upstream.close(() => resolve()));
    await new Promise<void>((resolve) => mail.close(() => resolve()));
    await new Promise<void>((resolve) => traces.close(() => resolve()));
    rmSync(root, { recursive: true, force: true });
  })());
  const onSignal = () => {
    if (stopping) process.exit(130); // a second Ctrl-C: do not wait
    console.log('\nStopping the demo…');
    void stop().then(() => {
      console.log('Demo stopped; its data was deleted.');
      process.exit(0);
    });
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  try {
    const { adminKey, env } = await demoEnvironment(page, dataDir, mail.server, traces, stripe);
    // "Sign in with Demo IdP" (src/demo/localProvider.ts): the provider registers the gateway's callback, so
    // the gateway's port is known before it listens (PORT=0 becomes a free port here).
    const gatewayPort = process.env.PORT && process.env.PORT !== '0' ? process.env.PORT : env.DEMO_PORT ?? String(await freePort(0));
    idp = await startDemoIdp(`http://127.0.0.1:${gatewayPort}`);
    // "Sign in with GitHub (demo)": a fake of GitHub's endpoints (src/demo/githubFake.ts), its one user approving at once.
    github = await startGitHubFake({ clientId: 'demo-github', defaultLogin: DEMO_GITHUB_LOGIN, users: { [DEMO_GITHUB_LOGIN]: DEMO_GITHUB_USER } });
    Object.assign(env, idp.env, { DEMO_GITHUB_URL: github.url, DEMO_GITHUB_CLIENT_SECRET: github.clientSecret }, process.env.PORT ? { PORT: gatewayPort } : {});
    const { config } = loadConfig(CONFIG_FILE, env);
    // Request denials and errors show up here as you paste the commands (LOG_LEVEL=debug: every request).
    const log = createLogger(process.env.LOG_LEVEL ?? 'info');
    gateway = await startGateway(config, { log });
    const imported = await importDemoUsers(gateway, config);
    // Start-up lines first, so the walkthrough is the last thing on the screen.
    await new Promise((resolve) => setTimeout(resolve, 50));
    await new Promise<void>((resolve) => log.flush(() => resolve()));
    gatewayUrl = gateway.url.replace('localhost', '127.0.0.1');
    stripe.deliverTo(`${gatewayUrl}/api/v1/billing/stripe/webhook`, env.DEMO_STRIPE_WEBHOOK_SECRET!);
    // Opened by a host name, not an address: passkeys are bound to one (auth.passkeys.rpId: localhost).
    const pageByName = page.replace('127.0.0.1', 'localhost');
    console.log(imported.text);
    console.log(walkthrough({
      url: gatewayUrl, decisionsUrl: gateway.decisionsUrl, adminUrl: gateway.adminUrl, adminKey, tokensDir, page: pageByName, consoleUrl: await consoleLink(gateway.adminUrl, adminKey),
      firstUserId: imported.created + 1,
    }));
  } catch (err) {
    console.error(`The demo could not start: ${err instanceof Error ? err.message : String(err)}`);
    await stop();
    process.exitCode = 1;
  }
}

/**
 * Moving in (CONTRACT §27, docs/migrating.md): the ten accounts of demo/users.csv, imported as
 * `gateway import users demo/users.csv` would (the running demo holds its embedded database, so
 * here through the instance's own), with the command's report.
 */
async function importDemoUsers(gateway: RunningGateway, config: Config): Promise<{ text: string; created: number }> {
  const records = readUsers(readFileSync(USERS_FILE, 'utf8'), 'csv', { plans: knownPlans(config) });
  const report = await importUsers(gateway.services.db, records, { dryRun: false, actor: 'system', format: 'csv' });
  const text = ['', `Imported demo/users.csv (docs/migrating.md): created ${report.created}, skipped_existing ${report.skipped_existing}, refused ${report.refused}.`].join('\n');
  return { text, created: report.created };
}

void main();

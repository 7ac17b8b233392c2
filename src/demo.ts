// `npm run demo`: the gateway doing its job on this machine, with nothing to install or configure.
// Starts a small echo upstream and the gateway (embedded PGlite in a fresh temporary directory,
// demo/gateway.demo.yaml: one route per guard), then prints curl commands to paste. Ctrl-C stops
// both and deletes the temporary data.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig } from './config/load.js';
import { createLogger } from './logger.js';
import { startGateway, type RunningGateway } from './server.js';

const CONFIG_FILE = fileURLToPath(new URL('../demo/gateway.demo.yaml', import.meta.url));

/** The echo upstream: answers with what the gateway told it about the caller. */
function startEchoUpstream(): Promise<http.Server> {
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      // The headers an application behind the gateway acts on: identity, request id, forwarding.
      const received: Record<string, string> = {};
      for (const [name, value] of Object.entries(req.headers)) {
        if (name.startsWith('x-') || name === 'authorization') received[name] = String(value);
      }
      const body = `${JSON.stringify({ upstream: 'echo', method: req.method, path: req.url, headers: received }, null, 2)}\n`;
      res.writeHead(200, { 'content-type': 'application/json; charset=utf-8' });
      res.end(body);
    });
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve(server));
  });
}

/** The preferred port when it is free on 127.0.0.1, else one the system picks (not 0: admin port 0 means "no admin"). */
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

function walkthrough(url: string, adminUrl: string | undefined, adminKey: string): string {
  const json = "-H 'content-type: application/json'";
  const show = `-w '  (HTTP %{http_code})\\n'`;
  const lines = [
    '',
    `The gateway is listening on ${url}, in front of an echo server that answers with the headers it received.`,
    'Routes (demo/gateway.demo.yaml): /api/v1/public (no guard), /api/v1/profile (token required),',
    '/api/v1/reports (plans premium and pro), /api/v1/races (free plan: one use a day).',
    '',
    'In another terminal, paste these one by one:',
    '',
    '# 1. Register: every new account is on the free plan',
    `curl -s ${show} -X POST ${url}/api/v1/auth/register ${json} -d '{"email":"ada@example.com","password":"correct-horse-battery"}'`,
    '',
    '# 2. Log in, and keep the access token in a shell variable',
    `TOKEN=$(curl -s -X POST ${url}/api/v1/auth/login ${json} -d '{"email":"ada@example.com","password":"correct-horse-battery"}' | sed -E 's/.*"access_token":"([^"]+)".*/\\1/'); echo "$TOKEN"`,
    '',
    '# 3. No token: 401, the upstream never sees the request',
    `curl -s ${show} ${url}/api/v1/profile`,
    '',
    '# 4. With the token: the upstream receives x-user-id, x-user-plan, x-user-email, x-auth-method and',
    '#    x-request-id, set by the gateway (the forged X-User-Plan sent here is removed, and the token is not forwarded)',
    `curl -s ${show} ${url}/api/v1/profile -H "Authorization: Bearer $TOKEN" -H 'X-User-Plan: pro'`,
    '',
    '# 5. A premium/pro route on the free plan: 403, with the plans needed and where to upgrade',
    `curl -s ${show} ${url}/api/v1/reports -H "Authorization: Bearer $TOKEN"`,
    '',
    '# 6. The free plan\'s daily limit: the first call goes through, the second one is refused with 429',
    `curl -s ${show} ${url}/api/v1/races -H "Authorization: Bearer $TOKEN"`,
    `curl -s ${show} ${url}/api/v1/races -H "Authorization: Bearer $TOKEN"`,
  ];
  if (adminUrl) {
    lines.push(
      '',
      '# 7. Upgrade the user (id 1, from step 1) to premium with the admin API: the same token now passes the',
      '#    plan guard, because the gateway reads the plan from the database, not from the token',
      `curl -s ${show} -X PUT ${adminUrl}/admin/v1/users/1/plan -H 'Authorization: Bearer ${adminKey}' ${json} -d '{"plan":"premium"}'`,
      `curl -s ${show} ${url}/api/v1/reports -H "Authorization: Bearer $TOKEN"`,
    );
  }
  lines.push('', 'Press Ctrl-C to stop the demo (its data is deleted).', '');
  return lines.join('\n');
}

async function main(): Promise<void> {
  console.log('Starting the demo: an echo upstream and the gateway on embedded storage…');
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'gateway-demo-'));
  const upstream = await startEchoUpstream();
  let gateway: RunningGateway | undefined;
  let stopping: Promise<void> | undefined;
  const stop = () => (stopping ??= (async () => {
    await gateway?.close().catch((err: unknown) => console.error(`while stopping the gateway: ${String(err)}`));
    upstream.closeAllConnections();
    await new Promise<void>((resolve) => upstream.close(() => resolve()));
    rmSync(dataDir, { recursive: true, force: true });
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
    const adminKey = `demo-admin-${randomBytes(12).toString('hex')}`;
    const env = {
      ...process.env,
      DEMO_DATA_DIR: dataDir,
      DEMO_UPSTREAM: `http://127.0.0.1:${(upstream.address() as net.AddressInfo).port}`,
      DEMO_JWT_SECRET: randomBytes(48).toString('base64url'),
      DEMO_ADMIN_KEY: adminKey,
      DEMO_PORT: process.env.PORT ? undefined : String(await freePort(8080)),
      DEMO_ADMIN_PORT: String(await freePort(9090)),
    };
    const { config } = loadConfig(CONFIG_FILE, env);
    // Request denials and errors show up here as you paste the commands (LOG_LEVEL=debug: every request).
    const log = createLogger(process.env.LOG_LEVEL ?? 'info');
    gateway = await startGateway(config, { log });
    // Start-up lines first, so the walkthrough is the last thing on the screen.
    await new Promise((resolve) => setTimeout(resolve, 50));
    await new Promise<void>((resolve) => log.flush(() => resolve()));
    console.log(walkthrough(gateway.url.replace('localhost', '127.0.0.1'), gateway.adminUrl, adminKey));
  } catch (err) {
    console.error(`The demo could not start: ${err instanceof Error ? err.message : String(err)}`);
    await stop();
    process.exitCode = 1;
  }
}

void main();

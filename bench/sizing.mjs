#!/usr/bin/env node
// npm run sizing: the figures docs/production.md sizes a deployment with, measured on this
// machine. One gateway (the built CLI, as npm start runs it) on a Postgres database and Redis key
// prefix of its own (Postgres is needed: statements are counted in pg_stat_database):
//   - Postgres transactions per second of an idle instance;
//   - Postgres transactions per counted request (`dailyLimit: true`), for one lone client and for
//     one user on 50 concurrent connections;
//   - the gateway's resident memory for open idle keep-alive connections, and for open WebSockets
//     (each one a client socket and an upstream socket), measured at SIZING_SOCKETS (5,000: the
//     machine's descriptor limit is 20,000 per process) and given per 10,000.
// Requests per core per route kind are npm run bench's (docs/benchmark.md).
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import net from 'node:net';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  baseConfig, createCleanups, freePort, httpClient, positive, prepareStorage, runUpstream, seed, sleep, spawnGateway, startChild, waitForGateway, writeConfig,
} from './common.mjs';

const SELF = fileURLToPath(import.meta.url);
const SOCKETS = Math.round(positive(process.env.SIZING_SOCKETS, 5000));
const IDLE_SECONDS = 10;
const COUNTED_REQUESTS = 20_000;
const LONE_REQUESTS = 500;
const PASSWORD = 'sizing-password-0123';

async function runWsUpstream() {
  const { WebSocketServer } = await import('ws');
  const server = http.createServer((_req, res) => res.writeHead(426).end());
  new WebSocketServer({ server, perMessageDeflate: false }).on('connection', (ws) => ws.on('message', (data) => ws.send(data)));
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  process.send({ port: server.address().port });
  process.on('disconnect', () => process.exit(0));
  process.on('SIGTERM', () => process.exit(0));
}

/** Resident memory of a process, in MiB (/proc). */
function rssMiB(pid) {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8').split('\n').find((l) => l.startsWith('VmRSS:'));
  return Number(line.split(/\s+/)[1]) / 1024;
}

async function main() {
  const { cleanups, cleanup } = createCleanups();
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'gw-sizing-'));
  cleanups.push(async () => rmSync(tmp, { recursive: true, force: true }));
  const { send, login } = httpClient({ maxSockets: 64 });
  try {
    const storage = await prepareStorage(tmp, cleanups, 'sizing');
    if (!storage.postgres) throw new Error('npm run sizing counts Postgres statements: it needs Postgres (DATABASE_URL)');
    const { pro: [user] } = await seed(storage, { tag: 'sizing', password: PASSWORD, users: 1, free: async () => [] });
    const upstream = await startChild(SELF, 'upstream', [], cleanups);
    const wsUpstream = await startChild(SELF, 'wsupstream', [], cleanups);
    const port = await freePort();
    const file = path.join(tmp, 'sizing.yaml');
    writeConfig(file, {
      ...baseConfig(port, storage),
      auth: { jwt: { secret: randomBytes(48).toString('base64url') }, rateLimit: { max: 0 } },
      plans: { limits: { pro: { daily: 100_000_000 } } },
      admin: { port: 0 },
      upstreams: { echo: { url: upstream.url }, live: { url: wsUpstream.url } },
      routes: [
        { path: '/public', upstream: 'echo', auth: 'none' },
        { path: '/counted', upstream: 'echo', auth: 'required', dailyLimit: true },
        { path: '/ws', upstream: 'live', auth: 'none', websocket: true },
      ],
    });
    const gateway = spawnGateway(file, { stdio: 'ignore', logLevel: 'warn' }, cleanups);
    const url = `http://127.0.0.1:${port}`;
    if (!(await waitForGateway(send, gateway, url, '/healthz'))) throw new Error('the gateway did not start');
    const { default: pg } = await import('pg');
    const db = new pg.Client({ connectionString: storage.postgres });
    await db.connect();
    cleanups.push(() => db.end());
    const dbName = new URL(storage.postgres).pathname.slice(1);
    // pg_stat_database lags: a busy backend reports at most once a second, an idle one (a pooled
    // connection between requests) within 10 s. A reading is taken once every report is in, and
    // says when the window it closes ended.
    const READING_LAG_MS = 11_000;
    const transactions = async () => {
      const at = performance.now();
      await sleep(READING_LAG_MS);
      await db.query('SELECT pg_stat_clear_snapshot()');
      const { rows } = await db.query('SELECT xact_commit + xact_rollback AS n FROM pg_stat_database WHERE datname = $1', [dbName]);
      return { n: Number(rows[0].n), at };
    };
    // Each reading is itself two transactions of this database.
    const READING_COST = 2;

    // Idle.
    await sleep(3000);
    const idleStart = await transactions();
    await sleep(IDLE_SECONDS * 1000);
    const idleEnd = await transactions();
    const idlePerSecond = (idleEnd.n - idleStart.n - READING_COST) / ((idleEnd.at - idleStart.at) / 1000);

    // Counted requests: one lone client, then one user on 50 connections; what the instance does
    // idle meanwhile is taken off.
    const { access } = await login(url, user);
    const auth = { authorization: `Bearer ${access}` };
    const counted = async (requests, concurrency) => {
      const before = await transactions();
      let next = 0;
      const started = performance.now();
      await Promise.all(Array.from({ length: concurrency }, async () => {
        while (next++ < requests) {
          const res = await send(url, 'GET', '/counted/item', { headers: auth });
          if (res.status !== 200) throw new Error(`counted: ${res.status} ${res.text}`);
        }
      }));
      const seconds = (performance.now() - started) / 1000;
      const after = await transactions();
      const background = idlePerSecond * ((after.at - before.at) / 1000);
      return { perRequest: (after.n - before.n - READING_COST - background) / requests, seconds };
    };
    const lone = await counted(LONE_REQUESTS, 1);
    const busy = await counted(COUNTED_REQUESTS, 50);

    // Open idle connections: each sends one request and stays open.
    await sleep(2000);
    const rssBefore = rssMiB(gateway.pid);
    const connections = [];
    for (let i = 0; i < SOCKETS; i += 500) {
      await Promise.all(Array.from({ length: Math.min(500, SOCKETS - i) }, () => new Promise((resolve, reject) => {
        const socket = net.connect(port, '127.0.0.1', () => socket.write('GET /public/item HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n'));
        connections.push(socket);
        socket.once('data', resolve);
        socket.once('error', reject);
      })));
    }
    const open = connections.length;
    await sleep(2000);
    const rssConnections = rssMiB(gateway.pid);
    for (const socket of connections) socket.destroy();
    await sleep(3000);

    // Open WebSockets.
    const { default: WebSocket } = await import('ws');
    const sockets = [];
    const rssBeforeWs = rssMiB(gateway.pid);
    for (let i = 0; i < SOCKETS; i += 250) {
      await Promise.all(Array.from({ length: Math.min(250, SOCKETS - i) }, () => new Promise((resolve, reject) => {
        const ws = new WebSocket(`${url.replace('http', 'ws')}/ws/socket`, { perMessageDeflate: false });
        sockets.push(ws);
        ws.once('open', () => { ws.send('hello'); ws.once('message', resolve); });
        ws.once('error', reject);
      })));
    }
    await sleep(2000);
    const rssWebSockets = rssMiB(gateway.pid);
    for (const ws of sockets) ws.terminate();

    const per10k = (mib, n) => (mib * 10_000 / n).toFixed(0);
    console.log(`\nSizing, one gateway on ${os.cpus().length} CPUs (${os.cpus()[0]?.model.trim() ?? 'unknown'}), Node ${process.version}, ${storage.label}\n`);
    console.log('| measure | value |');
    console.log('|---|---:|');
    console.log(`| Postgres transactions per second, idle instance | ${idlePerSecond.toFixed(1)} |`);
    console.log(`| Postgres transactions per counted request, a lone client (${LONE_REQUESTS} requests) | ${lone.perRequest.toFixed(2)} |`);
    const load = `${COUNTED_REQUESTS} requests, ${(COUNTED_REQUESTS / busy.seconds).toFixed(0)} req/s`;
    console.log(`| Postgres transactions per counted request, one user on 50 connections (${load}) | ${busy.perRequest.toFixed(4)} |`);
    console.log(`| resident memory at start of the measure, MiB | ${rssBefore.toFixed(0)} |`);
    console.log(`| more memory per 10,000 open idle connections, MiB (${open} measured) | ${per10k(rssConnections - rssBefore, open)} |`);
    console.log(`| more memory per 10,000 open WebSockets, MiB (${sockets.length} measured) | ${per10k(rssWebSockets - rssBeforeWs, sockets.length)} |`);
  } catch (err) {
    console.error(`sizing failed: ${err.stack ?? err}`);
    process.exitCode = 1;
  } finally {
    await cleanup();
  }
}

const role = process.argv[2] === '--role' ? process.argv[3] : 'main';
if (role === 'upstream') await runUpstream((req) => ({ path: req.url }));
else if (role === 'wsupstream') await runWsUpstream();
else await main();

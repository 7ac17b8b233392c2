#!/usr/bin/env node
// npm run soak: the built gateway under sustained mixed load for a set time, then a report of
// errors, p99 latencies and memory growth (RSS and heap, before and after).
//
// Layout: this process generates the load (autocannon); the upstream is a forked child and the
// gateway is the built CLI (`node dist/cli.js start`), so no two of them share an event loop. The
// gateway runs on a Postgres database and Redis key prefix of its own, dropped afterwards (or on
// embedded PGlite when no Postgres answers). Everything listens on loopback only.
//
// The mix, all at once: logins (~10/s, argon2), refresh-token rotations, proxied bearer requests,
// proxied API-key requests and daily-limit requests (free users: 50 uses, then 429s). Halfway,
// the config file is changed and the gateway sent SIGHUP, so a live reload happens under load.
// At the end it gets SIGTERM, and must drain and exit 0.
//
// Environment: SOAK_SECONDS (default 60), SOAK_WARMUP (default 5), SOAK_CONNECTIONS (proxied
// connections, default 24), SOAK_USERS (users per group, default 20), SOAK_LOG_LEVEL (the
// gateway's, default warn), DATABASE_URL, REDIS_URL.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  baseConfig, createCleanups, freePort, httpClient, positive, prepareStorage, runUpstream, seed, sleep, spawnGateway, startChild, waitForGateway, writeConfig,
} from './common.mjs';

const SELF = fileURLToPath(import.meta.url);
const env = process.env;
const SECONDS = positive(env.SOAK_SECONDS, 60);
const WARMUP = positive(env.SOAK_WARMUP, 5);
const CONNECTIONS = Math.round(positive(env.SOAK_CONNECTIONS, 24));
const USERS = Math.round(positive(env.SOAK_USERS, 20));
const PASSWORD = 'soak-password-0123';
const LOGINS_PER_SECOND = 10;
const FREE_DAILY_LIMIT = 50;
const REFRESH_CHAINS = 16; // refresh tokens in rotation (each rotation returns the next one)
const SAMPLE_EVERY_MS = 1000;

// ── child: the upstream ─────────────────────────────────────────────────────────────────────
const echoIdentity = (req) => ({ path: req.url, user: req.headers['x-user-id'] ?? null, method: req.headers['x-auth-method'] ?? null });

// ── the load generator ──────────────────────────────────────────────────────────────────────
async function main() {
  const { default: autocannon } = await import('autocannon');
  const { cleanups, cleanup } = createCleanups();

  const tmp = mkdtempSync(path.join(os.tmpdir(), 'gw-soak-'));
  cleanups.push(async () => rmSync(tmp, { recursive: true, force: true }));
  try {
    const storage = await prepareStorage(tmp, cleanups, 'soak');
    const { url: upstream } = await startChild(SELF, 'upstream', [], cleanups);
    const users = await seedUsers(storage);
    const gateway = await startGateway(tmp, storage, upstream, cleanups);
    console.log(`soak: ${SECONDS} s of mixed load after ${WARMUP} s of warm-up; ${storage.label}`);

    // Tokens: every pro user logs in once; refresh chains start from logins too.
    const pro = await Promise.all(users.pro.map((u) => login(gateway.url, u)));
    // Free users: one group is used up during the warm-up, a fresh one during the soak.
    const freeWarm = await Promise.all(users.free.slice(0, USERS).map((u) => login(gateway.url, u)));
    const freeSoak = await Promise.all(users.free.slice(USERS).map((u) => login(gateway.url, u)));
    let free = freeWarm;
    const refreshPool = [];
    for (let i = 0; i < REFRESH_CHAINS; i++) refreshPool.push((await login(gateway.url, users.pro[i % users.pro.length])).refresh);

    const pick = (list) => list[Math.floor(Math.random() * list.length)];
    const scenarios = [
      {
        name: 'proxied bearer', expect: [200], connections: Math.ceil(CONNECTIONS / 2),
        request: () => ({ method: 'GET', path: `/app/bearer/${randomBytes(3).toString('hex')}`, headers: { authorization: `Bearer ${pick(pro).access}` } }),
      },
      {
        name: 'proxied API key', expect: [200], connections: Math.ceil(CONNECTIONS / 4),
        request: () => ({ method: 'GET', path: '/app/key', headers: { 'x-api-key': pick(users.pro).apiKey } }),
      },
      {
        name: 'daily limit', expect: [200, 429], connections: Math.ceil(CONNECTIONS / 4),
        request: () => ({ method: 'GET', path: '/daily/use', headers: { authorization: `Bearer ${pick(free).access}` } }),
      },
      {
        name: 'login', expect: [200], connections: 2, overallRate: LOGINS_PER_SECOND,
        request: () => {
          const u = pick(users.pro);
          return { method: 'POST', path: '/api/v1/auth/login', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: u.email, password: PASSWORD }) };
        },
      },
      {
        // Each rotation's answer puts the new refresh token back in the pool for a later request.
        name: 'refresh', expect: [200], connections: 4,
        request: (context) => {
          context.token = refreshPool.shift() ?? '';
          return { method: 'POST', path: '/api/v1/auth/refresh', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ refresh_token: context.token }) };
        },
        onResponse: (status, body, context) => {
          if (status === 200) refreshPool.push(JSON.parse(body).refresh_token);
          else if (context.token) refreshPool.push(context.token); // keep the chain going (it will be refused again and counted)
        },
      },
    ];

    const run = (seconds, tally) => Promise.all(scenarios.map((s) => load(autocannon, gateway.url, s, seconds, tally)));
    await run(WARMUP, false);
    free = freeSoak;
    await sleep(1000);
    const before = await memory(gateway.adminUrl);

    const samples = [{ t: 0, ...before }];
    const started = Date.now();
    const sampler = setInterval(() => {
      void memory(gateway.adminUrl).then((m) => samples.push({ t: (Date.now() - started) / 1000, ...m }), () => {});
    }, SAMPLE_EVERY_MS);
    // A live reload under load, halfway: a changed upstream timeout and a new route, which must
    // answer without a restart while the rest of the load goes on.
    const reload = sleep(SECONDS * 500).then(async () => {
      gateway.writeConfig({ reloaded: true });
      const at = Math.round((Date.now() - started) / 1000);
      gateway.child.kill('SIGHUP');
      const headers = { authorization: `Bearer ${pro[0].access}` };
      for (let i = 0; i < 50; i++) {
        if ((await send(gateway.url, 'GET', '/reloaded/x', { headers }).catch(() => null))?.status === 200) return `SIGHUP at ${at} s, new route live after ${i * 100} ms or less`;
        await sleep(100);
      }
      return `SIGHUP at ${at} s: the new route never answered (reload FAILED)`;
    });
    const results = await run(SECONDS, true);
    clearInterval(sampler);
    const reloadNote = await reload;
    const after = await memory(gateway.adminUrl);
    await sleep(3000);
    const settled = await memory(gateway.adminUrl);
    const metrics = await scrape(gateway.adminUrl);

    // Graceful shutdown after the soak: must drain and exit 0.
    const stopStarted = Date.now();
    gateway.child.kill('SIGTERM');
    const exit = await gateway.exited;
    const stopMs = Date.now() - stopStarted;

    report({ scenarios, results, before, after, settled, samples, reloadNote, exit, stopMs, metrics, gateway });
    const unexpected = results.reduce((n, r) => n + r.unexpected + r.errors + r.timeouts, 0);
    if (unexpected > 0 || exit.code !== 0 || reloadNote.includes('FAILED')) process.exitCode = 1;
  } catch (err) {
    console.error(`soak failed: ${err.stack ?? err}`);
    process.exitCode = 1;
  } finally {
    await cleanup();
  }
}

function load(autocannon, url, scenario, seconds, tally) {
  const statuses = new Map();
  return new Promise((resolve, reject) => {
    const instance = autocannon({
      url,
      connections: scenario.connections,
      duration: seconds,
      timeout: 10,
      ...(scenario.overallRate ? { overallRate: scenario.overallRate } : {}),
      requests: [{
        setupRequest: (req, context) => ({ ...req, ...scenario.request(context) }),
        onResponse: (status, body, context) => {
          statuses.set(status, (statuses.get(status) ?? 0) + 1);
          scenario.onResponse?.(status, body, context);
        },
      }],
    }, (err, result) => {
      if (err) return reject(err);
      const unexpected = [...statuses].filter(([status]) => !scenario.expect.includes(status)).reduce((n, [, count]) => n + count, 0);
      resolve({
        name: scenario.name, tally, statuses: Object.fromEntries(statuses), unexpected,
        requests: result.requests.total, rps: result.requests.average,
        p50: result.latency.p50, p99: result.latency.p99, max: result.latency.max,
        errors: result.errors, timeouts: result.timeouts,
      });
    });
    instance.on('error', reject);
  });
}

/** Pro users with an API key each (from seed()), and two free users per pro one. */
function seedUsers(storage) {
  return seed(storage, {
    tag: 'soak',
    password: PASSWORD,
    users: USERS,
    free: async (make, i) => [await make('free', i), await make('free', USERS + i)],
  });
}

// ── processes ───────────────────────────────────────────────────────────────────────────────
function gatewayConfig({ port, adminPort, storage, upstream, secret, reloaded = false }) {
  return {
    ...baseConfig(port, storage),
    // A generous limit: every login and refresh still goes through the (Redis) rate-limit store.
    auth: { jwt: { algorithm: 'HS256', secret }, accessTokenTtl: '12h', rateLimit: { max: 1_000_000_000, window: '1m' } },
    // Each free user gets this many counted uses (Postgres writes), then 429s (the Redis gate).
    plans: { freeDailyLimit: FREE_DAILY_LIMIT },
    admin: { host: '127.0.0.1', port: adminPort },
    upstreams: { app: { url: upstream, timeout: reloaded ? '31s' : '30s' } },
    routes: [
      { path: '/app', upstream: 'app', auth: 'required' },
      { path: '/daily', upstream: 'app', auth: 'required', dailyLimit: true },
      ...(reloaded ? [{ path: '/reloaded', upstream: 'app', auth: 'required' }] : []),
    ],
  };
}

async function startGateway(tmp, storage, upstream, cleanups) {
  const settings = { port: await freePort(), adminPort: await freePort(), storage, upstream, secret: randomBytes(48).toString('base64url') };
  const configFile = path.join(tmp, 'gateway.soak.yaml');
  const rewriteConfig = (extra = {}) => writeConfig(configFile, gatewayConfig({ ...settings, ...extra }));
  rewriteConfig();
  const logs = [];
  const child = spawnGateway(configFile, { stdio: ['ignore', 'pipe', 'pipe'], logLevel: env.SOAK_LOG_LEVEL ?? 'warn' }, cleanups);
  // Warnings and errors only; kept for the report (the last ones print if something went wrong).
  let buffered = '';
  const keep = (chunk) => {
    buffered += chunk;
    const lines = buffered.split('\n');
    buffered = lines.pop();
    for (const line of lines) if (line.trim()) logs.push(line);
    if (logs.length > 2000) logs.splice(0, logs.length - 2000);
  };
  child.stdout.setEncoding('utf8').on('data', keep);
  child.stderr.setEncoding('utf8').on('data', keep);
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  const url = `http://127.0.0.1:${settings.port}`;
  const adminUrl = `http://127.0.0.1:${settings.adminPort}`;
  if (await waitForGateway(send, child, url, '/readyz')) return { url, adminUrl, child, exited, logs, writeConfig: rewriteConfig };
  throw new Error(`the gateway did not start; its output:\n${logs.slice(-20).join('\n')}`);
}

// ── HTTP helpers ────────────────────────────────────────────────────────────────────────────
const { send, login } = httpClient({ maxSockets: 16 });

async function scrape(adminUrl) {
  const res = await send(adminUrl, 'GET', '/metrics');
  if (res.status !== 200) throw new Error(`/metrics answered ${res.status}`);
  return res.text;
}

function metric(text, name) {
  const m = new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.e+-]+)$`, 'm').exec(text);
  return m ? Number(m[1]) : NaN;
}

async function memory(adminUrl) {
  const text = await scrape(adminUrl);
  return {
    rss: metric(text, 'process_resident_memory_bytes'),
    heapUsed: metric(text, 'nodejs_heap_size_used_bytes'),
    heapTotal: metric(text, 'nodejs_heap_size_total_bytes'),
  };
}

// ── report ──────────────────────────────────────────────────────────────────────────────────
function report({ scenarios, results, before, after, settled, samples, reloadNote, exit, stopMs, metrics, gateway }) {
  const mb = (bytes) => `${(bytes / 1024 / 1024).toFixed(1)} MB`;
  const signed = (bytes) => `${bytes >= 0 ? '+' : ''}${mb(bytes)}`;
  const rows = results.map((r, i) => ({
    scenario: r.name,
    expected: scenarios[i].expect.join('|'),
    requests: r.requests,
    'req/s': Math.round(r.rps),
    statuses: Object.entries(r.statuses).map(([s, n]) => `${s}:${n}`).join(' '),
    unexpected: r.unexpected,
    'conn errors': r.errors,
    timeouts: r.timeouts,
    'p50 ms': r.p50,
    'p99 ms': r.p99,
    'max ms': r.max,
  }));
  const total = results.reduce((n, r) => n + r.requests, 0);
  const failures = results.reduce((n, r) => n + r.unexpected + r.errors + r.timeouts, 0);
  console.log(`\nSoak: ${SECONDS} s, ${total} requests (${Math.round(total / SECONDS)} req/s), ${failures} unexpected statuses or errors\n`);
  console.table(rows);
  console.log(`worst p99: ${Math.max(...results.map((r) => r.p99))} ms`);

  // Single readings ride the GC sawtooth; the lowest reading of a stretch is close to the live
  // heap after a collection. A leak shows as a floor that keeps rising from third to third.
  const third = Math.max(1, Math.floor(samples.length / 3));
  const floor = (part) => Math.min(...part.map((s) => s.heapUsed));
  const floors = [floor(samples.slice(0, third)), floor(samples.slice(third, 2 * third)), floor(samples.slice(2 * third))];
  const peak = Math.max(...samples.map((s) => s.rss));
  console.log('\nMemory of the gateway process (from its /metrics):');
  console.table({
    'before (after warm-up)': { rss: mb(before.rss), 'heap used': mb(before.heapUsed), 'heap total': mb(before.heapTotal) },
    'after the soak': { rss: mb(after.rss), 'heap used': mb(after.heapUsed), 'heap total': mb(after.heapTotal) },
    'after 3 s idle': { rss: mb(settled.rss), 'heap used': mb(settled.heapUsed), 'heap total': mb(settled.heapTotal) },
    'growth (single readings: GC-dependent)': {
      rss: signed(settled.rss - before.rss), 'heap used': signed(settled.heapUsed - before.heapUsed), 'heap total': signed(settled.heapTotal - before.heapTotal),
    },
  });
  console.log(`heap floor (lowest of ${samples.length} readings, by thirds of the run): ${floors.map(mb).join(' → ')} (${signed(floors[2] - floors[0])}); peak RSS ${mb(peak)}`);
  const upstreamErrors = [...metrics.matchAll(/^gateway_upstream_errors_total\{[^}]*\} (\d+)/gm)].reduce((n, m) => n + Number(m[1]), 0);
  console.log(`reload: ${reloadNote}; upstream errors counted by the gateway: ${upstreamErrors}`);
  console.log(`shutdown: SIGTERM → exit code ${exit.code} after ${stopMs} ms`);
  const problems = gateway.logs.filter((l) => /"level":(5|6)0/.test(l));
  if (problems.length) console.log(`\ngateway errors logged (${problems.length}), last ones:\n${problems.slice(-5).join('\n')}`);
}

// Last, so every module-level constant above is initialized first.
if (process.argv[2] === '--role' && process.argv[3] === 'upstream') await runUpstream(echoIdentity);
else await main();

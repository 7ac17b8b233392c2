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
import { fork, spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const SELF = fileURLToPath(import.meta.url);
const ROOT = path.resolve(path.dirname(SELF), '..');
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

function positive(text, fallback) {
  const n = Number(text);
  return text && Number.isFinite(n) && n > 0 ? n : fallback;
}

// ── child: the upstream ─────────────────────────────────────────────────────────────────────
async function runUpstream() {
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const body = JSON.stringify({ path: req.url, user: req.headers['x-user-id'] ?? null, method: req.headers['x-auth-method'] ?? null });
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
      res.end(body);
    });
  });
  server.keepAliveTimeout = 120_000;
  server.headersTimeout = 121_000;
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  process.send({ port: server.address().port });
  process.on('disconnect', () => process.exit(0));
}

// ── the load generator ──────────────────────────────────────────────────────────────────────
async function main() {
  const { default: autocannon } = await import('autocannon');
  const cleanups = [];
  const cleanup = async () => {
    for (const step of cleanups.reverse()) await step().catch((err) => console.error(`cleanup: ${err.message}`));
    cleanups.length = 0;
  };
  process.once('SIGINT', () => { console.error('\ninterrupted: cleaning up'); void cleanup().finally(() => process.exit(130)); });

  const tmp = mkdtempSync(path.join(os.tmpdir(), 'gw-soak-'));
  cleanups.push(async () => rmSync(tmp, { recursive: true, force: true }));
  try {
    const storage = await prepareStorage(tmp, cleanups);
    const upstream = await startUpstream(cleanups);
    const users = await seed(storage);
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

// ── storage: a database and Redis prefix of the run's own, or embedded ─────────────────────
async function prepareStorage(tmp, cleanups) {
  const { default: pg } = await import('pg');
  const { Redis } = await import('ioredis');
  const suffix = randomBytes(5).toString('hex');
  const baseUrl = env.DATABASE_URL ?? 'postgres://root@127.0.0.1:5432/test';
  const redisUrl = env.REDIS_URL ?? 'redis://127.0.0.1:6379';
  const storage = { postgres: '', embeddedDir: path.join(tmp, 'data'), redis: '', redisKeyPrefix: `gw_soak_${suffix}:`, label: '' };

  const admin = new pg.Client({ connectionString: baseUrl, connectionTimeoutMillis: 3000 });
  try {
    await admin.connect();
    const dbName = `gw_soak_${suffix}`;
    await admin.query(`CREATE DATABASE ${dbName}`);
    await admin.end();
    const url = new URL(baseUrl);
    url.pathname = `/${dbName}`;
    storage.postgres = url.toString();
    cleanups.push(async () => {
      const c = new pg.Client({ connectionString: baseUrl });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
      await c.end();
    });
  } catch (err) {
    await admin.end().catch(() => {});
    console.warn(`Postgres at ${baseUrl} is not usable (${err.message}): the gateway runs on embedded PGlite.`);
  }

  const redis = new Redis(redisUrl, { lazyConnect: true, connectTimeout: 2000, maxRetriesPerRequest: 0, retryStrategy: () => null });
  try {
    await redis.connect();
    await redis.ping();
    storage.redis = redisUrl;
    cleanups.push(async () => {
      let cursor = '0';
      do {
        const [next, keys] = await redis.scan(cursor, 'MATCH', `${storage.redisKeyPrefix}*`, 'COUNT', 1000);
        cursor = next;
        if (keys.length) await redis.del(...keys);
      } while (cursor !== '0');
      redis.disconnect();
    });
  } catch (err) {
    redis.disconnect();
    console.warn(`Redis at ${redisUrl} is not usable (${err.message}): daily limits are counted in Postgres alone.`);
  }
  storage.label = `${storage.postgres ? `Postgres (database ${new URL(storage.postgres).pathname.slice(1)})` : 'embedded PGlite'}, ${storage.redis ? `Redis (prefix ${storage.redisKeyPrefix})` : 'no Redis'}`;
  return storage;
}

/** Users made directly in the database before the gateway starts: pro users with an API key each, and free users. */
async function seed(storage) {
  const { openDatabase } = await import(path.join(ROOT, 'dist/storage/db.js'));
  const { migrate } = await import(path.join(ROOT, 'dist/storage/migrations.js'));
  const { createUser, setPlan } = await import(path.join(ROOT, 'dist/storage/users.js'));
  const { hashPassword } = await import(path.join(ROOT, 'dist/auth/passwords.js'));
  const db = await openDatabase(storage);
  try {
    await migrate(db);
    const hash = await hashPassword(PASSWORD);
    const make = async (tag, i) => {
      const email = `soak-${tag}-${i}-${randomBytes(4).toString('hex')}@example.test`;
      return { email, id: await createUser(db, email, hash) };
    };
    const pro = [];
    const free = [];
    for (let i = 0; i < USERS; i++) {
      const u = await make('pro', i);
      await setPlan(db, u.id, 'pro');
      u.apiKey = `soak_${randomBytes(24).toString('base64url')}`;
      await db.query('INSERT INTO api_tokens (user_id, token_hash) VALUES ($1, $2)', [u.id, createHash('sha256').update(u.apiKey).digest('hex')]);
      pro.push(u);
      free.push(await make('free', i), await make('free', USERS + i));
    }
    return { pro, free };
  } finally {
    await db.close();
  }
}

// ── processes ───────────────────────────────────────────────────────────────────────────────
function startUpstream(cleanups) {
  const child = fork(SELF, ['--role', 'upstream'], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  cleanups.push(() => stopProcess(child));
  return new Promise((resolve, reject) => {
    child.once('message', ({ port }) => resolve(`http://127.0.0.1:${port}`));
    child.once('exit', (code) => reject(new Error(`upstream exited (${code}) before listening`)));
  });
}

function stopProcess(child) {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const kill = setTimeout(() => child.kill('SIGKILL'), 15_000);
    child.once('exit', () => { clearTimeout(kill); resolve(); });
    child.kill('SIGTERM');
  });
}

async function freePort() {
  const server = net.createServer();
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return port;
}

function gatewayConfig({ port, adminPort, storage, upstream, secret, reloaded = false }) {
  const { label: _label, ...storageConfig } = storage;
  return {
    server: { host: '127.0.0.1', port },
    storage: { ...storageConfig, migrate: true },
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
  // JSON is YAML: the generated config is written as JSON.
  const writeConfig = (extra = {}) => writeFileSync(configFile, JSON.stringify(gatewayConfig({ ...settings, ...extra }), null, 2));
  writeConfig();
  const logs = [];
  const child = spawn(process.execPath, [path.join(ROOT, 'dist/cli.js'), 'start', '--config', configFile], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { PATH: env.PATH, HOME: env.HOME, NODE_ENV: 'production', LOG_LEVEL: env.SOAK_LOG_LEVEL ?? 'warn' },
  });
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
  cleanups.push(() => stopProcess(child));
  const url = `http://127.0.0.1:${settings.port}`;
  const adminUrl = `http://127.0.0.1:${settings.adminPort}`;
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) break;
    const res = await send(url, 'GET', '/readyz').catch(() => null);
    if (res?.status === 200) return { url, adminUrl, child, exited, logs, writeConfig };
    await sleep(200);
  }
  throw new Error(`the gateway did not start; its output:\n${logs.slice(-20).join('\n')}`);
}

// ── HTTP helpers ────────────────────────────────────────────────────────────────────────────
const agent = new http.Agent({ keepAlive: true, maxSockets: 16 });

function send(baseUrl, method, pathname, { headers = {}, json } = {}) {
  const { hostname, port } = new URL(baseUrl);
  const body = json === undefined ? undefined : JSON.stringify(json);
  const allHeaders = body ? { ...headers, 'content-type': 'application/json' } : headers;
  return new Promise((resolve, reject) => {
    const req = http.request({ host: hostname, port, method, path: pathname, headers: allHeaders, agent, timeout: 30_000 }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let parsed;
        try { parsed = JSON.parse(text); } catch { parsed = undefined; }
        resolve({ status: res.statusCode, json: parsed, text });
      });
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`${method} ${pathname}: timed out`)));
    req.on('error', reject);
    req.end(body);
  });
}

async function login(url, user) {
  const res = await send(url, 'POST', '/api/v1/auth/login', { json: { email: user.email, password: PASSWORD } });
  if (res.status !== 200) throw new Error(`login of ${user.email} failed: ${res.status} ${res.text}`);
  return { ...user, access: res.json.access_token, refresh: res.json.refresh_token };
}

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
    rss: metric(text, 'gateway_process_resident_memory_bytes'),
    heapUsed: metric(text, 'gateway_nodejs_heap_size_used_bytes'),
    heapTotal: metric(text, 'gateway_nodejs_heap_size_total_bytes'),
  };
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

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
    'growth (single readings: GC-dependent)': { rss: signed(settled.rss - before.rss), 'heap used': signed(settled.heapUsed - before.heapUsed), 'heap total': signed(settled.heapTotal - before.heapTotal) },
  });
  console.log(`heap floor (lowest of ${samples.length} readings, by thirds of the run): ${floors.map(mb).join(' → ')} (${signed(floors[2] - floors[0])}); peak RSS ${mb(peak)}`);
  const upstreamErrors = [...metrics.matchAll(/^gateway_upstream_errors_total\{[^}]*\} (\d+)/gm)].reduce((n, m) => n + Number(m[1]), 0);
  console.log(`reload: ${reloadNote}; upstream errors counted by the gateway: ${upstreamErrors}`);
  console.log(`shutdown: SIGTERM → exit code ${exit.code} after ${stopMs} ms`);
  const problems = gateway.logs.filter((l) => /"level":(5|6)0/.test(l));
  if (problems.length) console.log(`\ngateway errors logged (${problems.length}), last ones:\n${problems.slice(-5).join('\n')}`);
}

// Last, so every module-level constant above is initialized first.
if (process.argv[2] === '--role' && process.argv[3] === 'upstream') await runUpstream();
else await main();

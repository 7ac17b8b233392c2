#!/usr/bin/env node
// npm run bench: the gateway side by side with a raw @fastify/http-proxy (no guards, the
// baseline), both in front of one small upstream, loaded in alternating rounds (wrk, see Load).
//
// Layout: this process is the load generator; the upstream, the baseline and the gateway are
// child processes, so the load generator and the servers never share an event loop. The gateway
// is the built CLI (`node dist/cli.js start`) on a database and Redis key prefix of its own
// (dropped after), or on embedded PGlite when no Postgres answers. Everything listens on loopback.
//
// More pairs share the table: the gateway over TLS (server.tls) against the raw proxy over TLS,
// both with the same self-signed certificate (openssl); WebSocket echo round trips through the
// gateway (a `websocket: true` route) against the same upstream reached directly; and a gateway
// whose Postgres is reached through PgBouncer in transaction mode (docs/examples/pgbouncer.ini,
// LISTEN on storage.postgresDirect) against the gateway on direct Postgres, where pgbouncer is
// installed.
//
// Load: wrk (Debian package wrk) when it is installed, with the proxy under test alone on one core
// (taskset: the baseline, the gateways, nginx) and the load generator, the upstreams and the login
// driver on the other, as issue 17 measured it. A JS load generator on the same cores as the server
// needs as much CPU as the server and compresses the ratios toward 1. Without wrk or taskset, or
// with BENCH_LOADER=autocannon, autocannon runs unpinned. WebSocket rounds are always JS (ws).
//
// Environment: BENCH_LOADER (wrk or autocannon), BENCH_SECONDS (per round, default 3),
// BENCH_ROUNDS (rounds per target, default 6), BENCH_TARGET_ROUNDS (the same for the scenarios that
// carry a target or stand for one's ceiling, default 12), BENCH_STARTS (the floor rows' rounds are
// spread over this many starts of each process, default 3), BENCH_LOGIN_ROUNDS (pairs of bearer
// rounds without and with logins, default 12), BENCH_WARMUP (seconds per target and scenario,
// default 1), BENCH_CONNECTIONS (default 50), BENCH_USERS (users per group, default 10),
// BENCH_LOG_LEVEL (the gateway's, default info), BENCH_ONLY (a subset:
// public,bearer,plan,apikey,scoped,forged,daily,rated,minute,assertion,tls,ws,pgbouncer,floor,haproxy,counted,monthly,routes,workers,tracing,logins,decisions,memory,
// and bench/orgs.mjs's org,orgpool), BENCH_IDLE and BENCH_MEMORY_ROUNDS (the memory rows, bench/memory.mjs),
// BENCH_KEEP=1 (keep the generated config and the gateway's log),
// BENCH_GATEWAY_NODE_ARGS / BENCH_BASELINE_NODE_ARGS (node flags, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof"),
// DATABASE_URL, REDIS_URL.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { accessSync, chmodSync, closeSync, constants, mkdtempSync, openSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawn } from 'node:child_process';
import {
  baseConfig, CONTRACT_LEAST_SOURCE, createCleanups, freePort, httpClient, passingChild, positive, prepareStorage, runUpgradeFloor, runUpstream, SCOPE, seed, sleep, spawnGateway,
  startChild, startContractLeast, stopProcess, waitForGateway, writeConfig,
} from './common.mjs';
import { measureMemory, printMemory } from './memory.mjs';
import { localPgBouncerIni } from './pgbouncerIni.mjs';
import { runOrgBenches } from './orgs.mjs';

/** bench/orgs.mjs's scenarios, by their BENCH_ONLY names. */
const ORG_SCENARIOS = ['org', 'orgpool'];

const SELF = fileURLToPath(import.meta.url);
const role = process.argv[2] === '--role' ? process.argv[3] : 'main';

const env = process.env;
const SECONDS = positive(env.BENCH_SECONDS, 3);
const ROUNDS = Math.round(positive(env.BENCH_ROUNDS, 6));
// A verdict rests on the median of paired rounds, and one round's p99 on this kind of machine can
// move by several ms (a hypervisor pause stalls all 50 connections at once): the scenarios with a
// target get more pairs, so that a few disturbed rounds cannot decide it.
const TARGET_ROUNDS = Math.round(positive(env.BENCH_TARGET_ROUNDS, 2 * ROUNDS));
// A process start is a draw of its own: the contract's least, started eight times in a row, served
// from 27k to 33k requests a second, its rounds agreeing within a start (docs/benchmark.md, issue
// 77). The rows that set one program against another program's ceiling (BENCH_ONLY's floor) take
// their rounds over this many starts of each process of the pair, started anew between blocks.
const STARTS = Math.round(positive(env.BENCH_STARTS, 3));
// p99 moves more from round to round than req/s does: the logins comparison takes more pairs.
const LOGIN_ROUNDS = Math.round(positive(env.BENCH_LOGIN_ROUNDS, 12));
const WARMUP = positive(env.BENCH_WARMUP, 1);
const CONNECTIONS = Math.round(positive(env.BENCH_CONNECTIONS, 50));
const USERS = Math.round(positive(env.BENCH_USERS, 10));
const LOGINS_PER_SECOND = 10;
const PASSWORD = 'bench-password-0123';
// The undici pool the gateway uses (src/proxy/forward.ts), so the baseline proxies the same way.
const UNDICI = { connections: 128, pipelining: 1, keepAliveTimeout: 30_000 };

// ── child: the upstream ─────────────────────────────────────────────────────────────────────
// Answers a small JSON echo of the identity it received: cheap, and lets the bench check that
// each scenario really went through its guards (user id, method, assertion).
const echoIdentity = (req) => ({
  path: req.url,
  user: req.headers['x-user-id'] ?? null,
  plan: req.headers['x-user-plan'] ?? null,
  method: req.headers['x-auth-method'] ?? null,
  assertion: typeof req.headers['x-gateway-assertion'] === 'string',
});

// ── child: the baseline ─────────────────────────────────────────────────────────────────────
async function runBaseline(upstream, certDir) {
  const { default: Fastify } = await import('fastify');
  const { default: proxy } = await import('@fastify/http-proxy');
  // With certDir: HTTPS with the certificate the gateway's TLS listener uses.
  const https = certDir && { cert: readFileSync(path.join(certDir, 'cert.pem')), key: readFileSync(path.join(certDir, 'key.pem')) };
  const app = Fastify({ logger: false, ...(https ? { https } : {}) });
  await app.register(proxy, { upstream, undici: UNDICI });
  await app.listen({ host: '127.0.0.1', port: 0 });
  process.send({ port: app.server.address().port });
  const stop = () => app.close().finally(() => process.exit(0));
  process.on('disconnect', stop);
  process.on('SIGTERM', stop);
}

// ── child: the WebSocket upstream ───────────────────────────────────────────────────────────
// Echoes every message; greets each socket with the identity it was told (the probe checks it).
async function runWsUpstream() {
  const { default: http } = await import('node:http');
  const { WebSocketServer } = await import('ws');
  const server = http.createServer((_req, res) => res.writeHead(426).end());
  new WebSocketServer({ server, perMessageDeflate: false }).on('connection', (ws, req) => {
    if (req.url.endsWith('/probe')) ws.send(JSON.stringify({ user: req.headers['x-user-id'] ?? null, method: req.headers['x-auth-method'] ?? null }));
    ws.on('message', (data, isBinary) => ws.send(data, { binary: isBinary }));
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  process.send({ port: server.address().port });
  process.on('disconnect', () => process.exit(0));
  process.on('SIGTERM', () => process.exit(0));
}

/** A self-signed certificate for 127.0.0.1 in `dir` (cert.pem, key.pem); false without openssl. */
function makeCertificate(dir) {
  try {
    execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1', '-subj', '/CN=127.0.0.1',
      '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', path.join(dir, 'key.pem'), '-out', path.join(dir, 'cert.pem')], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

// ── the load generator ──────────────────────────────────────────────────────────────────────
async function main() {
  console.log(CONTRACT_LEAST_SOURCE);
  const loader = await chooseLoader();
  const { cleanups, cleanup } = createCleanups();

  const tmp = mkdtempSync(path.join(os.tmpdir(), 'gw-bench-'));
  // BENCH_KEEP=1 keeps the generated config and the gateway's log for a look afterwards.
  cleanups.push(async () => (env.BENCH_KEEP ? console.log(`kept ${tmp}`) : rmSync(tmp, { recursive: true, force: true })));
  try {
    // Organizations' scenarios (bench/orgs.mjs) run on gateways and a database of their own, first.
    const asked = env.BENCH_ONLY ? new Set(env.BENCH_ONLY.split(',').map((s) => s.trim())) : undefined;
    const orgAsked = new Set(ORG_SCENARIOS.filter((s) => !asked || asked.has(s)));
    if (orgAsked.size) await runOrgBenches(orgAsked, await prepareStorage(tmp, cleanups, 'orgs'), tmp, cleanups);
    if (asked && [...asked].every((s) => orgAsked.has(s))) return;
    const storage = await prepareStorage(tmp, cleanups, 'bench');
    const upstream = await startChild(SELF, 'upstream', [], cleanups);
    const baseline = await startChild(SELF, 'baseline', [upstream.url], cleanups, splitArgs(env.BENCH_BASELINE_NODE_ARGS));

    const wsUpstream = await startChild(SELF, 'wsupstream', [], cleanups);
    // TLS pair: the raw proxy and a second gateway (same database, secret and routes) over HTTPS.
    const tls = makeCertificate(tmp);
    const baselineTls = tls ? await startChild(SELF, 'baseline', [upstream.url, tmp], cleanups, splitArgs(env.BENCH_BASELINE_NODE_ARGS)) : undefined;
    if (baselineTls) baselineTls.url = baselineTls.url.replace('http:', 'https:');

    const data = await seedUsers(storage);
    const config = gatewayConfig(await freePort(), await freePort(), storage, upstream.url, wsUpstream.url);
    const gateway = startsAnew(await startGateway(tmp, 'gateway', config, cleanups), () => startGateway(tmp, 'gateway', config, cleanups));
    await expectPortalOn(gateway.url, config.portal.publicUrl);
    const gatewayTls = tls
      ? await startGateway(tmp, 'gateway-tls', {
        ...config,
        server: { ...config.server, port: await freePort(), tls: { certFile: path.join(tmp, 'cert.pem'), keyFile: path.join(tmp, 'key.pem') } },
        decisions: { port: 0 },
      }, cleanups)
      : undefined;
    // PgBouncer pair: a third gateway (same database, secret and routes) whose pool goes through
    // PgBouncer, and its LISTEN straight to Postgres, as docs/production.md sets it up.
    const bouncer = storage.postgres ? await startPgBouncer(storage.postgres, await freePort(), cleanups) : { skip: 'no Postgres (embedded PGlite)' };
    const gatewayPooled = bouncer.url
      ? await startGateway(tmp, 'gateway-pgbouncer', {
        ...config,
        server: { ...config.server, port: await freePort() },
        storage: { ...config.storage, postgres: bouncer.url, postgresDirect: storage.postgres },
        decisions: { port: 0 },
      }, cleanups)
      : undefined;
    // Issue 28's references: the Node floor (node:http + undici, no logic), and HAProxy verifying
    // the same HS256 token (jwt_verify, exp) and setting x-user-id. The floor is the shared
    // reference (bench/common.mjs CONTRACT_LEAST), as is the floor doing the least the contract asks
    // of a forwarded request, public and authenticated: the ceiling of the gateway's ratios to the floor.
    const baselineArgs = splitArgs(env.BENCH_BASELINE_NODE_ARGS);
    const least = (name, contract, held) => {
      const start = () => startContractLeast(name, upstream.url, contract, cleanups, baselineArgs, held);
      return start().then((target) => startsAnew(target, start));
    };
    const floor = await least('floor', '');
    const contractFloor = await least('floor-public', 'public');
    const contractFloorAuthenticated = await least('floor-authenticated', 'auth');
    // Not a target: the same least in a process holding a Postgres and a Redis connection, as every
    // gateway does (bench/least-with-storage.mjs): what the sockets alone cost a request.
    const held = storage.postgres && storage.redis ? storage : undefined;
    const leastHolding = held && await least('floor-public-storage', 'public', held);
    const leastHoldingAuthenticated = held && await least('floor-authenticated-storage', 'auth', held);
    const haproxy = await startHaproxy(upstream.url, config.auth.jwt.secret, cleanups);
    // Tracing (docs/tracing.md): a gateway exporting every request's spans to a local receiver, and
    // one whose collector does not answer, each against the plain gateway.
    const collector = await startChild(SELF, 'collector', [], cleanups);
    // Its admin listener tells how many spans it exported and dropped: a run that mostly dropped would look cheaper than tracing is.
    const tracedAdmin = await freePort();
    const traced = await startGateway(tmp, 'gateway-traced', {
      ...config, server: { ...config.server, port: await freePort() }, admin: { ...config.admin, port: tracedAdmin }, decisions: { port: 0 },
      telemetry: { otlp: { endpoint: collector.url, sampleRatio: 1 } },
    }, cleanups);
    const tracedDown = await startGateway(tmp, 'gateway-traced-down', { ...config, server: { ...config.server, port: await freePort() }, decisions: { port: 0 }, telemetry: { otlp: { endpoint: `http://127.0.0.1:${await freePort()}` } } }, cleanups);
    // A large route table: the same gateway with 2,000 more routes beside /plan's requests, under
    // the same prefix (as `/api/v1/…` routes share theirs), all on longer paths: a table scanned
    // longest path first would try every one of them on each request.
    const manyRoutes = Array.from({ length: EXTRA_ROUTES }, (_, i) => ({ path: `/plan/resource-${i}`, upstream: 'echo', auth: 'required' }));
    // Monthly quotas (CONTRACT §23, issue 53): the same gateway whose pro plan also counts a month,
    // against the daily-only one, on the counted route, the same busy user (its row counts both).
    const monthlyPlans = { limits: { ...config.plans.limits, pro: { ...config.plans.limits.pro, monthly: 2_000_000_000 } } };
    const gatewayMonthly = await startGateway(tmp, 'gateway-monthly', { ...config, server: { ...config.server, port: await freePort() }, decisions: { port: 0 }, plans: monthlyPlans }, cleanups);
    const gatewayRoutes = await startGateway(tmp, 'gateway-routes', {
      ...config, server: { ...config.server, port: await freePort() }, decisions: { port: 0 }, routes: [...config.routes, ...manyRoutes],
    }, cleanups);
    // server.workers: 2 against 1, and against nginx with two workers: every process on every core.
    const fleet = storage.postgres ? await startFleet(tmp, config, upstream.url, gateway.decisionsUrl, cleanups) : { skip: 'server.workers needs Postgres (embedded PGlite here)' };
    // The process under test alone on its core, what makes the load on the other (chooseLoader).
    loader.pin(upstream.pid, 'load');
    loader.pin(wsUpstream.pid, 'load');
    loader.pin(collector.pid, 'load');
    const servers = [
      traced, tracedDown, gatewayRoutes, gatewayMonthly, baseline, baselineTls, gateway, gatewayTls, gatewayPooled, floor, contractFloor, contractFloorAuthenticated,
      leastHolding, leastHoldingAuthenticated, haproxy.pid && haproxy,
    ];
    for (const server of servers.filter(Boolean)) loader.pin(server.pid, 'server');
    for (const server of fleet.skip ? [] : [fleet.one, fleet.two, fleet.nginx].filter(Boolean)) loader.pin(server.pid, 'all');
    const pro = await Promise.all(data.pro.map((u) => login(gateway.url, u)));
    const used = await Promise.all(data.used.map((u) => login(gateway.url, u)));
    const capped = await Promise.all(data.capped.map((u) => login(gateway.url, u)));
    const groups = { pro, used, capped, keys: data.pro };

    // ── Scenarios ─────────────────────────────────────────────────────────────────────────
    // One row of the table each. `route` is declared in gatewayConfig(); `headers` gives one
    // header set per user (connections take them in turn); `expect` is the status every
    // response must have, and `identity` what the upstream must have been told. `targets`
    // prints pass/fail. `requires` names a gateway feature probed before the run: the scenario
    // is skipped (and says so) until the gateway has it.
    const bearerOf = (users) => users.map((u) => ({ authorization: `Bearer ${u.access}` }));
    const scenarios = [
      { name: 'public (auth: none)', route: '/public', headers: () => [{}], expect: 200 },
      { name: 'bearer', route: '/bearer', headers: () => bearerOf(groups.pro), expect: 200, identity: 'bearer' },
      { name: 'bearer + plan', route: '/plan', headers: () => bearerOf(groups.pro), expect: 200, identity: 'bearer', targets: { ratio: 0.85, p99DeltaMs: 2 } },
      { name: 'API key', route: '/apikey', headers: () => groups.keys.map((u) => ({ 'x-api-key': u.apiKey })), expect: 200, identity: 'api-key' },
      // CONTRACT §21: a named key with a scope, on a route with `scopes:` (the scope check and
      // x-user-key-id on top of the key's lookup); then keys of that format whose checksum is
      // wrong, refused (401) before any storage lookup: what a flood of invented keys costs.
      { name: 'API key with scopes, route with scopes', key: 'scoped', route: '/scoped', headers: () => groups.keys.map((u) => ({ 'x-api-key': u.scopedKey })), expect: 200, identity: 'api-key' },
      { name: 'forged-checksum API key (401, no lookup)', key: 'forged', route: '/scoped', headers: () => groups.keys.map((u) => ({ 'x-api-key': u.forgedKey })), expect: 401 },
      { name: 'daily-limit refusal (429)', route: '/daily', headers: () => bearerOf(groups.used), expect: 429, targets: { ratio: 1.0 } },
      // The same refusal as a client that asks for problem details (CONTRACT §20): the Accept header
      // is read only on the error path, so it costs what the plain refusal costs.
      {
        name: 'daily-limit refusal, problem details (429)',
        route: '/daily', headers: () => bearerOf(groups.used).map((h) => ({ ...h, accept: 'application/problem+json' })), expect: 429, targets: { ratio: 1.0 },
      },
      // rateLimit: true (CONTRACT §12): every request takes one from the user's bucket in Redis.
      // Pro users far under their perMinute; then users of a plan of 1 a minute, refused.
      { name: 'rate-limited route, pro under its limit', key: 'rated', route: '/rated', headers: () => bearerOf(groups.pro), expect: 200, identity: 'bearer', targets: { ratio: 0.85 } },
      // Each capped user's bucket refills one request a minute: those few pass (refills).
      { name: 'per-minute refusal (429)', key: 'minute', route: '/rated', headers: () => bearerOf(groups.capped), expect: 429, refills: true, targets: { ratio: 1.5 } },
      // Assertion route: an upstream with `assertion: true` (CONTRACT §3, x-gateway-assertion).
      { name: 'bearer, assertion upstream', route: '/assertion', headers: () => bearerOf(groups.pro), expect: 200, identity: 'bearer', requires: 'assertion' },
      // `pair` names other targets than the plain baseline and gateway (pairOf below).
      { name: 'bearer + plan over TLS', key: 'tls', pair: 'tls', route: '/plan', headers: () => bearerOf(groups.pro), expect: 200, identity: 'bearer', targets: { ratio: 0.85 } },
      // Messages/s of echo round trips on CONNECTIONS sockets; baseline: the upstream reached directly.
      { name: 'WebSocket echo (msg/s; baseline direct)', key: 'ws', pair: 'ws', route: '/ws', headers: () => bearerOf(groups.pro), expect: 200, identity: 'bearer' },
      // Issue 18: through PgBouncer (with postgresDirect) against the same gateway on direct Postgres.
      {
        name: 'bearer + plan via PgBouncer (baseline: the gateway on direct Postgres)',
        key: 'pgbouncer', pair: 'pgbouncer', route: '/plan', headers: () => bearerOf(groups.pro), expect: 200, identity: 'bearer', targets: { ratio: 0.95 },
      },
      // Issue 28: against what Node itself costs, and against a C proxy checking the same token.
      { name: 'public (baseline: Node floor)', key: 'floor', pair: 'floor', route: '/public', headers: () => [{}], expect: 200, targets: { ratio: 0.90 } },
      { name: 'bearer (baseline: Node floor)', key: 'floor', pair: 'floor', route: '/bearer', headers: () => bearerOf(groups.pro), expect: 200, identity: 'bearer', targets: { ratio: 0.85 } },
      // Issue 48 (item 9): against the contract's least itself, the ceiling of any conforming Node
      // gateway; bearer's p99 within 1.3 times the least's.
      { name: 'public (baseline: the contract\'s least, public)', key: 'floor', pair: 'least', route: '/public', headers: () => [{}], expect: 200, targets: { ratio: 0.95 } },
      {
        name: 'bearer (baseline: the contract\'s least, authenticated)',
        key: 'floor', pair: 'least-authenticated', route: '/bearer', headers: () => bearerOf(groups.pro), expect: 200, identity: 'bearer', targets: { ratio: 0.92, p99Ratio: 1.3 },
      },
      // No target (issue 77): the same two gateway rows against the least holding a Postgres and a
      // Redis connection, as the gateway's own process does: what is left once the sockets alone
      // are paid for.
      {
        name: 'public (baseline: the contract\'s least, public, holding Postgres and Redis)',
        key: 'floor', pair: 'gateway-holding', route: '/public', headers: () => [{}], expect: 200, ceiling: true,
      },
      {
        name: 'bearer (baseline: the contract\'s least, authenticated, holding Postgres and Redis)',
        key: 'floor', pair: 'gateway-holding-authenticated', route: '/bearer', headers: () => bearerOf(groups.pro), expect: 200, identity: 'bearer', ceiling: true,
      },
      // No target: a Node proxy that does nothing but what CONTRACT §3 adds to every forwarded
      // request (and, on the second row, to an authenticated one, its token not even read), the
      // ceiling of the two rows above (and, after HAProxy's row, of that one); as many pairs as
      // theirs (`ceiling`).
      {
        name: 'the contract\'s least, public: forwarding headers and request id (baseline: Node floor)',
        key: 'floor', pair: 'contract', route: '/public', headers: () => [{}], expect: 200, ceiling: true,
      },
      {
        name: 'the contract\'s least, authenticated: also identity headers, no token read (baseline: Node floor)',
        key: 'floor', pair: 'contract-authenticated', route: '/bearer', headers: () => bearerOf(groups.pro), expect: 200, identity: 'bearer', ceiling: true,
      },
      // No target either: the two leasts again, each in a process that also holds a Postgres and a
      // Redis connection, as any gateway's does; against the plain least.
      {
        name: 'the contract\'s least, public, holding a Postgres and a Redis connection (baseline: the contract\'s least, public)',
        key: 'floor', pair: 'least-holding', route: '/public', headers: () => [{}], expect: 200, ceiling: true,
      },
      {
        name: 'the contract\'s least, authenticated, holding a Postgres and a Redis connection (baseline: the contract\'s least, authenticated)',
        key: 'floor', pair: 'least-holding-authenticated', route: '/bearer', headers: () => bearerOf(groups.pro), expect: 200, identity: 'bearer', ceiling: true,
      },
      {
        name: 'bearer (baseline: HAProxy, jwt_verify)',
        key: 'haproxy', pair: 'haproxy', route: '/bearer', headers: () => bearerOf(groups.pro), expect: 200, identity: 'bearer', targets: { ratio: 0.55 },
      },
      {
        name: 'the contract\'s least, authenticated (baseline: HAProxy, jwt_verify)',
        key: 'haproxy', pair: 'contract-haproxy', route: '/bearer', headers: () => bearerOf(groups.pro), expect: 200, identity: 'bearer', ceiling: true,
      },
      // One premium-sized user far under a large daily quota, on every connection: the row lock
      // a use per request once took (541 req/s); baseline: the same user on the uncounted route.
      {
        name: 'counted daily quota, one busy user (baseline: the gateway, bearer)',
        key: 'counted', pair: 'counted', route: '/counted', headers: () => bearerOf(groups.pro.slice(0, 1)), expect: 200, identity: 'bearer', targets: { ratio: 0.80 },
      },
      // The same, the plan counting the day and the month (CONTRACT §23; issue 53 wants within 10 %).
      {
        name: 'counted day and month, one busy user (baseline: the gateway, daily only)',
        key: 'monthly', pair: 'monthly', route: '/counted', headers: () => bearerOf(groups.pro.slice(0, 1)), expect: 200, identity: 'bearer', targets: { ratio: 0.90 },
      },
      // Tracing on (every request sampled, exported to a receiver) and to a collector that is down.
      {
        name: 'bearer + plan, traced (baseline: the gateway untraced)',
        key: 'tracing', pair: 'traced', route: '/plan', headers: () => bearerOf(groups.pro), expect: 200, identity: 'bearer', targets: { ratio: 0.85 },
      },
      {
        name: 'bearer + plan, collector down (baseline: the gateway untraced)',
        key: 'tracing', pair: 'traced-down', route: '/plan', headers: () => bearerOf(groups.pro), expect: 200, identity: 'bearer', targets: { ratio: 0.95 },
      },
      // Matching a path looks up its keys, whatever the number of routes declared.
      {
        name: `bearer + plan, ${EXTRA_ROUTES.toLocaleString('en')} more routes declared (baseline: the gateway)`,
        key: 'routes', pair: 'routes', route: '/plan', headers: () => bearerOf(groups.pro), expect: 200, identity: 'bearer', targets: { ratio: 0.95 },
      },
      // Unpinned: wrk, the upstream and the servers share both cores.
      {
        name: 'bearer, workers: 2 (baseline: workers: 1), unpinned',
        key: 'workers', pair: 'workers', route: '/bearer', headers: () => bearerOf(groups.pro), expect: 200, identity: 'bearer', targets: { ratio: 1.7 },
      },
      { name: 'public, workers: 2 (baseline: nginx, 2 workers), unpinned', key: 'workers', pair: 'nginx2', route: '/public', headers: () => [{}], expect: 200 },
    ];
    const pairOf = (scenario) => ({
      tls: { baseline: baselineTls, gateway: gatewayTls },
      ws: { baseline: { ...wsUpstream, pid: undefined }, gateway }, // the upstream's CPU is not the proxying's: not shown
      pgbouncer: { baseline: { ...gateway, name: 'gateway' }, gateway: gatewayPooled }, // both answer as a gateway
      floor: { baseline: { ...floor, name: 'baseline' }, gateway },
      contract: { baseline: { ...floor, name: 'baseline' }, gateway: contractFloor },
      'contract-authenticated': { baseline: { ...floor, name: 'baseline' }, gateway: contractFloorAuthenticated },
      'contract-haproxy': { baseline: haproxy, gateway: contractFloorAuthenticated },
      least: { baseline: { ...contractFloor, name: 'baseline' }, gateway },
      'least-authenticated': { baseline: { ...contractFloorAuthenticated, name: 'baseline' }, gateway },
      'least-holding': { baseline: { ...contractFloor, name: 'baseline' }, gateway: leastHolding },
      'least-holding-authenticated': { baseline: { ...contractFloorAuthenticated, name: 'baseline' }, gateway: leastHoldingAuthenticated },
      'gateway-holding': { baseline: leastHolding && { ...leastHolding, name: 'baseline' }, gateway },
      'gateway-holding-authenticated': { baseline: leastHoldingAuthenticated && { ...leastHoldingAuthenticated, name: 'baseline' }, gateway },
      haproxy: { baseline: haproxy, gateway },
      counted: { baseline: { ...gateway, name: 'gateway', route: '/bearer' }, gateway },
      monthly: { baseline: { ...gateway, name: 'gateway' }, gateway: gatewayMonthly },
      traced: { baseline: { ...gateway, name: 'gateway' }, gateway: traced },
      'traced-down': { baseline: { ...gateway, name: 'gateway' }, gateway: tracedDown },
      routes: { baseline: { ...gateway, name: 'gateway' }, gateway: gatewayRoutes },
      workers: { baseline: fleet.one, gateway: fleet.two },
      nginx2: { baseline: fleet.nginx && { ...fleet.nginx, name: 'baseline' }, gateway: fleet.two },
    })[scenario.pair] ?? { baseline, gateway };

    // BENCH_ONLY=plan,daily,logins runs a subset (route names without the slash), for quick checks.
    const only = env.BENCH_ONLY ? new Set(env.BENCH_ONLY.split(',').map((s) => s.trim())) : undefined;
    for (const s of scenarios) {
      if (only && !only.has(s.key ?? s.route.slice(1))) s.skip = 'not in BENCH_ONLY';
      else if (s.pair === 'tls' && !tls) s.skip = 'no openssl to make a certificate';
      else if (s.pair === 'pgbouncer' && !gatewayPooled) s.skip = bouncer.skip;
      else if ((s.pair?.startsWith('least-holding') || s.pair?.startsWith('gateway-holding')) && !held) s.skip = 'needs Postgres and Redis';
      else if ((s.pair === 'haproxy' || s.pair === 'contract-haproxy') && haproxy.skip) s.skip = haproxy.skip;
      else if (s.pair === 'haproxy' && !(await send(haproxy.url, 'GET', '/bearer/probe', { headers: s.headers()[0] })).json?.user) throw new Error('haproxy: the upstream was not told the identity');
      else if ((s.pair === 'workers' || s.pair === 'nginx2') && fleet.skip) s.skip = fleet.skip;
      else if (s.pair === 'nginx2' && !fleet.nginx) s.skip = 'nginx is not installed';
      else s.skip = await (s.pair === 'ws' ? probeWs(gateway.url, s) : probe(pairOf(s).gateway.url, s));
    }
    console.log(`\nLoad: ${CONNECTIONS} connections, ${ROUNDS} rounds of ${SECONDS} s per target (${TARGET_ROUNDS} for scenarios with a target; `
      + `after ${WARMUP} s of warm-up), alternating baseline and gateway; the floor rows' rounds over ${STARTS} starts of each process.`);
    console.log(`Load generator: ${loader.name}.`);
    console.log(`Storage: ${storage.label}. Gateway log level: ${gateway.logLevel}.\n`);

    const measure = (target, scenario, seconds, extra) => (scenario.pair === 'ws' ? loadWs(target, scenario, seconds) : load(loader, target, scenario, seconds, extra));
    // A fresh process runs slower for a while (JIT, pools, caches): warm both up once first.
    // The TLS pair is two more processes: warmed up the same way.
    const warmUp = async (targets, scenario) => {
      await measure(targets.baseline, scenario, Math.max(2, WARMUP * 2));
      await measure(targets.gateway, scenario, Math.max(2, WARMUP * 2));
    };
    for (const warm of scenarios.filter((s) => s.route === '/plan' && !s.skip)) await warmUp(pairOf(warm), warm);

    const rows = [];
    for (const scenario of scenarios) {
      if (scenario.skip) {
        rows.push({ scenario });
        console.log(`- ${scenario.name}: skipped (${scenario.skip})`);
        continue;
      }
      let targets = pairOf(scenario);
      await measure(targets.baseline, scenario, WARMUP);
      await measure(targets.gateway, scenario, WARMUP);
      const runs = { baseline: [], gateway: [] };
      const rounds = scenario.targets || scenario.ceiling ? TARGET_ROUNDS : ROUNDS;
      const starts = scenario.key === 'floor' ? Math.min(STARTS, rounds) : 1;
      for (let round = 0; round < rounds; round++) {
        // The next block of rounds on processes started anew, warmed up as fresh processes are.
        if (round && round % Math.ceil(rounds / starts) === 0) {
          await startAnew([targets.baseline, targets.gateway], loader);
          targets = pairOf(scenario);
          await warmUp(targets, scenario);
        }
        await inTurn(round, async () => runs.baseline.push(await measure(targets.baseline, scenario, SECONDS)),
          async () => runs.gateway.push(await measure(targets.gateway, scenario, SECONDS)));
      }
      const row = { scenario, baseline: combine(runs.baseline), gateway: combine(runs.gateway) };
      if (scenario.pair === 'traced') row.spans = await spanCounts(`http://127.0.0.1:${tracedAdmin}/metrics`);
      rows.push(row);
      console.log(`- ${scenario.name}: req/s per round: baseline ${row.baseline.rounds}; gateway ${row.gateway.rounds}`);
      console.log(`  p99 (ms) per round: baseline ${row.baseline.p99s}; gateway ${row.gateway.p99s}`);
    }

    // Logins beside bearer traffic: argon2 shares libuv's threadpool with WebCrypto, and both
    // share the CPU with the proxy. Alternating rounds without and with ~10 logins/s, sent by a
    // process of their own so that the load generator's event loop (which times every request)
    // is not the one slowed down.
    const bearer = scenarios.find((s) => s.route === '/bearer');
    const quiet = [];
    const busy = [];
    const logins = { ok: 0, failed: 0, latencies: [] };
    let loginRun;
    if (!only || only.has('logins')) {
      const loginDriver = await startChild(SELF, 'logins', [gateway.url], cleanups);
      loader.pin(loginDriver.pid, 'load');
      await measure(gateway, bearer, WARMUP);
      for (let round = 0; round < LOGIN_ROUNDS; round++) {
        await inTurn(round, async () => quiet.push(await measure(gateway, bearer, SECONDS)),
          async () => busy.push(await measure(gateway, bearer, SECONDS, { logins: { driver: loginDriver, users: data.pro, into: logins } })));
      }
      loginRun = { quiet: combine(quiet), busy: combine(busy), logins };
      console.log(`- bearer beside ${LOGINS_PER_SECOND} logins/s: req/s per round: alone ${loginRun.quiet.rounds}; with logins ${loginRun.busy.rounds}`);
      console.log(`  p99 (ms) per round: alone ${loginRun.quiet.p99s}; with logins ${loginRun.busy.p99s}`);
    }

    // Memory per idle keep-alive connection and per open WebSocket, the gateway's next to the
    // floor's (bench/memory.mjs): the floor that relays upgrades (bench/common.mjs), one in front of
    // each upstream, pinned as the floor of the other rows.
    let memoryRows;
    if (!only || only.has('memory')) {
      const floorHttp = await startChild(SELF, 'upgrade-floor', [upstream.url], cleanups, splitArgs(env.BENCH_BASELINE_NODE_ARGS));
      loader.pin(floorHttp.pid, 'server');
      const floorWs = await startChild(SELF, 'upgrade-floor', [wsUpstream.url], cleanups, splitArgs(env.BENCH_BASELINE_NODE_ARGS));
      memoryRows = await measureMemory({
        http: { floor: floorHttp, gateway, pathname: '/public', headers: {} },
        ws: { floor: floorWs, gateway, pathname: '/ws', headers: bearerOf(groups.pro)[0] },
      });
    }

    // Decisions (docs/decisions.md): the bearer + plan route decided on the decisions listener,
    // no upstream hop, against the same route proxied by the gateway; then nginx with
    // auth_request asking the gateway against nginx alone, where nginx is installed.
    let decisionsRun;
    if (!only || only.has('decisions')) {
      const plan = scenarios.find((s) => s.route === '/plan');
      decisionsRun = await runDecisions(measure, gateway, upstream, plan, cleanups, loader);
    }

    printReport(rows, loginRun, gateway, decisionsRun);
    if (memoryRows) printMemory(memoryRows);
    const broken = rows.some((r) => r.gateway && (r.gateway.unexpected || r.baseline.unexpected)) || loginRun?.quiet.unexpected || loginRun?.busy.unexpected
      || [decisionsRun?.gateway, decisionsRun?.nginx].some((pair) => pair && (pair.a.unexpected || pair.b.unexpected));
    if (broken) process.exitCode = 1;
  } catch (err) {
    console.error(`bench failed: ${err.stack ?? err}`);
    process.exitCode = 1;
  } finally {
    await cleanup();
  }
}

/**
 * `pro` users with an API key each (from seed()), free users who already used the day, and users
 * of the `capped` plan (1 request a minute).
 */
async function seedUsers(storage) {
  const today = new Date().toISOString().slice(0, 10);
  const { pro, free } = await seed(storage, {
    tag: 'bench',
    password: PASSWORD,
    users: USERS,
    free: async (make, i, db) => {
      const f = await make('free', i);
      await db.query('UPDATE users SET daily_usage = 1, last_usage_date = $2::date WHERE id = $1', [f.id, today]);
      const c = await make('capped', i);
      await db.query("UPDATE users SET plan = 'capped' WHERE id = $1", [c.id]);
      return [f, c];
    },
  });
  return { pro, used: free.filter((u) => u.email.includes('-free-')), capped: free.filter((u) => u.email.includes('-capped-')) };
}

// ── processes ───────────────────────────────────────────────────────────────────────────────
function splitArgs(text) {
  return text ? text.split(/\s+/).filter(Boolean) : [];
}

function gatewayConfig(port, decisionsPort, storage, upstreamUrl, wsUpstreamUrl) {
  return {
    ...baseConfig(port, storage),
    // Tokens that outlive the run: the users log in once, at its start, and a run takes longer than
    // the default 15 minutes (a bearer row measured on expired tokens would time 401s).
    auth: { jwt: { algorithm: 'HS256', secret: randomBytes(48).toString('base64url') }, rateLimit: { max: 0 }, accessTokenTtl: '4h' },
    // free: the spec's 1 a day; pro: a perMinute no bench can reach; capped: refused after one a minute.
    // pro: a daily quota no bench reaches either (the counted route, one busy user).
    plans: { limits: { free: { daily: 1 }, pro: { perMinute: 1_000_000_000, daily: 100_000_000 }, capped: { perMinute: 1 } } },
    admin: { port: 0 },
    decisions: { host: '127.0.0.1', port: decisionsPort },
    // The customer portal on, on an origin of its own (issue 74: the proxied path's figures must not
    // move with it): every proxied request now also passes its host rule. The load is sent to
    // 127.0.0.1, so none of it is the portal's.
    portal: { enabled: true, publicUrl: `http://localhost:${port}`, product: { name: 'Bench' } },
    upstreams: {
      echo: { url: upstreamUrl, timeout: '30s' },
      signed: { url: upstreamUrl, timeout: '30s', assertion: true },
      live: { url: wsUpstreamUrl, timeout: '30s' },
    },
    routes: [
      { path: '/public', upstream: 'echo', auth: 'none' },
      { path: '/bearer', upstream: 'echo', auth: 'required' },
      { path: '/plan', upstream: 'echo', auth: 'required', plans: ['premium', 'pro'] },
      { path: '/apikey', upstream: 'echo', auth: 'required' },
      { path: '/scoped', upstream: 'echo', auth: 'required', scopes: [SCOPE] },
      { path: '/daily', upstream: 'echo', auth: 'required', dailyLimit: true },
      { path: '/counted', upstream: 'echo', auth: 'required', dailyLimit: true },
      { path: '/rated', upstream: 'echo', auth: 'required', rateLimit: true },
      { path: '/assertion', upstream: 'signed', auth: 'required' },
      { path: '/ws', upstream: 'live', auth: 'required', websocket: true },
    ],
  };
}

/** Fails the run unless the portal answers on its origin and not on the one the load is sent to. */
async function expectPortalOn(gatewayUrl, publicUrl) {
  const onItsOrigin = await send(gatewayUrl, 'GET', '/portal/', { headers: { host: new URL(publicUrl).host } });
  const onTheLoads = await send(gatewayUrl, 'GET', '/portal/');
  if (onItsOrigin.status !== 200 || onTheLoads.status === 200) {
    throw new Error(`the portal is not on its own origin: ${onItsOrigin.status} on ${publicUrl}, ${onTheLoads.status} on ${gatewayUrl}`);
  }
}

/** The built gateway on `config`, its config and log files named after `name`. */
async function startGateway(tmp, name, config, cleanups) {
  const configFile = path.join(tmp, `${name}.bench.yaml`);
  writeConfig(configFile, config);
  const logFile = path.join(tmp, `${name}.log`);
  const logFd = openSync(logFile, 'a');
  const logLevel = env.BENCH_LOG_LEVEL ?? 'info';
  // stdout goes to a file: the gateway pays for its logging as in production, the load
  // generator does not.
  // e.g. BENCH_GATEWAY_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof" profiles the gateway.
  const nodeArgs = splitArgs(env.BENCH_GATEWAY_NODE_ARGS);
  const child = spawnGateway(configFile, { nodeArgs, stdio: ['ignore', logFd, logFd], logLevel }, cleanups);
  closeSync(logFd);
  const url = `${config.server.tls ? 'https' : 'http'}://127.0.0.1:${config.server.port}`;
  const decisionsUrl = config.decisions.port ? `http://127.0.0.1:${config.decisions.port}` : undefined;
  if (await waitForGateway(send, child, url, '/healthz')) return { name, pid: child.pid, child, url, decisionsUrl, logFile, logLevel };
  throw new Error(`the gateway did not start; its log:\n${readFileSync(logFile, 'utf8').slice(-4000)}`);
}

/**
 * PgBouncer in transaction mode on `port`, in front of the run's database, from the docs' example
 * made local (pgbouncerIni.mjs, as the tests run it). It refuses to run as root: under root it runs as postgres.
 * { url } or { skip } when pgbouncer is not installed.
 */
async function startPgBouncer(postgresUrl, port, cleanups) {
  const binary = ['/usr/sbin/pgbouncer', '/usr/bin/pgbouncer', '/usr/local/bin/pgbouncer'].find(isExecutable);
  if (!binary) return { skip: 'pgbouncer is not installed' };
  const dir = mkdtempSync(path.join(os.tmpdir(), 'gw-bench-pgbouncer-'));
  chmodSync(dir, 0o777);
  cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
  const ini = localPgBouncerIni(postgresUrl, port, dir);
  const file = path.join(dir, 'pgbouncer.ini');
  writeFileSync(file, ini);
  chmodSync(file, 0o644);
  const child = spawn(binary, [...(process.getuid?.() === 0 ? ['-u', 'postgres'] : []), file], { stdio: 'ignore' });
  cleanups.push(() => stopProcess(child));
  const url = new URL(postgresUrl);
  url.port = String(port);
  for (let i = 0; i < 100; i++) {
    if (child.exitCode !== null) break;
    const { default: pg } = await import('pg');
    const client = new pg.Client({ connectionString: url.toString(), connectionTimeoutMillis: 1000 });
    if (await client.connect().then(() => true, () => false)) {
      await client.end();
      return { url: url.toString() };
    }
    await sleep(100);
  }
  throw new Error(`pgbouncer did not start: ${readFileSync(path.join(dir, 'pgbouncer.log'), 'utf8').slice(-2000)}`);
}

/** Routes the large-table gateway declares beside the bench's. */
const EXTRA_ROUTES = 2000;

// ── decisions ───────────────────────────────────────────────────────────────────────────────
const DECISIONS_TARGET = 1.5;

/**
 * Paired rounds of `scenario` on targets a and b (see inTurn), after a warm-up of each. The
 * decisions target is `/decisions` on the decisions listener, so `${url}/plan/item` asks for the
 * route the other side proxies.
 */
async function runDecisions(measure, gateway, upstream, plan, cleanups, loader) {
  const decisions = { name: 'decisions', pid: gateway.pid, url: `${gateway.decisionsUrl}/decisions` };
  const probe = await send(gateway.decisionsUrl, 'GET', '/decisions/plan/probe', { headers: plan.headers()[0] });
  if (probe.status !== 200) throw new Error(`decisions: expected 200, got ${probe.status} ${probe.text}`);
  const result = { gateway: await pairedRounds(measure, gateway, decisions, plan, TARGET_ROUNDS) };
  console.log(`- decisions, bearer + plan: req/s per round: proxied ${result.gateway.a.rounds}; decided ${result.gateway.b.rounds}`);
  const nginxBinary = findNginx();
  if (!nginxBinary) {
    result.nginxSkipped = 'nginx is not installed';
    return result;
  }
  const nginx = await startNginx(nginxBinary, upstream.url, gateway.decisionsUrl, cleanups);
  loader.pin(nginx.alone.pid, 'server');
  const guarded = await send(nginx.guarded.url, 'GET', '/plan/probe', { headers: plan.headers()[0] });
  if (guarded.status !== 200 || !guarded.json?.user) throw new Error(`nginx + gateway: the upstream was not told the identity: ${guarded.status} ${guarded.text}`);
  result.nginx = await pairedRounds(measure, nginx.alone, nginx.guarded, plan, ROUNDS);
  console.log(`- nginx alone vs nginx + auth_request + gateway: req/s per round: ${result.nginx.a.rounds}; ${result.nginx.b.rounds}`);
  return result;
}

async function pairedRounds(measure, a, b, scenario, rounds) {
  await measure(a, scenario, WARMUP);
  await measure(b, scenario, WARMUP);
  const runs = { a: [], b: [] };
  for (let round = 0; round < rounds; round++) {
    await inTurn(round, async () => runs.a.push(await measure(a, scenario, SECONDS)), async () => runs.b.push(await measure(b, scenario, SECONDS)));
  }
  return { a: combine(runs.a), b: combine(runs.b) };
}

const findNginx = () => ['/usr/sbin/nginx', '/usr/bin/nginx', '/usr/local/sbin/nginx'].find(isExecutable);

/**
 * Two more gateways like the first (same database, secret and routes), with server.workers 1 and
 * 2, and nginx with two workers proxying alone: the unpinned targets, whose CPU is their whole
 * process tree's.
 */
async function startFleet(tmp, config, upstreamUrl, decisionsUrl, cleanups) {
  const withWorkers = async (name, workers) => ({
    ...(await startGateway(tmp, name, { ...config, server: { ...config.server, port: await freePort(), workers }, decisions: { port: 0 } }, cleanups)),
    unpinned: true, tree: true,
  });
  const one = await withWorkers('gateway-1-worker', 1);
  const two = await withWorkers('gateway-2-workers', 2);
  const binary = findNginx();
  const nginx = binary && { ...(await startNginx(binary, upstreamUrl, decisionsUrl, cleanups, 2)).alone, unpinned: true, tree: true };
  return { one, two, nginx };
}

/**
 * HAProxy, one thread, in front of the upstream, doing the gateway's bearer check in C: the token's
 * HS256 signature (jwt_verify, with the gateway's secret), its exp, then x-user-id from its sub.
 * Installed from Debian's packages when missing and the bench runs as root; else { skip }.
 */
async function startHaproxy(upstreamUrl, secret, cleanups) {
  const find = () => ['/usr/sbin/haproxy', '/usr/bin/haproxy', '/usr/local/sbin/haproxy'].find(isExecutable);
  if (!find() && process.getuid?.() === 0 && isExecutable('/usr/bin/apt-get')) {
    console.log('Installing haproxy (Debian package) for the bench');
    try {
      execFileSync('/usr/bin/apt-get', ['install', '-y', '--no-install-recommends', 'haproxy'], { stdio: 'ignore', env: { ...env, DEBIAN_FRONTEND: 'noninteractive' } });
    } catch { /* skipped below */ }
  }
  const binary = find();
  if (!binary) return { skip: 'haproxy is not installed (apt-get install haproxy)' };
  const dir = mkdtempSync(path.join(os.tmpdir(), 'gw-bench-haproxy-'));
  cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
  const port = await freePort();
  const file = path.join(dir, 'haproxy.cfg');
  writeFileSync(file, `global
  nbthread 1
  maxconn 4096
defaults
  mode http
  timeout connect 5s
  timeout client 30s
  timeout server 30s
frontend gateway
  bind 127.0.0.1:${port}
  http-request set-var(txn.bearer) http_auth_bearer
  http-request set-var(txn.alg) var(txn.bearer),jwt_header_query('$.alg')
  http-request deny deny_status 401 unless { var(txn.alg) -m str HS256 }
  http-request deny deny_status 401 unless { var(txn.bearer),jwt_verify(txn.alg,"${secret}") -m int 1 }
  http-request set-var(txn.exp) var(txn.bearer),jwt_payload_query('$.exp','int')
  http-request set-var(txn.now) date
  http-request deny deny_status 401 unless { var(txn.exp),sub(txn.now) -m int gt 0 }
  http-request set-header x-user-id %[var(txn.bearer),jwt_payload_query('$.sub')]
  http-request set-header x-auth-method bearer
  default_backend app
backend app
  http-reuse always
  server app ${new URL(upstreamUrl).host} maxconn 128
`);
  const child = spawn(binary, ['-db', '-f', file], { stdio: ['ignore', 'ignore', 'pipe'] });
  let errors = '';
  child.stderr.on('data', (c) => { errors += c; });
  cleanups.push(() => stopProcess(child));
  const target = { name: 'haproxy', pid: child.pid, url: `http://127.0.0.1:${port}` };
  for (let i = 0; i < 100; i++) {
    // No token: refused, as the gateway refuses it.
    if ((await send(target.url, 'GET', '/bearer/probe').catch(() => null))?.status === 401) return target;
    if (child.exitCode !== null) break;
    await sleep(100);
  }
  throw new Error(`haproxy did not start: ${errors.slice(-2000)}`);
}

function isExecutable(file) {
  try {
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/**
 * One nginx with two servers: one proxying to the upstream alone, one asking the gateway first as
 * docs/decisions.md configures it (auth_request, identity headers copied). One worker, as the
 * gateway is one process (two against server.workers: 2). Its own directory, readable by the workers (`nobody` under root).
 */
async function startNginx(binary, upstreamUrl, decisionsUrl, cleanups, workers = 1) {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'gw-bench-nginx-'));
  chmodSync(dir, 0o755);
  cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
  const [alone, guarded] = [await freePort(), await freePort()];
  const copied = ['x_user_id', 'x_user_plan', 'x_user_email', 'x_auth_method', 'x_gateway_assertion'];
  const name = (h) => h.split('_').map((w) => w[0].toUpperCase() + w.slice(1)).join('-');
  writeFileSync(path.join(dir, 'nginx.conf'), `pid ${dir}/nginx.pid;
worker_processes ${workers};
events { worker_connections 4096; }
http {
  access_log off;
  upstream app { server ${new URL(upstreamUrl).host}; keepalive 128; }
  upstream gateway_decisions { server ${new URL(decisionsUrl).host}; keepalive 128; }
  server {
    listen 127.0.0.1:${alone};
    location / { proxy_http_version 1.1; proxy_set_header Connection ""; proxy_pass http://app; }
  }
  server {
    listen 127.0.0.1:${guarded};
    location / {
      auth_request /_gateway_decision;
${copied.map((h) => `      auth_request_set $gw_${h} $upstream_http_${h};\n      proxy_set_header ${name(h)} $gw_${h};`).join('\n')}
      proxy_set_header Authorization "";
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_pass http://app;
    }
    location = /_gateway_decision {
      internal;
      proxy_pass http://gateway_decisions/decisions;
      proxy_set_header X-Forwarded-Uri $request_uri;
      proxy_set_header X-Forwarded-Method $request_method;
      proxy_pass_request_body off;
      proxy_set_header Content-Length "";
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
}
`);
  const child = spawn(binary, ['-p', `${dir}/`, '-c', `${dir}/nginx.conf`, '-e', `${dir}/error.log`, '-g', 'daemon off;'], { stdio: 'ignore' });
  cleanups.push(() => stopProcess(child));
  const targets = { alone: { name: 'nginx', pid: child.pid, url: `http://127.0.0.1:${alone}` }, guarded: { name: 'nginx + gateway', pid: child.pid, url: `http://127.0.0.1:${guarded}` } };
  for (let i = 0; i < 100; i++) {
    if ((await send(targets.alone.url, 'GET', '/public/probe').catch(() => null))?.status === 200) return targets;
    if (child.exitCode !== null) break;
    await sleep(100);
  }
  throw new Error(`nginx did not start: ${readFileSync(path.join(dir, 'error.log'), 'utf8').slice(-2000)}`);
}

/** Prints the decisions table; true when its target is met. */
function printDecisionsRun({ gateway, nginx, nginxSkipped }) {
  const ratio = paired(gateway.b, gateway.a, (x, y) => x.rps / y.rps);
  const ok = ratio >= DECISIONS_TARGET && !gateway.a.unexpected && !gateway.b.unexpected;
  console.log('\n| decisions, bearer + plan | req/s | p50 / p99 (ms) | ratio | target |');
  console.log('|---|---:|---:|---:|---|');
  console.log(`| proxied by the gateway | ${fmtRps(gateway.a.rps)} | ${fmtMs(gateway.a.p50)} / ${fmtMs(gateway.a.p99)} | | |`);
  const decided = `${fmtRps(gateway.b.rps)} | ${fmtMs(gateway.b.p50)} / ${fmtMs(gateway.b.p99)} | ${ratio.toFixed(2)}`;
  console.log(`| decided (decisions listener) | ${decided} | ≥ ${DECISIONS_TARGET.toFixed(2)} ${verdict(ok)} |`);
  if (nginx) {
    const nginxRatio = paired(nginx.b, nginx.a, (x, y) => x.rps / y.rps);
    console.log(`| nginx alone | ${fmtRps(nginx.a.rps)} | ${fmtMs(nginx.a.p50)} / ${fmtMs(nginx.a.p99)} | | |`);
    console.log(`| nginx + auth_request + gateway | ${fmtRps(nginx.b.rps)} | ${fmtMs(nginx.b.p50)} / ${fmtMs(nginx.b.p99)} | ${nginxRatio.toFixed(2)} | reported |`);
  } else {
    console.log(`| nginx + auth_request + gateway | - | - | - | skipped: ${nginxSkipped} |`);
  }
  return ok;
}

// ── HTTP helpers ────────────────────────────────────────────────────────────────────────────
const { send, login } = httpClient({ maxSockets: 32 });

/** One request through the gateway before loading: the scenario does what it claims, or is skipped. */
async function probe(url, scenario) {
  const headers = scenario.headers()[0];
  let res = await send(url, 'GET', `${scenario.route}/probe`, { headers });
  // A refilling bucket admits its first request: the second one shows the refusal.
  if (scenario.refills && res.status === 200) res = await send(url, 'GET', `${scenario.route}/probe`, { headers });
  if (scenario.requires === 'assertion' && res.status === 200 && res.json?.assertion !== true) {
    return 'the gateway does not send x-gateway-assertion yet';
  }
  if (res.status !== scenario.expect) throw new Error(`${scenario.name}: expected ${scenario.expect}, got ${res.status} ${res.text}`);
  if (scenario.identity && (res.json?.method !== scenario.identity || !res.json?.user)) {
    throw new Error(`${scenario.name}: the upstream was not told the identity: ${res.text}`);
  }
  return undefined;
}

/** One WebSocket through the gateway before loading: it opens, and the upstream was told who. */
async function probeWs(url, scenario) {
  const { default: WebSocket } = await import('ws');
  const ws = new WebSocket(`${url.replace(/^http/, 'ws')}${scenario.route}/probe`, { headers: scenario.headers()[0] });
  const greeting = await new Promise((resolve, reject) => {
    ws.once('message', (data) => resolve(JSON.parse(String(data))));
    ws.once('unexpected-response', (_req, res) => reject(new Error(`${scenario.name}: the upgrade got ${res.statusCode}`)));
    ws.once('error', reject);
  });
  ws.close();
  if (greeting.method !== scenario.identity || !greeting.user) throw new Error(`${scenario.name}: the upstream was not told the identity: ${JSON.stringify(greeting)}`);
  return undefined;
}

// ── one load round ──────────────────────────────────────────────────────────────────────────
/** CPU time (user + system, ms) a process has used so far; undefined where /proc is missing. */
function cpuMs(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10; // USER_HZ is 100 on Linux
  } catch {
    return undefined;
  }
}

/** CPU time of a process and every process below it (server.workers, nginx's workers). */
function treeCpuMs(pid) {
  let total = cpuMs(pid);
  for (const child of childPids(pid)) total = total === undefined ? undefined : total + (treeCpuMs(child) ?? 0);
  return total;
}

function childPids(pid) {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(' ').filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/** The gateway's password hasher (its only child process), or undefined before it has started. */
function hasherPid(gatewayPid) {
  try {
    return readFileSync(`/proc/${gatewayPid}/task/${gatewayPid}/children`, 'utf8').trim().split(' ')[0] || undefined;
  } catch {
    return undefined;
  }
}

/** Jiffies the whole machine has spent idle, and in all, so far (/proc/stat); undefined without /proc. */
function machineTicks() {
  try {
    const [, ...fields] = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0].trim().split(/\s+/).map(Number);
    return { idle: fields[3] + fields[4], total: fields.slice(0, 8).reduce((n, f) => n + f, 0) };
  } catch {
    return undefined;
  }
}

async function load(loader, target, scenario, seconds, extra = {}) {
  const headerSets = scenario.headers();
  // The baseline has no guards: it proxies every scenario's requests with a 200.
  const expected = target.name === 'baseline' ? 200 : scenario.expect;
  const cpu = () => (target.tree ? treeCpuMs(target.pid) : cpuMs(target.pid));
  const cpuBefore = cpu();
  const machineBefore = machineTicks();
  const hasher = extra.logins ? hasherPid(target.pid) : undefined;
  const hashBefore = hasher && cpuMs(hasher);
  const round = loader.round({ url: `${target.url}${target.route ?? scenario.route}/item`, headerSets, seconds, unpinned: target.unpinned });
  const stopLogins = extra.logins ? await startLogins(extra.logins) : undefined;
  const result = await round;
  await stopLogins?.();
  const cpuAfter = cpu();
  const machineAfter = machineTicks();
  const hashAfter = hasher && cpuMs(hasher);
  let unexpected = result.errors;
  let refilled = 0;
  for (const [status, n] of Object.entries(result.statuses)) {
    if (Number(status) === expected) continue;
    if (scenario.refills && target.name !== 'baseline' && Number(status) === 200) refilled += n;
    else unexpected += n;
  }
  return {
    requests: result.requests,
    rps: result.requests / result.seconds,
    p50: result.p50,
    p99: result.p99,
    unexpected,
    refilled,
    cpuMs: cpuBefore === undefined || cpuAfter === undefined ? undefined : cpuAfter - cpuBefore,
    // The share of both cores nobody used: the room the idle-priority hasher can take.
    idle: machineBefore && machineAfter ? (machineAfter.idle - machineBefore.idle) / (machineAfter.total - machineBefore.total) : undefined,
    hashCpuMs: hashBefore === undefined || hashAfter === undefined ? undefined : hashAfter - hashBefore,
  };
}

// ── load generators ─────────────────────────────────────────────────────────────────────────
// Each has round({ url, headerSets, seconds }) → { requests, seconds, statuses: { [status]: n },
// errors, p50, p99 (ms) } and pin(pid, side): side 'server' for the process under test, 'load'
// for everything that makes the load (the load generator, the upstreams, the login driver).
const SERVER_CORE = '0';
const LOAD_CORE = '1';

async function chooseLoader() {
  const wrk = env.BENCH_LOADER !== 'autocannon' && ['/usr/bin/wrk', '/usr/local/bin/wrk'].find(isExecutable);
  const taskset = ['/usr/bin/taskset', '/bin/taskset'].find(isExecutable);
  if (wrk && taskset && os.cpus().length >= 2) {
    // 'all': every core, for the process and those below it (children inherit this process's core 1).
    const cores = { server: SERVER_CORE, load: LOAD_CORE, all: `0-${os.cpus().length - 1}` };
    const pin = (pid, side) => {
      execFileSync(taskset, ['-a', '-p', '-c', cores[side], String(pid)], { stdio: 'ignore' });
      if (side === 'all') for (const child of childPids(pid)) pin(child, side);
    };
    pin(process.pid, 'load');
    return { name: `wrk, the proxy under test alone on core ${SERVER_CORE}, the rest on core ${LOAD_CORE}`, pin, round: (options) => wrkRound(wrk, taskset, options) };
  }
  if (env.BENCH_LOADER === 'wrk') throw new Error('BENCH_LOADER=wrk: wrk, taskset and two cores are needed (apt-get install wrk)');
  const { default: autocannon } = await import('autocannon');
  const why = env.BENCH_LOADER === 'autocannon' ? 'BENCH_LOADER=autocannon' : 'no wrk and taskset, or one core';
  return { name: `autocannon, unpinned (${why})`, pin: () => {}, round: (options) => autocannonRound(autocannon, options) };
}

/** One round with autocannon in this process: each connection holds one header set, as a client would. */
async function autocannonRound(autocannon, { url, headerSets, seconds }) {
  let next = 0;
  let latencies = new Float64Array(1 << 16);
  let count = 0;
  const statuses = {};
  const instance = autocannon({
    url,
    connections: CONNECTIONS,
    pipelining: 1,
    duration: seconds,
    setupClient: (client) => client.setHeaders(headerSets[next++ % headerSets.length]),
  });
  // autocannon's own percentiles have 1 ms resolution: keep every latency for finer ones.
  instance.on('response', (_client, status, _bytes, ms) => {
    if (count === latencies.length) {
      const bigger = new Float64Array(latencies.length * 2);
      bigger.set(latencies);
      latencies = bigger;
    }
    latencies[count++] = ms;
    statuses[status] = (statuses[status] ?? 0) + 1;
  });
  const result = await instance;
  const sorted = latencies.subarray(0, count).sort();
  return { requests: result.requests.total, seconds: result.duration, statuses, errors: result.errors + result.timeouts, p50: percentile(sorted, 0.5), p99: percentile(sorted, 0.99) };
}

/**
 * One round with wrk (one thread, CONNECTIONS connections) on the load core. Its Lua script takes
 * the header sets in turn, request by request, counts the answers by status and prints them
 * with wrk's own totals and percentiles (µs) as one JSON line.
 */
async function wrkRound(wrk, taskset, { url, headerSets, seconds, unpinned }) {
  const lua = (v) => JSON.stringify(String(v)); // a JSON string is a valid Lua string literal here
  const script = `local sets = {${headerSets.map((h) => `{${Object.entries(h).map(([k, v]) => `[${lua(k)}] = ${lua(v)}`).join(', ')}}`).join(', ')}}
local i = 0
statuses = {} -- a global: done() reads it from each thread
request = function()
  i = i % #sets + 1
  return wrk.format('GET', nil, sets[i])
end
response = function(status)
  statuses[status] = (statuses[status] or 0) + 1
end
local threads = {}
setup = function(thread) table.insert(threads, thread) end
done = function(summary, latency)
  local counts = {}
  for _, t in ipairs(threads) do
    for status, n in pairs(t:get('statuses')) do counts[#counts + 1] = string.format('"%d":%d', status, n) end
  end
  local e = summary.errors
  io.write(string.format('WRK {"requests":%d,"us":%d,"errors":%d,"p50":%d,"p99":%d,"statuses":{%s}}\\n',
    summary.requests, summary.duration, e.connect + e.read + e.write + e.timeout, latency:percentile(50), latency:percentile(99), table.concat(counts, ',')))
end
`;
  const dir = mkdtempSync(path.join(os.tmpdir(), 'gw-bench-wrk-'));
  try {
    const file = path.join(dir, 'round.lua');
    writeFileSync(file, script);
    const out = await new Promise((resolve, reject) => {
      // Unpinned rounds: wrk on every core with a thread per core, as the servers it loads.
      const [cores, threads] = unpinned ? [`0-${os.cpus().length - 1}`, os.cpus().length] : [LOAD_CORE, 1];
      const child = passingChild(spawn(taskset, ['-c', cores, wrk, `-t${threads}`, `-c${CONNECTIONS}`, `-d${seconds}s`, '--timeout', '10s', '-s', file, url], { stdio: ['ignore', 'pipe', 'pipe'] }));
      let text = '';
      child.stdout.on('data', (c) => { text += c; });
      child.stderr.on('data', (c) => { text += c; });
      child.once('error', reject);
      child.once('exit', (code) => (code === 0 ? resolve(text) : reject(new Error(`wrk exited ${code}: ${text}`))));
    });
    const line = out.split('\n').find((l) => l.startsWith('WRK '));
    if (!line) throw new Error(`wrk printed no result: ${out}`);
    const r = JSON.parse(line.slice(4));
    return { requests: r.requests, seconds: r.us / 1e6, statuses: r.statuses, errors: r.errors, p50: r.p50 / 1000, p99: r.p99 / 1000 };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * One round of WebSocket echo round trips: CONNECTIONS sockets (opened first, one user's token
 * each, in turn), each sending a 64-byte message as soon as the previous one came back.
 */
async function loadWs(target, scenario, seconds) {
  const { default: WebSocket } = await import('ws');
  const headerSets = scenario.headers();
  const url = `${target.url.replace(/^http/, 'ws')}${scenario.route}/item`;
  const sockets = await Promise.all(Array.from({ length: CONNECTIONS }, (_, i) => new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers: headerSets[i % headerSets.length], perMessageDeflate: false });
    ws.once('open', () => resolve(ws));
    ws.once('error', reject);
  })));
  const payload = 'x'.repeat(64);
  const latencies = [];
  let unexpected = 0;
  const cpuBefore = cpuMs(target.pid);
  const started = performance.now();
  const deadline = started + seconds * 1000;
  await Promise.all(sockets.map((ws) => new Promise((resolve) => {
    let sent = 0;
    const next = () => {
      if (performance.now() >= deadline) return resolve();
      sent = performance.now();
      ws.send(payload);
    };
    ws.on('message', (data) => {
      latencies.push(performance.now() - sent);
      if (String(data) !== payload) unexpected++;
      next();
    });
    ws.once('close', () => { unexpected++; resolve(); });
    next();
  })));
  const elapsed = (performance.now() - started) / 1000;
  const cpuAfter = cpuMs(target.pid);
  for (const ws of sockets) ws.removeAllListeners('close').close();
  const sorted = Float64Array.from(latencies).sort();
  return {
    requests: latencies.length,
    rps: latencies.length / elapsed,
    p50: percentile(sorted, 0.5),
    p99: percentile(sorted, 0.99),
    unexpected,
    cpuMs: cpuBefore === undefined || cpuAfter === undefined ? undefined : cpuAfter - cpuBefore,
  };
}

/** Starts the login driver's open loop; the returned function stops it and adds up its logins. */
async function startLogins({ driver, users, into }) {
  driver.child.send({ start: users.map(({ email, password }) => ({ email, password })) });
  await nextMessage(driver.child); // started
  return async () => {
    driver.child.send({ stop: true });
    const { ok, failed, latencies } = await nextMessage(driver.child);
    into.ok += ok;
    into.failed += failed;
    into.latencies.push(...latencies);
  };
}

function nextMessage(child) {
  return new Promise((resolve) => child.once('message', resolve));
}

// ── child: the login driver ─────────────────────────────────────────────────────────────────
/** ~10 logins a second on their own connections, whatever the answers' pace (open loop). */
function runLoginDriver(url) {
  let stop;
  process.on('message', (message) => {
    if (message.start) {
      stop = loginLoop(url, message.start);
      process.send({ started: true });
    } else if (message.stop) {
      void stop().then((result) => process.send(result));
    }
  });
  process.on('disconnect', () => process.exit(0));
  process.on('SIGTERM', () => process.exit(0));
  process.send({ port: 0 }); // ready (startChild waits for this)
}

function loginLoop(url, users) {
  const result = { ok: 0, failed: 0, latencies: [] };
  const inFlight = new Set();
  let i = 0;
  const timer = setInterval(() => {
    const user = users[i++ % users.length];
    const p = send(url, 'POST', '/api/v1/auth/login', { json: { email: user.email, password: user.password } })
      .then((res) => {
        if (res.status === 200) result.ok++;
        else result.failed++;
        result.latencies.push(res.ms);
      }, () => { result.failed++; })
      .finally(() => inFlight.delete(p));
    inFlight.add(p);
  }, 1000 / LOGINS_PER_SECOND);
  return async () => {
    clearInterval(timer);
    await Promise.all(inFlight);
    return result;
  };
}

// ── process starts ──────────────────────────────────────────────────────────────────────────
/** How each process that startAnew may start again is started, by the object main() holds for it. */
const starters = new Map();

/** `target`, which `start` (resolving to a target on the same terms) can start again. */
function startsAnew(target, start) {
  starters.set(target, start);
  return target;
}

/**
 * Stops the processes behind `copies` (targets, or pairOf's copies of them) that can be started
 * again, and starts each anew, pinned to the server's core: the object main() holds is updated,
 * so every pair made after sees the new process (a gateway keeps its port, a least takes another).
 */
async function startAnew(copies, loader) {
  for (const [target, start] of starters) {
    if (!copies.some((copy) => copy.child === target.child)) continue;
    await stopProcess(target.child);
    Object.assign(target, await start());
    loader.pin(target.pid, 'server');
  }
}

/**
 * Runs a then b on even rounds, b then a on odd ones: whatever drifts during a run (a warming
 * cache, a neighbour on the machine) then weighs on both sides of the comparison alike.
 */
async function inTurn(round, a, b) {
  if (round % 2 === 0) {
    await a();
    await b();
  } else {
    await b();
    await a();
  }
}

/**
 * One target's rounds summed up. Other work on the machine comes and goes, so each figure is the
 * median over rounds (not the mean, which one disturbed round would drag), and comparisons are
 * made between adjacent rounds (paired) before taking the median.
 */
function combine(runs) {
  const requests = runs.reduce((n, r) => n + r.requests, 0);
  const cpu = runs.every((r) => r.cpuMs !== undefined) ? runs.reduce((n, r) => n + r.cpuMs, 0) : undefined;
  return {
    runs,
    rps: median(runs.map((r) => r.rps)),
    p50: median(runs.map((r) => r.p50)),
    p99: median(runs.map((r) => r.p99)),
    unexpected: runs.reduce((n, r) => n + r.unexpected, 0),
    refilled: runs.reduce((n, r) => n + (r.refilled ?? 0), 0),
    cpuUsPerRequest: cpu === undefined || !requests ? undefined : (cpu * 1000) / requests,
    idle: runs.every((r) => r.idle !== undefined) ? median(runs.map((r) => r.idle)) : undefined,
    rounds: runs.map((r) => fmtRps(r.rps)).join(' / '),
    p99s: runs.map((r) => fmtMs(r.p99)).join(' / '),
  };
}

/** The median over rounds of f(a's round i, b's round i): the two were measured one after the other. */
function paired(a, b, f) {
  return median(a.runs.map((run, i) => f(run, b.runs[i])));
}

function median(values) {
  const sorted = [...values].sort((x, y) => x - y);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

function percentile(sorted, q) {
  if (!sorted.length) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)];
}

// ── the report ──────────────────────────────────────────────────────────────────────────────
const fmtRps = (n) => Math.round(n).toLocaleString('en-US');
const fmtMs = (n) => (Number.isFinite(n) ? n.toFixed(2) : '-');
const verdict = (ok) => (ok ? 'PASS' : 'FAIL');

/** gateway_trace_spans_total of a gateway's /metrics: { exported, dropped }. */
async function spanCounts(metricsUrl) {
  const text = await (await fetch(metricsUrl)).text();
  const count = (outcome) => Number(new RegExp(`^gateway_trace_spans_total\\{outcome="${outcome}"\\} (\\d+)`, 'm').exec(text)?.[1] ?? 0);
  return { exported: count('exported'), dropped: count('dropped') };
}

function printReport(rows, loginRun, gateway, decisionsRun) {
  const lines = [
    '| scenario | baseline req/s | gateway req/s | ratio | baseline p50 / p99 (ms) | gateway p50 / p99 (ms) | Δp99 (ms) | CPU µs/req baseline / gateway | target |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---|',
  ];
  let allPass = true;
  for (const { scenario, baseline: b, gateway: g, spans } of rows) {
    if (!g) {
      lines.push(`| ${scenario.name} | - | - | - | - | - | - | - | skipped: ${scenario.skip} |`);
      continue;
    }
    const ratio = paired(g, b, (x, y) => x.rps / y.rps);
    const delta = paired(g, b, (x, y) => x.p99 - y.p99);
    const checks = [];
    if (scenario.targets?.ratio !== undefined) checks.push(`ratio ≥ ${scenario.targets.ratio.toFixed(2)} ${verdict(ratio >= scenario.targets.ratio)}`);
    if (scenario.targets?.p99DeltaMs !== undefined) checks.push(`Δp99 ≤ ${scenario.targets.p99DeltaMs} ms ${verdict(delta <= scenario.targets.p99DeltaMs)}`);
    if (scenario.targets?.p99Ratio !== undefined) {
      const p99Ratio = paired(g, b, (x, y) => x.p99 / y.p99);
      checks.push(`p99 ÷ baseline's ${p99Ratio.toFixed(2)} ≤ ${scenario.targets.p99Ratio.toFixed(2)} ${verdict(p99Ratio <= scenario.targets.p99Ratio)}`);
    }
    if (g.unexpected || b.unexpected) checks.push(`ERROR: ${g.unexpected + b.unexpected} unexpected answers`);
    // Every span made must have been sent: a ratio measured while spans were dropped flatters tracing.
    if (spans) checks.push(spans.dropped > spans.exported / 100 ? `ERROR: ${spans.dropped} spans dropped, ${spans.exported} exported` : `${spans.exported} spans exported, ${spans.dropped} dropped`);
    if (scenario.refills) {
      // A bucket of 1 a minute lets each user through once, then once per minute measured.
      const allowed = scenario.headers().length * (2 + Math.ceil((g.runs.length * SECONDS) / 60));
      checks.push(g.refilled > allowed ? `ERROR: ${g.refilled} admitted, more than ${allowed} refills` : `${g.refilled} admitted by refills`);
    }
    allPass &&= !checks.some((c) => /FAIL|ERROR/.test(c));
    const us = (x) => (x === undefined ? '-' : Math.round(x));
    const cpu = b.cpuUsPerRequest === undefined && g.cpuUsPerRequest === undefined ? '-' : `${us(b.cpuUsPerRequest)} / ${us(g.cpuUsPerRequest)}`;
    const latencies = `${fmtMs(b.p50)} / ${fmtMs(b.p99)} | ${fmtMs(g.p50)} / ${fmtMs(g.p99)} | ${delta >= 0 ? '+' : ''}${fmtMs(delta)}`;
    lines.push(`| ${scenario.name} | ${fmtRps(b.rps)} | ${fmtRps(g.rps)} | ${ratio.toFixed(2)} | ${latencies} | ${cpu} | ${checks.join('; ') || '-'} |`);
  }

  console.log('\n## Results\n');
  console.log(lines.join('\n'));
  if (loginRun && !printLoginRun(loginRun)) allPass = false;
  if (decisionsRun && !printDecisionsRun(decisionsRun)) allPass = false;
  const size = statSync(gateway.logFile).size;
  console.log(`\nGateway log (level ${gateway.logLevel}): ${(size / 1024 / 1024).toFixed(1)} MiB written during the run.`);
  console.log(`Machine: ${os.cpus().length} CPUs (${os.cpus()[0]?.model.trim() ?? 'unknown'}), load average at the end ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}.`);
  console.log(`\nAll targets: ${allPass ? 'PASS' : 'FAIL'}`);
}

/** Prints the bearer-beside-logins table; true when its target is met. */
function printLoginRun({ quiet, busy, logins }) {
  const change = paired(busy, quiet, (x, y) => x.p99 / y.p99 - 1);
  const loginsOk = change <= 0.2;
  const loginLatency = Float64Array.from(logins.latencies).sort();
  const loginSeconds = LOGIN_ROUNDS * SECONDS;
  console.log(`\n| bearer beside logins | req/s | p50 (ms) | p99 (ms) | target |`);
  console.log('|---|---:|---:|---:|---|');
  console.log(`| bearer alone | ${fmtRps(quiet.rps)} | ${fmtMs(quiet.p50)} | ${fmtMs(quiet.p99)} | |`);
  const p99Change = `p99 ${change >= 0 ? '+' : ''}${(change * 100).toFixed(0)}% (≤ +20%) ${verdict(loginsOk)}`;
  console.log(`| bearer + ${(logins.ok / loginSeconds).toFixed(1)} logins/s | ${fmtRps(busy.rps)} | ${fmtMs(busy.p50)} | ${fmtMs(busy.p99)} | ${p99Change} |`);
  console.log(`\nLogins: ${logins.ok} succeeded, ${logins.failed} failed; login latency p50 ${fmtMs(percentile(loginLatency, 0.5))} ms, p99 ${fmtMs(percentile(loginLatency, 0.99))} ms.`);
  // What the logins cost the machine, and the room they had: the hasher runs at idle priority.
  const hashing = busy.runs.every((r) => r.hashCpuMs !== undefined) ? busy.runs.reduce((n, r) => n + r.hashCpuMs, 0) : undefined;
  const pct = (share) => (share === undefined ? '-' : `${(share * 100).toFixed(0)} %`);
  console.log(`Password hashing: ${hashing === undefined || !logins.ok ? '-' : fmtMs(hashing / (logins.ok + logins.failed))} ms of CPU per login; `
    + `both cores idle ${pct(quiet.idle)} of the time with bearer traffic alone, ${pct(busy.idle)} with the logins.`);
  return loginsOk && !quiet.unexpected && !busy.unexpected && logins.failed === 0;
}

// Last, so every module-level constant above is initialized before any role runs.
if (role === 'upstream') await runUpstream(echoIdentity);
else if (role === 'wsupstream') await runWsUpstream();
else if (role === 'baseline') await runBaseline(process.argv[4], process.argv[5]);
else if (role === 'upgrade-floor') await runUpgradeFloor(process.argv[4], UNDICI);
else if (role === 'collector') await runUpstream(() => ({}));
else if (role === 'logins') runLoginDriver(process.argv[4]);
else await main();

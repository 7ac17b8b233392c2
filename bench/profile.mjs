#!/usr/bin/env node
// node bench/profile.mjs (after npm run build): a quick, paired look at the proxied path for a change
// to it (issue 77), minutes where npm run bench takes twenty. One gateway (routes /public, auth:
// none, and /bearer, auth: required), optionally a second one built from another checkout
// (PROFILE_BASE_ROOT, its dist/cli.js: the code before a change, same config, same database), the
// contract's least (public and authenticated) and the least holding a Postgres and a Redis
// connection. Rounds alternate target by target so that drift weighs on all; each ratio is taken
// within a round, then the median. CPU µs a request is read from /proc.
//
// The load comes from autocannon in a child process pinned to core 1, the servers on core 0
// (taskset), the upstream with the load.
// PROFILE_ROUNDS (5), PROFILE_SECONDS (3), PROFILE_CONNECTIONS (50), PROFILE_ONLY (public,bearer),
// PROFILE_GATEWAY_ARGS: more Node flags for the gateway(s), e.g. `--cpu-prof --cpu-prof-dir=/tmp/p`
// or `--perf-basic-prof`; PROFILE_LEAST_ARGS: the same for the two contract's least processes; PROFILE_PERF=1 records `perf record -g` of the gateway for one round
// of each route (PROFILE_PERF=all: of every target) (needs --perf-basic-prof to name JIT code) and prints its top entries;
// PROFILE_SYSCALLS=1 counts each target's system calls and context switches a request over one round (`perf stat`);
// PROFILE_GC=1 runs the gateway with --trace-gc and prints the bytes scavenged a request;
// PROFILE_LEAST_IN_FASTIFY=1 adds the least inside fastify (least-in-fastify.mjs) as a target.
import { execFileSync, fork, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  baseConfig, contractLeastOptions, createCleanups, freePort, httpClient, listeningOn, NODE_FLAGS, positive, prepareStorage, ROOT, seed,
  startChild, startContractLeast, stopProcess, waitForGateway, writeConfig,
} from './common.mjs';

const SELF = fileURLToPath(import.meta.url);
const RUN = path.join(path.dirname(SELF), 'run.mjs');
const env = process.env;
const ROUNDS = Math.round(positive(env.PROFILE_ROUNDS, 5));
const SECONDS = positive(env.PROFILE_SECONDS, 3);
const CONNECTIONS = Math.round(positive(env.PROFILE_CONNECTIONS, 50));
const ONLY = new Set((env.PROFILE_ONLY ?? 'public,bearer').split(',').map((s) => s.trim()));
const PASSWORD = 'profile-password-0123';
const { send, login } = httpClient({ maxSockets: 4 });
const split = (text) => (text ?? '').split(' ').filter(Boolean);

// ── child: the load generator ───────────────────────────────────────────────────────────────
async function runLoader() {
  const { default: autocannon } = await import('autocannon');
  process.on('message', async ({ url, headerSets, seconds }) => {
    let next = 0;
    const latencies = [];
    const statuses = {};
    const instance = autocannon({ url, connections: CONNECTIONS, pipelining: 1, duration: seconds, setupClient: (c) => c.setHeaders(headerSets[next++ % headerSets.length]) });
    instance.on('response', (_c, status, _b, ms) => { latencies.push(ms); statuses[status] = (statuses[status] ?? 0) + 1; });
    const result = await instance;
    latencies.sort((a, b) => a - b);
    const at = (q) => latencies[Math.min(latencies.length - 1, Math.ceil(q * latencies.length) - 1)];
    process.send({ requests: result.requests.total, seconds: result.duration, statuses, errors: result.errors + result.timeouts, p50: at(0.5), p99: at(0.99) });
  });
  process.on('disconnect', () => process.exit(0));
  process.send({ ready: true });
}

// ── the parent ──────────────────────────────────────────────────────────────────────────────
function cpuMs(pid) {
  let stat;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch (err) {
    throw new Error(`the target with pid ${pid} is gone (${err.code})`, { cause: err });
  }
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

const pin = (pid, cores) => { try { execFileSync('taskset', ['-a', '-p', '-c', cores, String(pid)], { stdio: 'ignore' }); } catch { /* no taskset: unpinned */ } };
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); const m = s.length >> 1; return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2; };

async function startGateway(root, name, tmp, config, cleanups, gcLog) {
  const configFile = path.join(tmp, `${name}.json`);
  writeConfig(configFile, config);
  const logFile = path.join(tmp, `${name}.log`);
  const fd = openSync(logFile, 'a');
  const args = [...NODE_FLAGS, ...split(env.PROFILE_GATEWAY_ARGS), ...(gcLog ? ['--trace-gc'] : []), path.join(root, 'dist/cli.js'), 'start', '--config', configFile];
  const child = spawn(process.execPath, args, { stdio: ['ignore', fd, fd], env: { PATH: env.PATH, HOME: env.HOME, NODE_ENV: 'production', LOG_LEVEL: 'warn' } });
  closeSync(fd);
  cleanups.push(() => stopProcess(child));
  const url = `http://127.0.0.1:${config.server.port}`;
  if (!(await waitForGateway(send, child, url, '/healthz', 300_000))) throw new Error(`${name} did not start:\n${readFileSync(logFile, 'utf8').slice(-3000)}`);
  return { name, pid: child.pid, url, logFile };
}

/** Bytes scavenged since `from` in a --trace-gc log: what the young generation took in. */
function scavengedMb(logFile, from) {
  let mb = 0;
  for (const line of readFileSync(logFile, 'utf8').slice(from).split('\n')) {
    const m = /Scavenge\S*\s+([\d.]+) \([\d.]+\) -> ([\d.]+)/.exec(line);
    if (m) mb += Number(m[1]) - Number(m[2]);
  }
  return mb;
}

function round(loader, target, pathname, headerSets, gc) {
  const before = cpuMs(target.pid);
  const logAt = gc ? readFileSync(target.logFile, 'utf8').length : 0;
  loader.send({ url: `${target.url}${pathname}/item`, headerSets, seconds: SECONDS });
  // A target that exited during the round has no /proc entry: the round fails (and main()'s cleanup
  // runs) rather than throwing from the listener, which left every process and the database behind.
  return new Promise((resolve, reject) => loader.once('message', (r) => {
    try {
      const cpu = cpuMs(target.pid) - before;
      const unexpected = r.errors + Object.entries(r.statuses).reduce((n, [s, c]) => n + (s === '200' ? 0 : c), 0);
      resolve({ ...r, rps: r.requests / r.seconds, cpuUs: (cpu * 1000) / r.requests, unexpected, gcBytes: gc ? (scavengedMb(target.logFile, logAt) * 1048576) / r.requests : undefined });
    } catch (err) {
      reject(err);
    }
  }));
}

/** `perf record -g` of `pid` while one round runs; its top entries by self time. */
async function perfRound(loader, target, pathname, headerSets, tmp) {
  const out = path.join(tmp, `perf-${target.name}${pathname.replace('/', '-')}.data`);
  const perf = spawn('perf', ['record', '-F', '999', '-o', out, '-p', String(target.pid)], { stdio: 'ignore' });
  await round(loader, target, pathname, headerSets, false);
  perf.kill('SIGINT');
  await new Promise((resolve) => perf.once('exit', resolve));
  const text = execFileSync('perf', ['report', '-i', out, '--no-children', '--sort', 'symbol', '--stdio', '--percent-limit', '0.7', '-g', 'none'], { encoding: 'utf8', maxBuffer: 64 << 20 });
  console.log(`\n### perf, ${target.name} ${pathname} (self time, entries ≥ 0.7 %)\n`);
  console.log(text.split('\n').filter((l) => /^\s+\d/.test(l)).slice(0, 40).map((l) => l.replace(/[\s-]+$/, '')).join('\n'));
}

/** `perf stat` of `pid`'s system calls (and context switches) while one round runs, a request. */
async function syscallRound(loader, target, pathname, headerSets) {
  const perf = spawn('perf', ['stat', '-x', ',', '-e', 'raw_syscalls:sys_enter,context-switches', '-p', String(target.pid)], { stdio: ['ignore', 'ignore', 'pipe'] });
  let text = '';
  perf.stderr.setEncoding('utf8').on('data', (chunk) => { text += chunk; });
  await new Promise((resolve) => setTimeout(resolve, 200)); // perf attached
  const r = await round(loader, target, pathname, headerSets, false);
  perf.kill('SIGINT');
  await new Promise((resolve) => perf.once('exit', resolve));
  const count = (event) => Number(text.split('\n').find((l) => l.includes(event))?.split(',')[0]);
  const each = (event, digits) => (count(event) / r.requests).toFixed(digits);
  console.log(`${target.name} ${pathname}: ${each('raw_syscalls:sys_enter', 2)} system calls and ${each('context-switches', 3)} context switches a request (${r.requests} requests)`);
}

function gatewayConfig(port, storage, upstreamUrl, secret) {
  return {
    ...baseConfig(port, storage),
    // Stopped at once: a profile (--cpu-prof) is written on exit, which a drain would delay past stopProcess's patience.
    server: { host: '127.0.0.1', port, shutdownDelay: '0s' },
    auth: { jwt: { algorithm: 'HS256', secret }, accessTokenTtl: '6h', rateLimit: { max: 0 } },
    admin: { port: 0 },
    upstreams: { echo: { url: upstreamUrl, timeout: '30s' } },
    routes: [{ path: '/public', upstream: 'echo', auth: 'none' }, { path: '/bearer', upstream: 'echo', auth: 'required' }],
  };
}

async function main() {
  const { cleanups, cleanup } = createCleanups();
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'gw-profile-'));
  cleanups.push(async () => (env.PROFILE_KEEP ? console.log(`kept ${tmp}`) : rmSync(tmp, { recursive: true, force: true })));
  try {
    const storage = await prepareStorage(tmp, cleanups, 'profile');
    const upstream = await startChild(RUN, 'upstream', [], cleanups);
    const { pro } = await seed(storage, { tag: 'profile', password: PASSWORD, users: 4, free: async () => [] });
    const secret = randomBytes(48).toString('base64url');
    const gc = env.PROFILE_GC === '1';
    const gateway = await startGateway(ROOT, 'gateway', tmp, gatewayConfig(await freePort(), storage, upstream.url, secret), cleanups, gc);
    // PROFILE_BASE_ROOT: one checkout (`before`), or name=root pairs separated by commas.
    const others = {};
    for (const [i, entry] of split(env.PROFILE_BASE_ROOT?.replaceAll(',', ' ')).entries()) {
      const [name, root] = entry.includes('=') ? entry.split('=') : [i ? `before${i + 1}` : 'before', entry];
      others[name] = await startGateway(root, name, tmp, gatewayConfig(await freePort(), storage, upstream.url, secret), cleanups, gc);
    }
    const leastArgs = split(env.PROFILE_LEAST_ARGS);
    const least = { public: await startContractLeast('least', upstream.url, 'public', cleanups, leastArgs), bearer: await startContractLeast('least-auth', upstream.url, 'auth', cleanups, leastArgs) };
    // PROFILE_LEAST_IN_FASTIFY=1: the same least inside fastify (least-in-fastify.mjs), what fastify costs a relay.
    const inFastify = env.PROFILE_LEAST_IN_FASTIFY === '1' && {
      public: await startLeastInFastify('fastify', upstream.url, 'public', cleanups, leastArgs),
      bearer: await startLeastInFastify('fastify-auth', upstream.url, 'auth', cleanups, leastArgs),
    };
    const held = storage.postgres && storage.redis ? storage : undefined;
    const holding = held && {
      public: await startContractLeast('holding', upstream.url, 'public', cleanups, [], held),
      bearer: await startContractLeast('holding-auth', upstream.url, 'auth', cleanups, [], held),
    };
    // One at a time: ten argon2 checks at once outlast the client's 30 s on a busy machine.
    const users = [];
    for (const u of pro) users.push(await login(gateway.url, u));
    const headers = { public: [{}], bearer: users.map((u) => ({ authorization: `Bearer ${u.access}` })) };
    const loaderChild = fork(SELF, ['--role', 'loader'], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    cleanups.push(() => stopProcess(loaderChild));
    await new Promise((resolve) => loaderChild.once('message', resolve));
    for (const t of [gateway, ...Object.values(others), least.public, least.bearer, holding?.public, holding?.bearer, inFastify?.public, inFastify?.bearer]) if (t) pin(t.pid, '0');
    for (const pid of [loaderChild.pid, upstream.pid, process.pid]) pin(pid, '1');
    for (const route of ['public', 'bearer'].filter((r) => ONLY.has(r))) {
      await profileRoute(route, { gateway, ...others, least: least[route], holding: holding?.[route], fastify: inFastify?.[route] }, loaderChild, headers[route], tmp, gc);
    }
  } finally {
    await cleanup();
  }
}

/** least-in-fastify.mjs as a child, started as the reference is (common.mjs), once it listens. */
async function startLeastInFastify(name, upstreamUrl, contract, cleanups, execArgv) {
  const port = await freePort();
  const script = path.join(path.dirname(SELF), 'least-in-fastify.mjs');
  const child = spawn(process.execPath, [...NODE_FLAGS, ...execArgv, script], { stdio: ['ignore', 'inherit', 'inherit'], ...contractLeastOptions(port, upstreamUrl, contract) });
  cleanups.push(() => stopProcess(child));
  return listeningOn(child, name, port);
}

async function profileRoute(route, targets, loader, headerSets, tmp, gc) {
  const list = Object.entries(targets).filter(([, t]) => t);
  const pathname = `/${route}`;
  for (const [, t] of list) await round(loader, t, pathname, headerSets, false); // warm-up
  // PROFILE_PERF=all records the two leasts as well, to compare entry by entry.
  if (env.PROFILE_PERF === '1' || env.PROFILE_PERF === 'all') {
    for (const [, t] of list.filter(([k]) => env.PROFILE_PERF === 'all' || (k !== 'least' && k !== 'holding'))) await perfRound(loader, t, pathname, headerSets, tmp);
  }
  if (env.PROFILE_SYSCALLS === '1') for (const [, t] of list) await syscallRound(loader, t, pathname, headerSets);
  const runs = Object.fromEntries(list.map(([k]) => [k, []]));
  for (let i = 0; i < ROUNDS; i++) {
    const order = i % 2 ? [...list].reverse() : list;
    for (const [k, t] of order) runs[k].push(await round(loader, t, pathname, headerSets, gc && k !== 'least' && k !== 'holding'));
  }
  console.log(`\n## ${pathname}: ${ROUNDS} rounds of ${SECONDS} s, ${CONNECTIONS} connections\n`);
  console.log('| target | req/s (median) | ÷ least | ÷ least holding | p99 ms | p99 ÷ least\'s | CPU µs/req | CPU ÷ least\'s | GC bytes/req | rounds (req/s) |');
  console.log('|---|---:|---:|---:|---:|---:|---:|---:|---:|---|');
  const paired = (a, b, f) => median(a.map((x, i) => f(x, b[i])));
  for (const [k, rs] of Object.entries(runs)) {
    const vs = (base) => (runs[base] ? paired(rs, runs[base], (x, y) => x.rps / y.rps).toFixed(2) : '-');
    const bad = rs.reduce((n, r) => n + r.unexpected, 0);
    const gcb = rs[0].gcBytes === undefined ? '-' : Math.round(median(rs.map((r) => r.gcBytes))).toLocaleString('en');
    console.log(`| ${k}${bad ? ` (${bad} unexpected!)` : ''} | ${Math.round(median(rs.map((r) => r.rps)))} | ${vs('least')} | ${vs('holding')} | ${median(rs.map((r) => r.p99)).toFixed(1)} | `
      + `${paired(rs, runs.least, (x, y) => x.p99 / y.p99).toFixed(2)} | ${Math.round(median(rs.map((r) => r.cpuUs)))} | `
      + `${paired(rs, runs.least, (x, y) => y.cpuUs / x.cpuUs).toFixed(2)} | ${gcb} | ${rs.map((r) => Math.round(r.rps)).join(' / ')} |`);
  }
}

if (process.argv[2] === '--role' && process.argv[3] === 'loader') await runLoader();
else await main();

#!/usr/bin/env node
// npm run instructions: what one proxied request costs in CPU instructions, the gateway against the
// Node floor, counted by valgrind's callgrind. npm run bench's req/s and CPU µs move with whatever
// else the machine does; an instruction count does not, so a change that saves 2 % shows as 2 %
// here, and the report names the functions the difference is spent in (docs/benchmark.md,
// "Instructions a request").
//
// Each target runs under callgrind with V8's --single-threaded and --perf-basic-prof, besides the
// flags every bench process gets: compiles then run on the measured thread, and would be counted
// if the warm-up did not outlast them, and JIT code is named from V8's /tmp/perf-<pid>.map. One
// keep-alive connection sends INSTR_WARMUP requests (60,000: after 15,000 TurboFan still took 40 %
// of the window), then INSTR_REQUESTS (5,000) are counted. Targets, each a process of its own: a
// gateway sent only /public (auth: none), one sent only /bearer, and for each of them the Node
// floor and the floor doing the least the contract asks of such a request (the ceiling of the
// gateway's ratio), both the shared reference (bench/common.mjs CONTRACT_LEAST), sent the same requests; each ratio is to the floor sent the
// same requests. The compilers' and the garbage collector's shares of each window are reported
// apart and the ratios are taken without them: a major collection falls in one window and not the
// next, and would move a ratio by 20 % by itself. INSTR_TOP (25): how many functions each
// comparison lists.
// INSTR_ONLY (floor,public,bearer: all three) counts only those: `public,bearer` measures a change
// to the gateway in a third of the time (the floor's counts do not move with the gateway's code),
// and prints the totals without the floor's ratios. `storage`, not in the default: the contract's
// least again, public and authenticated, in a process that also holds a Postgres and a Redis
// connection as every gateway does (bench/least-with-storage.mjs; context, not a target);
// `floor,storage` compares the two.
// INSTR_KEEP=1 keeps the callgrind files (callgrind_annotate, kcachegrind) and V8's perf maps that
// name their JIT code, and names their folder.
// Needs valgrind (Debian package valgrind); Postgres and Redis when they answer, as npm run bench.
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  baseConfig, CONTRACT_LEAST_SOURCE, contractLeastOptions, contractLeastScript, createCleanups, freePort, httpClient, listeningOn, NODE_FLAGS, positive, prepareStorage, ROOT, seed, startChild,
  stopProcess, waitForGateway, writeConfig,
} from './common.mjs';

const RUN = path.join(path.dirname(fileURLToPath(import.meta.url)), 'run.mjs');
const env = process.env;
const WARMUP = Math.round(positive(env.INSTR_WARMUP, 60_000));
const REQUESTS = Math.round(positive(env.INSTR_REQUESTS, 5_000));
const TOP = Math.round(positive(env.INSTR_TOP, 25));
const ONLY = new Set((env.INSTR_ONLY ?? 'floor,public,bearer').split(',').map((s) => s.trim()));
const PASSWORD = 'instructions-password-0123';
// Above this share of a window, V8 was still compiling what the window measures.
const COMPILER_SHARE_LIMIT = 0.02;
const COMPILER = /compiler::|maglev::|turboshaft::/i;
const GARBAGE_COLLECTOR = /Heap::|heap::|Scaveng|MarkCompact|Marking|Sweeper|Evacuat|RememberedSet|RecordMigratedSlot|LiveObjectVisitor|RootVisitor|RootScavenge|IterateObjectCache|GCTracer/;

function hasValgrind() {
  try {
    execFileSync('valgrind', ['--version'], { stdio: 'ignore' });
    execFileSync('callgrind_control', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** `node ...args` under callgrind, instrumentation off until switched on; dumps go to `${out}.1`, `${out}.2`… */
function underCallgrind(out, args, cleanups, options = {}) {
  const child = spawn('valgrind', ['-q', '--tool=callgrind', '--instr-atstart=no', `--callgrind-out-file=${out}`, process.execPath, ...NODE_FLAGS, '--single-threaded', '--perf-basic-prof', ...args], {
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    ...options,
  });
  cleanups.push(async () => {
    await stopProcess(child);
    // Kept beside the dumps with INSTR_KEEP=1: they name the JIT code in callgrind_annotate's output.
    const map = `/tmp/perf-${child.pid}.map`;
    if (env.INSTR_KEEP === '1' && existsSync(map)) copyFileSync(map, path.join(path.dirname(out), path.basename(map)));
    rmSync(map, { force: true });
  });
  return child;
}

// One keep-alive connection for everything sent to the targets.
const { send: request, login } = httpClient({ maxSockets: 1 });
// Under valgrind a gateway takes tens of seconds to start, and minutes on a machine shared with
// other work (INSTR_START_TIMEOUT, seconds: 900; the reference is given as long).
const START_TIMEOUT_MS = positive(env.INSTR_START_TIMEOUT, 900) * 1000;

async function send(url, pathname, headers, times) {
  for (let i = 0; i < times; i++) {
    const { status } = await request(url, 'GET', pathname, { headers });
    if (status !== 200) throw new Error(`${pathname} answered ${status}`);
  }
}

/**
 * Sends WARMUP requests of `pathname` to `child` (under callgrind, writing to `out`), counts the
 * next REQUESTS in one window, stops it and reads its profile.
 */
async function countAfterWarmup(child, out, url, pathname, headers) {
  const pid = String(child.pid);
  await send(url, pathname, headers, WARMUP);
  execFileSync('callgrind_control', ['-i', 'on', pid], { stdio: 'ignore' });
  await send(url, pathname, headers, REQUESTS);
  execFileSync('callgrind_control', ['-d', pid], { stdio: 'ignore' });
  execFileSync('callgrind_control', ['-i', 'off', pid], { stdio: 'ignore' });
  await stopProcess(child);
  return profile(`${out}.1`);
}

// ── reading a dump ─────────────────────────────────────────────────────────────────────────
/** JIT code ranges of the process that wrote `dump`, from V8's perf map: the entry written last wins. */
function jitNames(dump) {
  const pid = /^pid: (\d+)$/m.exec(readFileSync(dump, 'utf8').slice(0, 4000))?.[1];
  const file = `/tmp/perf-${pid}.map`;
  const entries = existsSync(file)
    ? readFileSync(file, 'utf8').split('\n').filter(Boolean).map((line, order) => {
      const [start, size, ...name] = line.split(' ');
      return { start: parseInt(start, 16), end: parseInt(start, 16) + parseInt(size, 16), name: name.join(' '), order };
    })
    : [];
  return (address) => {
    let found;
    for (const e of entries) if (e.start <= address && address < e.end && (!found || e.order > found.order)) found = e;
    return found?.name ?? `0x${address.toString(16)}`;
  };
}

/** Instructions a request by function (own instructions, not callees'; the compilers' and collector's apart), and the window's totals. */
function profile(dump) {
  const text = execFileSync('callgrind_annotate', ['--threshold=100', dump], { maxBuffer: 512 * 1024 * 1024, encoding: 'utf8' });
  const nameOf = jitNames(dump);
  const byFunction = new Map();
  let compiler = 0;
  let collector = 0;
  for (const line of text.split('\n')) {
    const m = /^\s*([\d,]+) \(\s*[\d.]+%\)\s+(.*)$/.exec(line);
    if (!m || m[2].includes('PROGRAM TOTALS')) continue;
    const count = Number(m[1].replaceAll(',', '')) / REQUESTS;
    const jit = /^\?\?\?:0x([0-9a-f]+) \[\?\?\?\]$/.exec(m[2]);
    const name = jit ? nameOf(parseInt(jit[1], 16)) : m[2].replace(/ \[[^\]]*\]$/, '').replace(/^\?\?\?:/, '');
    if (COMPILER.test(name)) compiler += count;
    else if (GARBAGE_COLLECTOR.test(name)) collector += count;
    else byFunction.set(name, (byFunction.get(name) ?? 0) + count);
  }
  const work = [...byFunction.values()].reduce((a, b) => a + b, 0);
  return { byFunction, work, compiler, collector, total: work + compiler + collector };
}

function grewMost(from, to) {
  const names = new Set([...from.byFunction.keys(), ...to.byFunction.keys()]);
  return [...names]
    .map((name) => ({ name, delta: (to.byFunction.get(name) ?? 0) - (from.byFunction.get(name) ?? 0) }))
    .sort((a, b) => b.delta - a.delta)
    .slice(0, TOP);
}

const int = (n) => Math.round(n).toLocaleString('en');

// ── the targets ────────────────────────────────────────────────────────────────────────────
/**
 * The shared reference (bench/common.mjs CONTRACT_LEAST) with CONTRACT `contract`: '' the Node
 * floor, 'public' or 'auth' the floor doing the least the contract asks; sent `pathname` with `headers`.
 */
async function measureFloor(tmp, upstreamUrl, cleanups, contract = '', pathname = '/public', headers = {}, storage = undefined) {
  const name = `floor${contract && `-${contract}`}${pathname.replace('/', '-')}${storage ? '-storage' : ''}`;
  const out = path.join(tmp, `${name}.out`);
  const port = await freePort();
  const floor = underCallgrind(out, [contractLeastScript(storage)], cleanups, contractLeastOptions(port, upstreamUrl, contract, storage));
  const { url } = await listeningOn(floor, name, port, START_TIMEOUT_MS);
  return countAfterWarmup(floor, out, url, pathname, headers);
}

/**
 * A gateway of its own for each route, sent that route alone, as the floor is: with two routes
 * in turn, V8 was still optimizing code for both after 60,000 requests of each. Its profile, and
 * the headers `credentials` gave (sent with every request).
 */
async function measureGateway(tmp, route, storage, upstreamUrl, secret, credentials, cleanups) {
  const port = await freePort();
  const configFile = path.join(tmp, `gateway-${route}.json`);
  writeConfig(configFile, {
    ...baseConfig(port, storage),
    // The token outlives the warm-up (60,000 requests under valgrind can take more than the default 15 minutes).
    auth: { jwt: { algorithm: 'HS256', secret }, accessTokenTtl: '6h', rateLimit: { max: 0 } },
    // Any free port: two counts can run side by side (INSTR_ONLY=public in one checkout, bearer in another).
    admin: { port: 0 },
    upstreams: { echo: { url: upstreamUrl, timeout: '30s' } },
    routes: [
      { path: '/public', upstream: 'echo', auth: 'none' },
      { path: '/bearer', upstream: 'echo', auth: 'required' },
    ],
  });
  const out = path.join(tmp, `gateway-${route}.out`);
  const gateway = underCallgrind(out, [path.join(ROOT, 'dist/cli.js'), 'start', '--config', configFile], cleanups, {
    env: { PATH: env.PATH, HOME: env.HOME, NODE_ENV: 'production', LOG_LEVEL: 'warn' },
  });
  const url = `http://127.0.0.1:${port}`;
  if (!(await waitForGateway(request, gateway, url, '/public', START_TIMEOUT_MS))) throw new Error(`the gateway under valgrind never answered ${url}/public`);
  const headers = await credentials(url);
  return { profile: await countAfterWarmup(gateway, out, url, `/${route}`, headers), headers };
}

// ── main ───────────────────────────────────────────────────────────────────────────────────
async function main() {
  console.log(CONTRACT_LEAST_SOURCE);
  if (!hasValgrind()) {
    console.log('valgrind is not installed (Debian package valgrind): nothing counted.');
    return;
  }
  if (!existsSync(path.join(ROOT, 'dist/cli.js'))) throw new Error('dist/cli.js is missing: npm run build first');
  const { cleanups, cleanup } = createCleanups();
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'gw-instructions-'));
  if (env.INSTR_KEEP !== '1') cleanups.push(async () => rmSync(tmp, { recursive: true, force: true }));
  try {
    const storage = await prepareStorage(tmp, cleanups, 'instr');
    const upstream = await startChild(RUN, 'upstream', [], cleanups);
    const { pro: [user] } = await seed(storage, { tag: 'instr', password: PASSWORD, users: 1, free: async () => [] });
    console.log(`Storage: ${storage.label}. ${int(WARMUP)} requests of warm-up, then ${int(REQUESTS)} counted, on one keep-alive connection.\n`);

    const floorProfile = ONLY.has('floor') ? await measureFloor(tmp, upstream.url, cleanups) : undefined;
    const contractProfile = ONLY.has('floor') ? await measureFloor(tmp, upstream.url, cleanups, 'public') : undefined;
    const secret = randomBytes(48).toString('base64url');
    const publicProfile = ONLY.has('public') ? (await measureGateway(tmp, 'public', storage, upstream.url, secret, async () => ({}), cleanups)).profile : undefined;
    const bearerCredentials = async (url) => {
      const { access } = await login(url, user);
      return { authorization: `Bearer ${access}` };
    };
    const { profile: bearerProfile, headers: bearer } = ONLY.has('bearer') ? await measureGateway(tmp, 'bearer', storage, upstream.url, secret, bearerCredentials, cleanups) : {};
    // The gateway's /bearer requests, Authorization and all, as npm run bench sends both sides: the token is not read.
    const bearerHeaders = bearer ?? { authorization: `Bearer ${'x'.repeat(250)}` };
    const floorBearerProfile = ONLY.has('floor') ? await measureFloor(tmp, upstream.url, cleanups, '', '/bearer', bearerHeaders) : undefined;
    const contractAuthenticatedProfile = ONLY.has('floor') ? await measureFloor(tmp, upstream.url, cleanups, 'auth', '/bearer', bearerHeaders) : undefined;
    // Context, not a target: the same reference holding a Postgres and a Redis connection (needs both servers).
    const withStorage = ONLY.has('storage') && storage.postgres && storage.redis;
    if (ONLY.has('storage') && !withStorage) console.log('INSTR_ONLY=storage needs Postgres and Redis: the least with storage is not counted.');
    const storagePublicProfile = withStorage ? await measureFloor(tmp, upstream.url, cleanups, 'public', '/public', {}, storage) : undefined;
    const storageAuthenticatedProfile = withStorage ? await measureFloor(tmp, upstream.url, cleanups, 'auth', '/bearer', bearerHeaders, storage) : undefined;
    // Each row against the floor sent the same requests.
    const rows = [
      ['Node floor, /public', floorProfile, floorProfile],
      ['the contract\'s least, public: the floor + forwarding headers and request id', contractProfile, floorProfile],
      ['gateway, /public (auth: none)', publicProfile, floorProfile],
      ['Node floor, /bearer (its token not read)', floorBearerProfile, floorBearerProfile],
      ['the contract\'s least, authenticated: also identity headers', contractAuthenticatedProfile, floorBearerProfile],
      ['gateway, /bearer', bearerProfile, floorBearerProfile],
      ['the contract\'s least, public, holding a Postgres and a Redis connection (not a target)', storagePublicProfile, floorProfile],
      ['the contract\'s least, authenticated, holding a Postgres and a Redis connection (not a target)', storageAuthenticatedProfile, floorBearerProfile],
    ].filter(([, p]) => p);
    console.log('| target | instructions a request | without compilers and collector | floor ÷ target, without | compilers | collector |');
    console.log('|---|---:|---:|---:|---:|---:|');
    for (const [name, p, floor] of rows) {
      console.log(`| ${name} | ${int(p.total)} | ${int(p.work)} | ${floor ? (floor.work / p.work).toFixed(2) : '–'} | ${int(p.compiler)} | ${int(p.collector)} |`);
    }
    const compiling = rows.map(([, p]) => p).some((p) => p.compiler > COMPILER_SHARE_LIMIT * p.total);
    if (compiling) {
      console.log(`\nV8 was still compiling in a window (over ${100 * COMPILER_SHARE_LIMIT} % of it). The ratios leave compiles out, but code that\n`
        + 'was not optimized yet may still weigh in the lists below: a larger INSTR_WARMUP tells.');
    }
    const comparisons = [
      ['the Node floor to the gateway\'s /public', floorProfile, publicProfile],
      ['the contract\'s least (public) to the gateway\'s /public', contractProfile, publicProfile],
      ['the gateway\'s /public to its /bearer', publicProfile, bearerProfile],
      ['the contract\'s least (authenticated) to the gateway\'s /bearer', contractAuthenticatedProfile, bearerProfile],
      ['the contract\'s least (public) to the same holding Postgres and Redis connections', contractProfile, storagePublicProfile],
      ['the contract\'s least (public) holding Postgres and Redis connections to the gateway\'s /public', storagePublicProfile, publicProfile],
      ['the contract\'s least (authenticated) holding Postgres and Redis connections to the gateway\'s /bearer', storageAuthenticatedProfile, bearerProfile],
    ];
    for (const [title, from, to] of comparisons.filter(([, from, to]) => from && to)) {
      console.log(`\nOwn instructions a request that grew the most, from ${title} (${int(to.work - from.work)} in all, without compilers and collector):`);
      for (const { name, delta } of grewMost(from, to)) console.log(`${int(delta).padStart(8)}  ${name}`);
    }
    if (env.INSTR_KEEP === '1') console.log(`\nCallgrind files kept in ${tmp}.`);
  } finally {
    await cleanup();
  }
}

await main();

// What bench/run.mjs (npm run bench) and bench/soak.mjs (npm run soak) share: the run's own
// storage (a Postgres database and Redis key prefix, or embedded PGlite), seeded users, the echo
// upstream, the built gateway's process, cleanups and a small HTTP client.
import { fork, spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const env = process.env;

/** A positive number from the environment, or the fallback. */
export function positive(text, fallback) {
  const n = Number(text);
  return text && Number.isFinite(n) && n > 0 ? n : fallback;
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Processes of a moment (a load generator's round), not in any cleanup list: killed on an interruption, forgotten once they exit. */
const passing = new Set();

/** `child`, killed if the run is interrupted while it runs. */
export function passingChild(child) {
  passing.add(child);
  child.once('exit', () => passing.delete(child));
  return child;
}

/**
 * Steps to undo, run last first; also on SIGINT and SIGTERM, after which the run exits non-zero
 * (130, 143): an interrupted bench leaves no gateway, upstream or proxy listening. `cleanup` may
 * be called more than once: the steps run once.
 */
export function createCleanups() {
  const cleanups = [];
  const cleanup = async () => {
    // Steps pushed while it runs (a child started by the run's own continuation) are taken too.
    while (cleanups.length) {
      const steps = cleanups.splice(0).reverse();
      for (const step of steps) await step().catch((err) => console.error(`cleanup: ${err.message}`));
    }
  };
  let interrupted = false;
  const interrupt = (signal) => {
    // A second Ctrl-C while cleaning up must not end the run before its children (the handler stays).
    if (interrupted) return;
    interrupted = true;
    console.error(`\ninterrupted (${signal}): stopping what this run started`);
    for (const child of passing) child.kill('SIGTERM');
    void cleanup().finally(() => process.exit(signal === 'SIGINT' ? 130 : 143));
  };
  process.on('SIGINT', interrupt);
  process.on('SIGTERM', interrupt);
  return { cleanups, cleanup };
}

// ── child: the upstream ─────────────────────────────────────────────────────────────────────
/** Answers each request with the JSON of describe(req), and tells the parent its port. */
export async function runUpstream(describe) {
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const body = JSON.stringify(describe(req));
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
      res.end(body);
    });
  });
  // Outlive the proxies' idle connections, so no round pays for reconnecting.
  server.keepAliveTimeout = 120_000;
  server.headersTimeout = 121_000;
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  process.send({ port: server.address().port });
  process.on('disconnect', () => process.exit(0));
  process.on('SIGTERM', () => process.exit(0));
}

// ── child: the floor that relays upgrades ──────────────────────────────────────────────────
// The Node floor of the memory rows (bench/memory.mjs), where the contract's least (below) cannot
// stand in: it has no upgrade handler, and it closes an idle connection after Node's default 5 s,
// sooner than the rows hold theirs. node:http in, undici's dispatcher out (the gateway's own relay
// path, src/proxy/relay.ts), headers passed through, no logic; a WebSocket's upgrade relayed as
// bytes piped both ways. `pool`: the undici Pool options, the gateway's own
// (src/proxy/forwarder.ts UPSTREAM_POOL).
export async function runUpgradeFloor(upstream, pool) {
  const { Pool } = await import('undici');
  const upstreamPool = new Pool(upstream, pool);
  const server = http.createServer((req, res) => {
    const headers = { ...req.headers };
    delete headers.connection;
    delete headers['keep-alive'];
    upstreamPool.dispatch({ path: req.url, method: req.method, headers, body: req.method === 'GET' || req.method === 'HEAD' ? null : req }, {
      onRequestStart() {},
      onResponseStart(_controller, status, upstreamHeaders) {
        delete upstreamHeaders.connection;
        delete upstreamHeaders['keep-alive'];
        res.writeHead(status, upstreamHeaders);
      },
      onResponseData(_controller, chunk) { res.write(chunk); },
      onResponseEnd() { res.end(); },
      onResponseError() { if (!res.headersSent) res.writeHead(502); res.end(); },
    });
  });
  server.keepAliveTimeout = 65_000;
  // A WebSocket's upgrade, the least a Node proxy does with one: its request line and headers
  // written to the upstream as they came, then the bytes piped both ways.
  const { hostname, port } = new URL(upstream);
  server.on('upgrade', (req, socket, head) => {
    const to = net.connect(Number(port), hostname, () => {
      let lines = `${req.method} ${req.url} HTTP/1.1\r\n`;
      for (let i = 0; i < req.rawHeaders.length; i += 2) lines += `${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}\r\n`;
      to.write(`${lines}\r\n`);
      if (head.length) to.write(head);
      socket.pipe(to).pipe(socket);
    });
    const end = () => { socket.destroy(); to.destroy(); };
    to.on('error', end);
    socket.on('error', end);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  process.send({ port: server.address().port });
  const stop = () => { server.close(); upstreamPool.close().finally(() => process.exit(0)); };
  process.on('disconnect', stop);
  process.on('SIGTERM', stop);
}

// ── the Node floor and the contract's least: the shared reference ─────────────────────────────
// The ceiling the speed targets are measured against (../shared/bench/README.md): one script, its
// CONTRACT unset (the Node floor), 'public' or 'auth' (the contract's least). The shared copy
// beside the project when there is one, else the copy vendored here, for a clone of the project
// alone (CI); test/bench/contractLeast.test.ts keeps the two identical.
const SHARED_CONTRACT_LEAST = path.resolve(ROOT, '../shared/bench/contract-least.mjs');
export const CONTRACT_LEAST = existsSync(SHARED_CONTRACT_LEAST) ? SHARED_CONTRACT_LEAST : path.join(ROOT, 'bench/contract-least.mjs');
/** Which copy of the reference this run measures against, for a report's first lines. */
export const CONTRACT_LEAST_SOURCE = CONTRACT_LEAST === SHARED_CONTRACT_LEAST
  ? `The Node floor and the contract's least: ../shared/bench/contract-least.mjs, the shared reference.`
  : `The Node floor and the contract's least: bench/contract-least.mjs, the vendored copy (no ../shared/bench/contract-least.mjs here).`;

/**
 * Not a target: the reference run by bench/least-with-storage.mjs, in a process that also holds a
 * Postgres and a Redis connection (`storage`, prepareStorage's), as every gateway process does.
 */
const LEAST_WITH_STORAGE = path.join(ROOT, 'bench/least-with-storage.mjs');

/** The script to run for the reference: itself, or it holding `storage`'s connections. */
export function contractLeastScript(storage) {
  return storage ? LEAST_WITH_STORAGE : CONTRACT_LEAST;
}

/**
 * The reference's spawn options: run from the project root (it loads undici from there), told its
 * port, upstream and `contract` ('' for the Node floor, 'public' or 'auth'), nothing else; and with
 * `storage`, where least-with-storage.mjs finds the reference and its connections.
 */
export function contractLeastOptions(port, upstream, contract, storage) {
  const held = storage ? { LEAST_REFERENCE: CONTRACT_LEAST, STORAGE_POSTGRES: storage.postgres, STORAGE_REDIS: storage.redis } : {};
  return { cwd: ROOT, env: { PATH: env.PATH, HOME: env.HOME, NODE_ENV: 'production', PORT: String(port), UPSTREAM: upstream, ...(contract ? { CONTRACT: contract } : {}), ...held } };
}

/** The reference (above) as a child process with the gateway's V8 flags and `execArgv`, once it listens; with `storage`, holding its connections. */
export async function startContractLeast(name, upstream, contract, cleanups, execArgv = [], storage = undefined) {
  const port = await freePort();
  const options = contractLeastOptions(port, upstream, contract, storage);
  const child = spawn(process.execPath, [...NODE_FLAGS, ...execArgv, contractLeastScript(storage)], { stdio: ['ignore', 'inherit', 'inherit'], ...options });
  cleanups.push(() => stopProcess(child));
  return listeningOn(child, name, port);
}

// ── storage: a database and Redis prefix of the run's own, or embedded ─────────────────────
/** `tag` names the database and key prefix (gw_<tag>_<random>), so leftovers say whose they are. */
export async function prepareStorage(tmp, cleanups, tag) {
  const { default: pg } = await import('pg');
  const { Redis } = await import('ioredis');
  const suffix = randomBytes(5).toString('hex');
  const baseUrl = env.DATABASE_URL ?? 'postgres://root@127.0.0.1:5432/test';
  const redisUrl = env.REDIS_URL ?? 'redis://127.0.0.1:6379';
  const storage = { postgres: '', embeddedDir: path.join(tmp, 'data'), redis: '', redisKeyPrefix: `gw_${tag}_${suffix}:`, label: '' };

  const admin = new pg.Client({ connectionString: baseUrl, connectionTimeoutMillis: 3000 });
  try {
    await admin.connect();
    const dbName = `gw_${tag}_${suffix}`;
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
  redis.on('error', () => {}); // a refused connection is reported below, once
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
  const postgres = storage.postgres ? `Postgres (database ${new URL(storage.postgres).pathname.slice(1)})` : 'embedded PGlite';
  storage.label = `${postgres}, ${storage.redis ? `Redis (prefix ${storage.redisKeyPrefix})` : 'no Redis'}`;
  return storage;
}

/**
 * Users made directly in the database before the gateway starts (so this works on embedded
 * PGlite too, which only one process may open): `users` pro users with an API key each, and for
 * each i the free users `free(make, i, db)` makes. Every user is { email, password, id }.
 */
/** The scope the seeded scoped keys hold, and a bench route may ask for. */
export const SCOPE = 'reports:read';

export async function seed(storage, { tag, password, users, free }) {
  const { openDatabase } = await import(path.join(ROOT, 'dist/storage/database/db.js'));
  const { migrate } = await import(path.join(ROOT, 'dist/storage/database/migrations.js'));
  const { createUser, setPlan } = await import(path.join(ROOT, 'dist/storage/accounts/users.js'));
  const { Passwords } = await import(path.join(ROOT, 'dist/auth/password/passwords.js'));
  const { newApiKey } = await import(path.join(ROOT, 'dist/keys/index.js'));
  const passwords = new Passwords();
  const db = await openDatabase(storage);
  try {
    await migrate(db);
    const hash = await passwords.hash(password);
    passwords.close();
    const make = async (group, i) => {
      const email = `${tag}-${group}-${i}-${randomBytes(4).toString('hex')}@example.test`;
      return { email, password, id: await createUser(db, email, hash) };
    };
    const pro = [];
    const freeUsers = [];
    for (let i = 0; i < users; i++) {
      const u = await make('pro', i);
      await setPlan(db, u.id, 'pro');
      u.apiKey = `${tag}_${randomBytes(24).toString('base64url')}`;
      await db.query('INSERT INTO api_tokens (user_id, token_hash) VALUES ($1, $2)', [u.id, createHash('sha256').update(u.apiKey).digest('hex')]);
      // CONTRACT §21: a named key of the current format with a scope (SCOPE, which a bench route
      // asks for), and the same key with its checksum broken, which the gateway refuses unread.
      const scoped = newApiKey();
      u.scopedKey = scoped.key;
      u.forgedKey = scoped.key.slice(0, -1) + (scoped.key.endsWith('0') ? '1' : '0');
      await db.query('INSERT INTO api_tokens (user_id, token_hash, name, start, scopes) VALUES ($1, $2, $3, $4, $5)',
        [u.id, createHash('sha256').update(scoped.key).digest('hex'), 'bench', scoped.start, [SCOPE]]);
      pro.push(u);
      freeUsers.push(...await free(make, i, db));
    }
    return { pro, free: freeUsers };
  } finally {
    await db.close();
  }
}

// How `npm start`, the Dockerfile and the bin run the gateway (docs/operating.md): measured as
// deployed, and every other Node process of the bench launched alike.
export const NODE_FLAGS = ['--max-semi-space-size=32'];

// ── processes ───────────────────────────────────────────────────────────────────────────────
/**
 * Forks `script --role name ...args`, which sends its port once it listens. With the gateway's V8
 * flags: a baseline launched otherwise would move a ratio by itself (a GC setting alone, 30 %).
 */
export function startChild(script, name, args, cleanups, execArgv = []) {
  const child = fork(script, ['--role', name, ...args], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], execArgv: [...NODE_FLAGS, ...execArgv] });
  cleanups.push(() => stopProcess(child));
  return listening(child, name);
}

/** `child` (a role of these scripts, with an IPC channel) once it tells the port it listens on. */
export function listening(child, name) {
  return new Promise((resolve, reject) => {
    child.once('message', ({ port }) => resolve({ name, pid: child.pid, url: `http://127.0.0.1:${port}`, child }));
    child.once('exit', (code) => reject(new Error(`${name} exited (${code}) before listening`)));
  });
}

/** `child` (a process that tells no port: the reference) once `port` accepts a connection; `timeoutMs` (a minute) at most. */
export async function listeningOn(child, name, port, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  const accepts = () => new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1', () => { socket.destroy(); resolve(true); });
    socket.once('error', () => resolve(false));
  });
  while (!(await accepts())) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`${name} exited (${child.exitCode ?? child.signalCode}) before listening`);
    if (Date.now() > deadline) throw new Error(`${name} did not listen on port ${port} within ${timeoutMs / 1000} s`);
    await sleep(100);
  }
  return { name, pid: child.pid, url: `http://127.0.0.1:${port}`, child };
}

export function stopProcess(child) {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const kill = setTimeout(() => child.kill('SIGKILL'), 15_000);
    child.once('exit', () => { clearTimeout(kill); resolve(); });
    child.kill('SIGTERM');
  });
}

export async function freePort() {
  const server = net.createServer();
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** The generated config's server and storage sections (the storage label is for the report only). */
export function baseConfig(port, storage) {
  const { label: _label, ...storageConfig } = storage;
  return {
    server: { host: '127.0.0.1', port },
    storage: { ...storageConfig, migrate: true },
  };
}

export function writeConfig(file, config) {
  // JSON is YAML: the generated config is written as JSON.
  writeFileSync(file, JSON.stringify(config, null, 2));
}


/** The built CLI (`node dist/cli.js start`) on configFile, with a bare environment of its own. */
export function spawnGateway(configFile, { nodeArgs = [], stdio, logLevel }, cleanups) {
  const child = spawn(process.execPath, [...NODE_FLAGS, ...nodeArgs, path.join(ROOT, 'dist/cli.js'), 'start', '--config', configFile], {
    stdio,
    env: { PATH: env.PATH, HOME: env.HOME, NODE_ENV: 'production', LOG_LEVEL: logLevel },
  });
  cleanups.push(() => stopProcess(child));
  return child;
}

/** Polls GET url+pathname for a 200 for up to `timeoutMs` (a minute); false when the process exits or time runs out. */
export async function waitForGateway(send, child, url, pathname, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) break;
    const res = await send(url, 'GET', pathname).catch(() => null);
    if (res?.status === 200) return true;
    await sleep(200);
  }
  return false;
}

// ── HTTP helpers ────────────────────────────────────────────────────────────────────────────
/**
 * `send` (one request, JSON in and out, with its time in ms) and `login` over one keep-alive agent
 * (one per scheme: the bench's HTTPS targets use a self-signed certificate, not checked here).
 */
export function httpClient({ maxSockets }) {
  const agent = new http.Agent({ keepAlive: true, maxSockets });
  const tlsAgent = new https.Agent({ keepAlive: true, maxSockets, rejectUnauthorized: false });

  function send(baseUrl, method, pathname, { headers = {}, json } = {}) {
    const { hostname, port, protocol } = new URL(baseUrl);
    const secure = protocol === 'https:';
    const body = json === undefined ? undefined : JSON.stringify(json);
    const allHeaders = body ? { ...headers, 'content-type': 'application/json' } : headers;
    return new Promise((resolve, reject) => {
      const started = performance.now();
      const req = (secure ? https : http).request({ host: hostname, port, method, path: pathname, headers: allHeaders, agent: secure ? tlsAgent : agent, timeout: 30_000 }, (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let parsed;
          try { parsed = JSON.parse(text); } catch { parsed = undefined; }
          resolve({ status: res.statusCode, json: parsed, text, ms: performance.now() - started });
        });
        res.on('error', reject);
      });
      req.on('timeout', () => req.destroy(new Error(`${method} ${pathname}: timed out`)));
      req.on('error', reject);
      req.end(body);
    });
  }

  /** The user with its tokens: `access` and `refresh`. */
  async function login(url, user) {
    const res = await send(url, 'POST', '/api/v1/auth/login', { json: { email: user.email, password: user.password } });
    if (res.status !== 200) throw new Error(`login of ${user.email} failed: ${res.status} ${res.text}`);
    return { ...user, access: res.json.access_token, refresh: res.json.refresh_token };
  }

  return { send, login };
}

// npm run bench, organizations (CONTRACT §22, issue 52): BENCH_ONLY=org,orgpool (or a full run).
//   org      a request acting for an organization (Gateway-Org) against the same request for the
//            user, on one gateway, route with a plan guard: target within 5 % (ratio ≥ 0.95).
//   orgpool  pooled counting under contention: ORG_MEMBERS (200) members acting for one
//            organization on 3 instances against its 100,000 daily limit, each with an
//            organization key of their own, against one member's personal key counting on their
//            own counter (same limit) on the same 3 instances: target ≥ 0.8 of its counted
//            throughput, and exact at the end (the pool's Postgres count equals the 200s served,
//            once the instances handed back their blocks). Keys, not sign-ins: 200 argon2 logins
//            take minutes on a loaded machine, and a key costs no more to check than a token.
// Its own load generator (keep-alive node:http, CONNECTIONS spread over the instances), on the
// same cores as the gateways: it compresses ratios toward 1 less than it costs the gateways, both
// sides alike. Alternating rounds; the verdict is the median of the paired rounds' ratios.
import { createHash, randomBytes } from 'node:crypto';
import http from 'node:http';
import { closeSync, openSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { baseConfig, freePort, httpClient, positive, ROOT, runUpstream, sleep, spawnGateway, startChild, waitForGateway, writeConfig } from './common.mjs';

const env = process.env;
const SECONDS = positive(env.BENCH_SECONDS, 3);
const ROUNDS = Math.round(positive(env.BENCH_TARGET_ROUNDS, 6));
const CONNECTIONS = Math.round(positive(env.BENCH_CONNECTIONS, 50));
const MEMBERS = Math.round(positive(env.ORG_MEMBERS, 200));
const DAILY = 100_000;
const PASSWORD = 'bench-org-password-0123';

/** The gateways' configuration: organizations on, one plan `team` of DAILY a day for users and the organization alike. */
function orgConfig(port, storage, upstreamUrl) {
  return {
    ...baseConfig(port, storage),
    auth: { jwt: { algorithm: 'HS256', secret: 'bench-orgs-secret-at-least-32-bytes-long!' }, rateLimit: { max: 0 } },
    plans: { limits: { free: { daily: 1 }, team: { daily: DAILY } } },
    apiKeys: { plans: ['team'] },
    admin: { port: 0 },
    organizations: { enabled: true },
    mail: { smtp: '', from: 'Bench <bench@example.test>', resetUrl: 'https://app.example.test/r?token={token}', verifyUrl: 'https://app.example.test/v?token={token}', invitationUrl: 'https://app.example.test/j?token={token}' },
    upstreams: { echo: { url: upstreamUrl, timeout: '30s' } },
    routes: [
      { path: '/acting', upstream: 'echo', auth: 'required', org: 'optional', plans: ['team'] },
      { path: '/pooled', upstream: 'echo', auth: 'required', org: 'optional', dailyLimit: true },
    ],
  };
}

/** MEMBERS users on plan team, all members of one organization on team, each with a personal key and an organization key; straight in the database. */
async function seedOrg(storage) {
  const { openDatabase } = await import(path.join(ROOT, 'dist/storage/database/db.js'));
  const { migrate } = await import(path.join(ROOT, 'dist/storage/database/migrations.js'));
  const { createUser, setPlan } = await import(path.join(ROOT, 'dist/storage/accounts/users.js'));
  const { Passwords } = await import(path.join(ROOT, 'dist/auth/password/passwords.js'));
  const { newApiKey } = await import(path.join(ROOT, 'dist/keys/index.js'));
  const sha256 = (key) => createHash('sha256').update(key).digest('hex');
  const passwords = new Passwords();
  const db = await openDatabase(storage);
  try {
    await migrate(db);
    const hash = await passwords.hash(PASSWORD);
    passwords.close();
    const [{ id: orgId }] = await db.query("INSERT INTO organizations (name, plan) VALUES ('Bench', 'team') RETURNING id");
    const members = [];
    for (let i = 0; i < MEMBERS; i++) {
      const email = `org-${i}-${randomBytes(4).toString('hex')}@example.test`;
      const id = await createUser(db, email, hash);
      await setPlan(db, id, 'team');
      await db.query("INSERT INTO memberships (org_id, user_id, role) VALUES ($1, $2, 'member')", [orgId, id]);
      const own = newApiKey();
      const org = newApiKey(undefined, true);
      await db.query('INSERT INTO api_tokens (user_id, token_hash, start, name) VALUES ($1, $2, $3, $4)', [id, sha256(own.key), own.start, 'bench']);
      await db.query("INSERT INTO api_tokens (user_id, org_id, role, token_hash, start, name) VALUES ($1, $2, 'member', $3, $4, 'bench')", [id, orgId, sha256(org.key), org.start]);
      members.push({ email, password: PASSWORD, id, ownKey: own.key, orgKey: org.key });
    }
    return { orgId, members };
  } finally {
    await db.close();
  }
}

/** One round: CONNECTIONS loops, connection i on instance i % urls.length with header set i % sets. */
async function round(urls, pathname, headerSets, seconds) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: CONNECTIONS });
  const statuses = {};
  let requests = 0;
  const started = performance.now();
  const deadline = started + seconds * 1000;
  const one = (url, headers) => new Promise((resolve) => {
    const { hostname, port } = new URL(url);
    const req = http.request({ host: hostname, port, path: pathname, headers, agent }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode));
    });
    req.on('error', () => resolve(0));
    req.end();
  });
  await Promise.all(Array.from({ length: CONNECTIONS }, async (_, i) => {
    while (performance.now() < deadline) {
      const status = await one(urls[i % urls.length], headerSets[i % headerSets.length]);
      statuses[status] = (statuses[status] ?? 0) + 1;
      requests++;
    }
  }));
  const elapsed = (performance.now() - started) / 1000;
  agent.destroy();
  return { rps: requests / elapsed, statuses };
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** Alternating rounds of `base` and `test` (after one warm-up each); the median paired ratio and the statuses seen. */
async function compare(name, base, test, target) {
  // Every answer is tallied, the warm-up's included: the exactness check compares them with the counts.
  const seen = { base: {}, test: {} };
  const tally = (side, result) => {
    for (const [status, n] of Object.entries(result.statuses)) seen[side][status] = (seen[side][status] ?? 0) + n;
    return result;
  };
  tally('base', await round(base.urls, base.path, base.headers, 1));
  tally('test', await round(test.urls, test.path, test.headers, 1));
  const ratios = [];
  const rps = { base: [], test: [] };
  for (let r = 0; r < ROUNDS; r++) {
    const b = tally('base', await round(base.urls, base.path, base.headers, SECONDS));
    const t = tally('test', await round(test.urls, test.path, test.headers, SECONDS));
    rps.base.push(b.rps);
    rps.test.push(t.rps);
    ratios.push(t.rps / b.rps);
  }
  const ratio = median(ratios);
  const figures = `${Math.round(median(rps.test))} req/s against ${Math.round(median(rps.base))} (median of ${ROUNDS} paired rounds of ${SECONDS} s)`;
  console.log(`- ${name}: ${figures}, ratio ${ratio.toFixed(3)}: target ≥ ${target} ${ratio >= target ? 'met' : 'NOT met'}`);
  console.log(`  statuses (warm-up included): ${JSON.stringify(seen.test)} against ${JSON.stringify(seen.base)}`);
  return { ratio, seen };
}

/** Runs the scenarios `only` names (org, orgpool) on a fresh database. */
export async function runOrgBenches(only, storage, tmp, cleanups) {
  if (!storage.postgres) return console.log('- organizations: skipped (three instances need Postgres; embedded PGlite here)');
  const upstream = await startChild(path.join(ROOT, 'bench/orgs.mjs'), 'upstream', [], cleanups);
  const { orgId, members } = await seedOrg(storage);
  const gateways = [];
  for (let i = 0; i < 3; i++) gateways.push(await startOrgGateway(tmp, `gateway-org-${i}`, orgConfig(await freePort(), storage, upstream.url), cleanups));
  const { login } = httpClient({ maxSockets: 1 });
  console.log(`\nOrganizations: ${MEMBERS} members of one organization on plan team (${DAILY.toLocaleString('en')} a day), ${CONNECTIONS} connections, load generator on the gateways' cores.`);
  if (only.has('org')) {
    // Ten members signed in, one at a time (argon2 on a busy machine).
    const own = [];
    for (const m of members.slice(0, 10)) own.push({ authorization: `Bearer ${(await login(gateways[0].url, m)).access}` });
    const acting = own.map((h) => ({ ...h, 'gateway-org': String(orgId) }));
    await compare('acting for an organization (Gateway-Org; baseline: the same request for the user), one instance',
      { urls: [gateways[0].url], path: '/acting/item', headers: own }, { urls: [gateways[0].url], path: '/acting/item', headers: acting }, 0.95);
  }
  if (only.has('orgpool')) {
    const urls = gateways.map((g) => g.url);
    const result = await compare(`pooled daily count, ${MEMBERS} members' organization keys on 3 instances (baseline: one member's personal key, own counter, same instances and limit)`,
      { urls, path: '/pooled/item', headers: [{ 'x-api-key': members[0].ownKey }] }, { urls, path: '/pooled/item', headers: members.map((m) => ({ 'x-api-key': m.orgKey })) }, 0.8);
    await sleep(2500); // every instance hands back its unserved blocks after 1 s
    const { default: pg } = await import('pg');
    const client = new pg.Client({ connectionString: storage.postgres });
    await client.connect();
    const [org] = (await client.query('SELECT daily_usage FROM organizations WHERE id = $1', [orgId])).rows;
    const [user] = (await client.query('SELECT daily_usage FROM users WHERE id = $1', [members[0].id])).rows;
    await client.end();
    const served = { pool: result.seen.test[200] ?? 0, own: result.seen.base[200] ?? 0 };
    const exact = (counted, n) => `${counted} for ${n} served (${counted === n ? 'exact' : 'NOT exact'})`;
    console.log(`  exact at the end: the pool counted ${exact(org.daily_usage, served.pool)}; the member's own counter ${exact(user.daily_usage, served.own)}`);
  }
}

async function startOrgGateway(tmp, name, config, cleanups) {
  const configFile = path.join(tmp, `${name}.bench.yaml`);
  writeConfig(configFile, config);
  const logFile = path.join(tmp, `${name}.log`);
  const logFd = openSync(logFile, 'a');
  const child = spawnGateway(configFile, { stdio: ['ignore', logFd, logFd], logLevel: env.BENCH_LOG_LEVEL ?? 'warn' }, cleanups);
  closeSync(logFd);
  const url = `http://127.0.0.1:${config.server.port}`;
  if (await waitForGateway(httpClient({ maxSockets: 2 }).send, child, url, '/healthz')) return { name, pid: child.pid, url };
  throw new Error(`the gateway did not start; its log:\n${readFileSync(logFile, 'utf8').slice(-4000)}`);
}

// Only when this file is the child itself: bench/run.mjs imports it, and its own children carry
// `--role upstream` too (an echo of the identity, which this empty answer would shadow).
const isChild = import.meta.filename === process.argv[1];
if (isChild && process.argv[2] === '--role' && process.argv[3] === 'upstream') await runUpstream(() => ({}));

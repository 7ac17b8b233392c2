#!/usr/bin/env node
// npm run failover: the figures of CONTRACT §32, measured by the failover tests themselves
// (test/failover/, the system tier), printed as a table: for a pg_auto_failover switchover and a
// primary killed (its pg_autoctl and Postgres together), the requests sent under load, the 503s
// and the window they fell in, how long the formation took to have a new primary and the gateway
// to be ready after it, the slowest answer, the uses counted against those served, and the
// in-doubt commits; for a Redis master killed under Sentinel, the promotion and how long each
// instance took to follow it. The tests assert the bounds; this only shows what they measured.
//
// Needs what the tests need: Postgres and Redis of the test run, pg_autoctl
// (postgresql-15-auto-failover), redis-server and redis-sentinel. About three minutes.
// FAILOVER_FILES: other test files (space-separated) than the two.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const FILES = (process.env.FAILOVER_FILES ?? 'test/failover/postgresFailover.test.ts test/failover/redisMasterKilled.test.ts').split(/\s+/).filter(Boolean);

function runTests() {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [path.join(ROOT, 'node_modules/vitest/vitest.mjs'), 'run', '--config', 'vitest.system.config.ts', ...FILES], {
      cwd: ROOT, env: { ...process.env, REQUIRE_SERVICES: '1' }, stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
      process.stderr.write(d);
    });
    child.on('exit', (code) => resolve({ code, out }));
  });
}

const seconds = (ms) => (typeof ms === 'number' ? `${(ms / 1000).toFixed(1)} s` : '-');

const { code, out } = await runTests();
// eslint-disable-next-line no-control-regex
const plain = out.replace(/\x1b\[[0-9;]*m/g, '');
const postgres = [...plain.matchAll(/^\[failover\] (\[.*\])$/gm)].flatMap((m) => JSON.parse(m[1]));
const redis = [...plain.matchAll(/^\[failover\] redis (\{.*\})$/gm)].map((m) => JSON.parse(m[1]));

console.log('\nPostgres (pg_auto_failover, two instances, storage.queryTimeout 5 s)');
console.log('| scenario | requests | 503s | 503 window | new primary after | ready after it | slowest answer | counted / served | in-doubt commits (uses) |');
console.log('| --- | --- | --- | --- | --- | --- | --- | --- | --- |');
for (const f of postgres) {
  console.log(`| ${f.scenario} | ${f.requests} | ${f.unavailable} | ${seconds(f.unavailableWindowMs)} | ${seconds(f.newPrimaryAfterMs)} | ${seconds(f.readyAfterNewPrimaryMs)} | `
    + `${seconds(f.slowestMs)} | ${f.counted ?? '-'} / ${f.served ?? '-'} | ${f.inDoubtCommits ?? '-'} (${f.inDoubtUses ?? '-'}) |`);
}
console.log('\nRedis (Sentinel, master killed)');
for (const f of redis) {
  console.log(`requests ${f.requests}; replica promoted ${seconds(f.killedToPromotedMs)} after the kill; instances on it ${f.followedAfterPromotionMs.map(seconds).join(' and ')} after`);
}
if (code !== 0) console.log('\nThe failover tests failed: the figures above are those of a failed run.');
process.exit(code ?? 1);

#!/usr/bin/env node
// npm run bench:import: CONTRACT §27's figure, "100,000 users import in under 5 minutes on these
// machines". Writes a CSV of IMPORT_USERS (100,000) generated accounts, each with a bcrypt hash
// (stored, not computed: one shape-valid hash for all) and an external id, then times the built
// CLI's `gateway import users` on a Postgres database of its own (embedded PGlite when Postgres
// does not answer), then a second run of the same file (every line skipped). Not a test: a
// figure to read, printed with the machine's CPU count (docs/benchmark.md).
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { baseConfig, createCleanups, positive, prepareStorage, ROOT, writeConfig } from './common.mjs';

const USERS = Math.round(positive(process.env.IMPORT_USERS, 100_000));
const HASH = '$2b$10$SoU5.WPa.McB32Izq0bK2eh4fKPgMx2Z4vnTM9AoSuZ4GgDVItELm';

const { cleanups, cleanup } = createCleanups();
const tmp = mkdtempSync(path.join(os.tmpdir(), 'gw-bench-import-'));
cleanups.push(async () => rmSync(tmp, { recursive: true, force: true }));
try {
  const storage = await prepareStorage(tmp, cleanups, 'import');
  const configFile = path.join(tmp, 'gateway.yaml');
  const { storage: storageConfig } = baseConfig(0, storage);
  writeConfig(configFile, { storage: storageConfig, auth: { jwt: { secret: 'bench-import-secret-at-least-32-bytes!!' } } });
  const file = path.join(tmp, 'users.csv');
  const lines = ['email,password_hash,email_verified,plan,created_at,external_id'];
  for (let i = 0; i < USERS; i++) lines.push(`user${i}@bench.example,${HASH},true,free,2024-01-01T00:00:00Z,legacy-${i}`);
  writeFileSync(file, `${lines.join('\n')}\n`);
  const run = () => {
    const started = process.hrtime.bigint();
    const out = execFileSync(process.execPath, [path.join(ROOT, 'dist/cli.js'), 'import', 'users', file, '--format', 'csv', '--config', configFile], { encoding: 'utf8', maxBuffer: 1 << 26 });
    return { seconds: Number(process.hrtime.bigint() - started) / 1e9, summary: out.trim().split('\n').join(', ') };
  };
  console.log(`importing ${USERS.toLocaleString('en')} users on ${storage.label}, ${os.availableParallelism()} CPUs`);
  const first = run();
  console.log(`first run:  ${first.seconds.toFixed(1)} s (${Math.round(USERS / first.seconds).toLocaleString('en')} users/s): ${first.summary}`);
  const second = run();
  console.log(`second run: ${second.seconds.toFixed(1)} s: ${second.summary}`);
  console.log(`target: under 300 s for 100,000 users (CONTRACT §27): ${first.seconds * (100_000 / USERS) < 300 ? 'met' : 'NOT met'}`);
} finally {
  await cleanup();
}

// The clean-up's timer (src/housekeeping.ts), not its sweep (test/storage/expiredRows.test.ts
// calls that directly): a running gateway purges expired rows by itself, again and again, and
// the timer does not keep a closed gateway's process alive. The interval is the instance's test
// seam (hourly otherwise). On a database of its own, so no other file's sweep does the work.
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { Housekeeping } from '../../src/housekeeping.js';
import { createLogger } from '../../src/telemetry/logger.js';
import {
  closeSql, describeWithServices, eventually, rawTestConfig, startTestGateway, testConfig, throwawayDatabase, type TestGateway, type ThrowawayDatabase,
} from '../helpers/gateway.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const DAY = 86_400_000;

describeWithServices('housekeeping timer', () => {
  let db: ThrowawayDatabase;
  let gw: TestGateway;

  beforeAll(async () => {
    db = await throwawayDatabase({ migrated: true });
    gw = await startTestGateway(testConfig({ storage: db.storage }), { housekeepingEveryMs: 200 });
  });
  afterAll(async () => {
    await gw?.close();
    await db?.drop();
    await closeSql();
  });

  /** A WebAuthn challenge row expiring at `expires`; its key. */
  async function challenge(expires: Date): Promise<string> {
    const key = `housekeeping-${randomUUID()}`;
    await db.sql("INSERT INTO webauthn_challenges (challenge_hash, purpose, expires_at) VALUES ($1, 'login', $2)", [key, expires]);
    return key;
  }
  const present = async (key: string) => (await db.sql('SELECT 1 FROM webauthn_challenges WHERE challenge_hash = $1', [key])).length === 1;

  it('purges rows expired over a day ago by itself, each time it comes round; live rows stay', async () => {
    const live = await challenge(new Date(Date.now() + DAY));
    const first = await challenge(new Date(Date.now() - 2 * DAY));
    await eventually(async () => !(await present(first)), 20_000, 50);
    // A second one after the first went: the timer comes round again (an interval, not a one-off).
    const second = await challenge(new Date(Date.now() - 2 * DAY));
    await eventually(async () => !(await present(second)), 20_000, 50);
    expect(await present(live)).toBe(true);
    expect(gw.logs.some((line) => line.includes('expired single-use tokens purged'))).toBe(true);
  });

  it('lets a pass under way finish before it is closed, so the pool does not close under it', async () => {
    const pass = { started: false, finished: false };
    const housekeeping = new Housekeeping({
      db: gw.services.db, clock: () => new Date(), log: createLogger('silent'), audit: gw.services.audit, everyMs: 20,
      minutely: [{ name: 'slow', run: async () => { pass.started = true; await new Promise((r) => setTimeout(r, 300)); pass.finished = true; } }],
    });
    await eventually(async () => pass.started, 5000, 5);
    await housekeeping.close();
    expect(pass.finished).toBe(true);
  });

  it('does not keep the process alive once the gateway is closed', async () => {
    const dist = path.join(ROOT, 'dist/server.js');
    if (!existsSync(dist)) throw new Error(`${dist} is missing: run \`npm run build\` first (npm test does)`);
    // A process that starts a gateway with the timer due often, closes it, and has nothing left to do.
    const script = `
      import { startGateway } from './dist/server.js';
      import { configSchema } from './dist/config/schema.js';
      import { createLogger } from './dist/telemetry/logger.js';
      const gw = await startGateway(configSchema.parse(JSON.parse(process.env.GATEWAY_CONFIG)), { log: createLogger('warn'), housekeepingEveryMs: 50 });
      await new Promise((resolve) => setTimeout(resolve, 200));
      await gw.close();
      process.stdout.write('closed\\n');
      // Kept alive past this, it says by what (an unref'd timer keeps nothing alive itself).
      setTimeout(() => process.stdout.write('alive after close: ' + JSON.stringify(process.getActiveResourcesInfo()) + '\\n'), 10_000).unref();`;
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
      cwd: ROOT, env: { ...process.env, GATEWAY_CONFIG: JSON.stringify(rawTestConfig({ storage: db.storage })) }, stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => { out += chunk; });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => { out += chunk; });
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    const deadline = new Promise<'still running'>((resolve) => setTimeout(() => resolve('still running'), 20_000).unref());
    const outcome = await Promise.race([exited, deadline]);
    if (outcome === 'still running') child.kill('SIGKILL');
    expect([outcome, out.trim().split('\n').at(-1)], out.slice(-600)).toEqual([0, 'closed']);
  }, 60_000);
});

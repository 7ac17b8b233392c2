// What the `gateway operators …` tests share (test/cli/operators*.test.ts): the built CLI on a
// config file of a database of their own (the run's keeps no operator), then a gateway on that
// database with an admin listener and no admin.apiKey, so operators are the only way in.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import { buildAdminApp } from '../../src/admin/app.js';
import { ensureBuilt, gateway, type CliRun } from './cli.js';
import { startTestGateway, testConfig, TEST_JWT_SECRET, throwawayDatabase, type TestGateway, type ThrowawayDatabase } from './gateway.js';

export interface OperatorsCli {
  db: ThrowawayDatabase;
  dir: string;
  configFile: string;
  gw: TestGateway;
  /** The gateway's admin listener. */
  url: string;
  close(): Promise<void>;
}

/** The CLI with `args` on the set-up's config file, in its folder, with `env` only. */
export type RunCli = (args: string[], env?: Record<string, string>) => Promise<CliRun>;

/**
 * `adminLines`: the config file's `admin:` settings after `port: 0` (indented); `beforeGateway`:
 * the CLI's first steps on direct storage, before any gateway holds it (it migrates the database).
 */
export async function startOperatorsCli(folder: string, adminLines: string[], beforeGateway: (cli: RunCli, db: ThrowawayDatabase) => Promise<void>): Promise<OperatorsCli> {
  ensureBuilt();
  const db = await throwawayDatabase();
  const dir = mkdtempSync(path.join(tmpdir(), folder));
  const configFile = path.join(dir, 'gateway.yaml');
  const auth = ['auth:', '  jwt:', `    secret: ${JSON.stringify(TEST_JWT_SECRET)}`];
  writeFileSync(configFile, ['storage:', `  postgres: ${JSON.stringify(db.url)}`, ...auth, 'admin:', '  port: 0', ...adminLines, ''].join('\n'));
  let gw: TestGateway | undefined;
  let adminApp: FastifyInstance | undefined;
  const close = async () => {
    await adminApp?.close();
    await gw?.close();
    await db.drop();
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await beforeGateway((args, env = {}) => gateway([...args, '--config', configFile], { cwd: dir, env }), db);
    gw = await startTestGateway(testConfig({ storage: db.storage, admin: { apiKey: '' } }));
    adminApp = await buildAdminApp(gw.services);
    const url = await adminApp.listen({ host: '127.0.0.1', port: 0 });
    return { db, dir, configFile, gw, url, close };
  } catch (err) {
    await close();
    throw err;
  }
}

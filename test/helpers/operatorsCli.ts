// What the `gateway operators …` tests share (test/cli/operators*.test.ts): the built CLI on a
// config file of a database of their own (the run's keeps no operator), then a gateway on that
// database with an admin listener and no admin.apiKey, so operators are the only way in.
import type { FastifyInstance } from 'fastify';
import { buildAdminApp } from '../../src/admin/app.js';
import type { CliRun } from './cli.js';
import { cliFolder } from './cliFolder.js';
import { startTestGateway, testConfig, throwawayDatabase, type TestGateway, type ThrowawayDatabase } from './gateway.js';

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
export async function startOperatorsCli(prefix: string, adminLines: string[], beforeGateway: (cli: RunCli, db: ThrowawayDatabase) => Promise<void>): Promise<OperatorsCli> {
  const db = await throwawayDatabase();
  const folder = cliFolder(prefix, db.url, adminLines);
  const { dir, configFile } = folder;
  let gw: TestGateway | undefined;
  let adminApp: FastifyInstance | undefined;
  const close = async () => {
    await adminApp?.close();
    await gw?.close();
    await db.drop();
    folder.remove();
  };
  try {
    await beforeGateway(folder.cli, db);
    gw = await startTestGateway(testConfig({ storage: db.storage, admin: { apiKey: '' } }));
    adminApp = await buildAdminApp(gw.services);
    const url = await adminApp.listen({ host: '127.0.0.1', port: 0 });
    return { db, dir, configFile, gw, url, close };
  } catch (err) {
    await close();
    throw err;
  }
}

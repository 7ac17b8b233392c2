// The admin tests' set-up: a gateway on a throwaway database of its own (its operators, audit and
// user ids apart from every other file's) with its admin API listening on a port of the test's.
import type { FastifyInstance } from 'fastify';
import { buildAdminApp } from '../../src/admin/app.js';
import type { Config } from '../../src/config/schema.js';
import { closeSql, startTestGateway, throwawayDatabase, type TestGateway, type TestGatewayOptions, type ThrowawayDatabase } from './gateway.js';

export interface AdminOnOwnDatabase {
  db: ThrowawayDatabase;
  gw: TestGateway;
  app: FastifyInstance;
  /** the admin API's address */
  url: string;
  /** Closes the admin API and the gateway, drops the database and ends the file's SQL client. */
  close(): Promise<void>;
}

/** `configOn` makes the gateway's config on the database (its `storage`); what it started is closed if a step fails. */
export async function adminOnOwnDatabase(configOn: (db: ThrowawayDatabase) => Config, options: TestGatewayOptions = {}): Promise<AdminOnOwnDatabase> {
  const db = await throwawayDatabase({ migrated: true });
  let gw: TestGateway | undefined;
  let app: FastifyInstance | undefined;
  const close = async () => {
    await app?.close();
    await gw?.close();
    await db.drop();
    await closeSql();
  };
  try {
    gw = await startTestGateway(configOn(db), options);
    app = await buildAdminApp(gw.services);
    const url = await app.listen({ host: '127.0.0.1', port: 0 });
    return { db, gw, app, url, close };
  } catch (err) {
    await close();
    throw err;
  }
}

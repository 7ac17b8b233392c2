// The admin tests' set-up: a gateway on a throwaway database of its own (its operators, audit and
// user ids apart from every other file's) with its admin API listening on a port of the test's.
import type { IncomingHttpHeaders } from 'node:http';
import type { FastifyInstance } from 'fastify';
import { buildAdminApp } from '../../src/admin/app.js';
import type { Config } from '../../src/config/schema.js';
import { request, type HttpResponse, type RequestOptions } from './http.js';
import { ADMIN_KEY, bearer, closeSql, startTestGateway, throwawayDatabase, type TestGateway, type TestGatewayOptions, type ThrowawayDatabase } from './gateway.js';

/** A gateway's admin API listening on a port of the test's. */
export interface AdminListening {
  app: FastifyInstance;
  /** the admin API's address */
  url: string;
  /** A request to it as given (no key unless the options carry one). */
  call(method: string, path: string, options?: RequestOptions): Promise<HttpResponse>;
  /** A request to it with the admin key, and `json` as the body when given. */
  as(method: string, path: string, json?: unknown): Promise<HttpResponse>;
}

/** The gateway's admin API (buildAdminApp) listening on `host`, port chosen by the system; the test closes `app`. */
export async function listenAdmin(gw: TestGateway, host = '127.0.0.1'): Promise<AdminListening> {
  const app = await buildAdminApp(gw.services);
  const url = await app.listen({ host, port: 0 });
  return {
    app, url,
    call: (method, path, options) => request(url, method, path, options),
    as: (method, path, json) => request(url, method, path, { headers: bearer(ADMIN_KEY), ...(json === undefined ? {} : { json }) }),
  };
}

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
    const admin = await listenAdmin(gw);
    app = admin.app;
    return { db, gw, app, url: admin.url, close };
  } catch (err) {
    await close();
    throw err;
  }
}

/** What consoleSignIn sends its request with: the admin listener's address, or a request function of the test's own (over TLS). */
type ConsoleSender = string | ((method: string, path: string, options: { json: unknown }) => Promise<{ status: number; headers: IncomingHttpHeaders; json: unknown }>);

/** The console's sign-in with the admin key (POST /console/session): the session's cookie (`gw_console=…`), its CSRF token and the answer. */
export async function consoleSignIn(sender: ConsoleSender): Promise<{ cookie: string; csrf: string; answer: { status: number; headers: IncomingHttpHeaders } }> {
  const send = typeof sender === 'string' ? (method: string, path: string, options: { json: unknown }) => request(sender, method, path, options) : sender;
  const answer = await send('POST', '/console/session', { json: { key: ADMIN_KEY } });
  if (answer.status !== 200) throw new Error(`console sign-in answered ${answer.status}`);
  return { cookie: String(answer.headers['set-cookie']).split(';')[0]!, csrf: (answer.json as { csrf: string }).csrf, answer };
}

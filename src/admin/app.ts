// The admin listener (admin.host:admin.port, HTTPS with admin.tls): metrics, health and the
// OpenAPI document for operators, /admin/v1, and the console.
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import Fastify, { type FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { healthRoutes } from '../listener/health.js';
import { metricsText } from '../metrics/app.js';
import { failureLog, type FailureLog } from '../telemetry/logThrottle.js';
import type { Instance } from '../instance.js';
import { listenerOptions, registerCommon, registerHostCheck } from '../listener/basics.js';
import { httpsOptions } from '../listener/tls.js';
import { refuseUnfitInput } from '../listener/inputs.js';
import { combinedDocument, documentRoutes, type EndpointSchema } from '../openapi.js';
import { consoleRoutes } from './console.js';
import { operatorSignInRoutes } from './operatorSignIn.js';
import { consoleOffReasons, consoleOrigin, linkOrigin } from './consoleOrigin.js';
import { memoryConsoleStore } from '../storage/operators/index.js';
import { adminExistence } from './access.js';
import { adminRoutes } from './routes.js';
import { mailLinks } from '../config/schema/portal.js';

/** Each route's OpenAPI fragment (documentation only: src/openapi.ts), by handler. */
const DOCS = {
  metrics: { tags: ['admin'], summary: 'Prometheus metrics (text format)', response: { 200: { description: 'text/plain; version=0.0.4', type: 'string' } } },
  openapi: { tags: ['admin'], summary: 'This document', response: { 200: { type: 'object' } } },
} satisfies Record<string, EndpointSchema>;

export interface AdminOptions {
  /** The public listener's OpenAPI document, served with the admin API's as one. */
  publicDocument?: () => Record<string, unknown>;
}

export async function buildAdminApp(instance: Instance, options: AdminOptions = {}): Promise<FastifyInstance> {
  const { db, redis, identities, events, audit, metrics, log, live, lifecycle, fleet } = instance;
  // The console's own requests to the admin API say so with this, for the audit log's actor.
  const consoleMark = randomBytes(16).toString('hex');
  const { admin } = instance.config;
  // admin.tls: HTTPS (and HTTP/2 if asked), with the public listener's TLS policy.
  const app = Fastify({ ...listenerOptions(log.child({ listener: 'admin' })), ...(httpsOptions(admin.tls) as object) });
  registerCommon(app, metrics.tallies, instance.errorStyle);
  registerHostCheck(app);
  await documentRoutes(app);
  await app.register(healthRoutes, { db, redis, lifecycle, fleet });
  app.get('/openapi.json', { schema: DOCS.openapi }, async () => combinedDocument(options.publicDocument?.() ?? {}, app.swagger() as Record<string, unknown>));
  app.get('/metrics', { schema: DOCS.metrics }, async (_request, reply) => {
    reply.type(metrics.registry.contentType);
    return metricsText(instance);
  });
  // A script guessing keys would write a line per guess (5,000 a second, measured): one per interval instead.
  // Unfit text in a query, path or body (CONTRACT §26) is 400 `Requête invalide` on the admin API
  // and the console; an alert's data is a document relayed to a webhook, newlines and all; an
  // import's JSON lines are checked line by line and field by field (import/rows.ts, import/keys.ts).
  refuseUnfitInput(app, { payloads: ['/admin/v1/alerts', '/admin/v1/import/users', '/admin/v1/import/keys'] });
  // Read per request from the live configuration: SIGHUP rotates the shared key (CONTRACT §24).
  const apiKey = () => live.current.settings.admin.apiKey;
  const adminExists = adminExistence(apiKey, db);
  const keyRefusals = failureLog(app.log as Logger, 'admin key refused: a request with a missing or wrong admin key');
  // admin.port 0 (any free port): the port the listener got, once it listens.
  const port = () => (app.server.address() as AddressInfo | null)?.port ?? admin.port;
  await app.register(adminRoutes, { prefix: '/admin', db, identities, events, audit, consoleMark, apiKey, config: () => live.current.settings, billing: instance.config.billing, clock: instance.clock,
    keyRefusals, adminExists, memberships: instance.memberships,
    linkOrigin: () => linkOrigin(admin, port()),
    invitations: { mailer: instance.mailer, words: instance.mailWords, resetUrl: instance.config.mail ? mailLinks(instance.config).reset : undefined },
    cancelSubscriptions: instance.billing?.billing.cancelAtPeriodEnd,
    ssoConfigured: instance.config.organizations?.enabled === true && instance.config.organizations.sso !== undefined });
  await registerConsole(app, instance, { consoleMark, apiKey, keyRefusals, adminExists });
  return app;
}

/** What the console shares with the admin API. */
interface ConsoleShared {
  consoleMark: string;
  apiKey: () => string;
  keyRefusals: FailureLog;
  adminExists: () => Promise<boolean>;
}

/**
 * The console, absent (404), not refused: off loopback without TLS (CONTRACT §16), or on every
 * address without admin.publicUrl (§26), said once at start as `gateway check` says it; and while
 * there is neither a shared key nor an operator (§24: with operators only, it offers their sign-in).
 */
async function registerConsole(app: FastifyInstance, instance: Instance, shared: ConsoleShared): Promise<void> {
  const { db, redis, audit, metrics, live, lifecycle, fleet } = instance;
  const { admin } = instance.config;
  // The key is checked per request below (SIGHUP may set or clear it): the other reasons decide here.
  const offBecause = consoleOffReasons({ ...admin, apiKey: admin.apiKey || 'checked per request' });
  if (offBecause.length) {
    if (admin.apiKey) app.log.warn({ reasons: offBecause }, 'console off: /console/ answers 404');
    return;
  }
  // With server.workers, the primary keeps sessions and tickets for all: a connection may reach any worker.
  const store = fleet?.consoleStore ?? memoryConsoleStore(() => instance.clock().getTime());
  // admin.port 0 (any free port): the port the listener got, once it listens.
  const origin = () => consoleOrigin(admin, (app.server.address() as AddressInfo | null)?.port ?? admin.port);
  const secure = admin.tls !== undefined || admin.publicUrl?.startsWith('https:') === true;
  const stripeApiBase = instance.config.billing?.stripe.apiBase;
  const consoleDeps = { ...shared, secure, origin, config: () => live.current.settings, stripeApiBase, readiness: { db, redis, lifecycle }, metrics, clock: instance.clock, store };
  await app.register(async (scope) => {
    scope.addHook('onRequest', async (_request, reply) => {
      if (!(await shared.adminExists())) return reply.callNotFound();
    });
    await scope.register(consoleRoutes, consoleDeps);
    // Operators as themselves (CONTRACT §24), in a scope of its own: the auth rate limit applies there only.
    const passwordMinLength = instance.config.auth.passwordMinLength;
    await scope.register(operatorSignInRoutes, { db, passwords: instance.passwords, audit, live, redis, passwordMinLength, console: consoleDeps, relyingParty: instance.config.admin.passkeys });
  });
}

// POST /admin/v1/import/users and /import/keys (CONTRACT §27): the JSON lines of `gateway import
// users --format json` and of `gateway import keys`, the same reports, audited per batch with the
// caller as actor (`gateway import … --admin` says cli). Admin only: they create accounts and keys.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '../config/schema.js';
import { sendError } from '../errors/index.js';
import { importKeys, importUsers, readUsers } from '../import/index.js';
import { knownPlans } from '../pipeline/index.js';
import type { Database } from '../storage/db.js';
import { by } from './access.js';

/** An import's body: 5,000 lines of `gateway import users --admin` with room to spare. */
const IMPORT_BODY_LIMIT = 32 * 1024 * 1024;

interface ImportDeps {
  db: Database;
  config: () => Pick<Config, 'plans' | 'routes'>;
  clock: () => Date;
  consoleMark?: string;
}

type ImportRequest = FastifyRequest<{ Querystring: Record<string, unknown> }>;

export async function importRoutes(app: FastifyInstance, deps: ImportDeps): Promise<void> {
  // JSON lines arrive as text: a parser of this scope alone.
  app.addContentTypeParser(['application/x-ndjson', 'text/plain'], { parseAs: 'string', bodyLimit: IMPORT_BODY_LIMIT }, (_r, body, done) => done(null, body));
  const admin = { bodyLimit: IMPORT_BODY_LIMIT, config: { role: 'admin' as const } };
  app.post('/v1/import/users', admin, (request: ImportRequest, reply) => importUsersRoute(deps, request, reply));
  app.post('/v1/import/keys', admin, (request: ImportRequest, reply) => importKeysRoute(deps, request, reply));
}

/** The body's text and whether it is a dry run; undefined (after answering 400) when either is not as the contract says. */
function linesOf(request: ImportRequest, reply: FastifyReply): { text: string; dryRun: boolean } | undefined {
  const dryRun = request.query.dry_run;
  if (typeof request.body !== 'string' || (dryRun !== undefined && dryRun !== 'true' && dryRun !== 'false')) {
    sendError(reply, 'importBodyInvalid');
    return undefined;
  }
  return { text: request.body, dryRun: dryRun === 'true' };
}

async function importUsersRoute(deps: ImportDeps, request: ImportRequest, reply: FastifyReply) {
  const lines = linesOf(request, reply);
  if (!lines) return reply;
  const records = readUsers(lines.text, 'json', { plans: knownPlans(deps.config()) });
  return importUsers(deps.db, records, { dryRun: lines.dryRun, actor: by(deps, request).actor, format: 'json', clock: deps.clock });
}

async function importKeysRoute(deps: ImportDeps, request: ImportRequest, reply: FastifyReply) {
  const lines = linesOf(request, reply);
  if (!lines) return reply;
  const knownScopes = new Set(deps.config().routes.flatMap((route) => route.scopes ?? []));
  return importKeys(deps.db, lines.text, { dryRun: lines.dryRun, knownScopes, actor: by(deps, request).actor, clock: deps.clock });
}

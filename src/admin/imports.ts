// POST /admin/v1/import/users and /import/keys (CONTRACT §27): the JSON lines of `gateway import
// users --format json` and of `gateway import keys`, the same reports, audited per batch with the
// caller as actor: what authenticated (CONTRACT §33: the shared key `admin`, an operator by id,
// `gateway import … --admin` included). Admin only: they create accounts and keys.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '../config/schema.js';
import { sendError } from '../errors/index.js';
import { importKeys, importUsers, readUsers } from '../import/index.js';
import { knownPlans } from '../pipeline/index.js';
import type { Database } from '../storage/database/index.js';
import { by } from './access.js';
import { errors, type EndpointSchema } from '../openapi.js';

/** An import's body: 5,000 lines of `gateway import users --admin` with room to spare. */
const IMPORT_BODY_LIMIT = 32 * 1024 * 1024;

interface ImportDeps {
  db: Database;
  config: () => Pick<Config, 'plans' | 'routes'>;
  clock: () => Date;
}

type ImportRequest = FastifyRequest<{ Querystring: Record<string, unknown> }>;

/** What both imports take and answer (CONTRACT §27): a dry run, and the line-by-line report. */
const importQuery = { type: 'object', properties: { dry_run: { enum: ['true', 'false'] } } };
const importReport = {
  type: 'object',
  properties: {
    dry_run: { type: 'boolean' }, created: { type: 'integer' }, skipped_existing: { type: 'integer' }, refused: { type: 'integer' },
    refusals: { type: 'array', items: { type: 'object', properties: { line: { type: 'integer' }, email: { type: 'string' }, reason: { type: 'string' } } } },
  },
};

/** Each route's OpenAPI fragment (documentation only: src/openapi.ts), by handler. */
const DOCS = {
  importUsers: {
    tags: ['admin'], summary: 'Import accounts: one JSON object a line {email, password_hash, email_verified, plan, is_active, created_at, external_id} (docs/migrating.md)',
    security: [{ adminKey: [] }],
    querystring: importQuery, response: { 200: importReport, ...errors('importBodyInvalid', 'payloadTooLarge', 'adminUnauthorized', 'adminNotFound') },
  },
  importKeys: {
    tags: ['admin'],
    summary: 'Import API keys by their SHA-256: one JSON object a line {email, name, sha256, scopes, expires_at} (docs/migrating.md); audited api_key.imported per batch',
    security: [{ adminKey: [] }],
    querystring: importQuery, response: { 200: importReport, ...errors('importBodyInvalid', 'payloadTooLarge', 'adminUnauthorized', 'adminNotFound') },
  },
} satisfies Record<string, EndpointSchema>;

export async function importRoutes(app: FastifyInstance, deps: ImportDeps): Promise<void> {
  // JSON lines arrive as text: a parser of this scope alone.
  app.addContentTypeParser(['application/x-ndjson', 'text/plain'], { parseAs: 'string', bodyLimit: IMPORT_BODY_LIMIT }, (_r, body, done) => done(null, body));
  const admin = { bodyLimit: IMPORT_BODY_LIMIT, config: { role: 'admin' as const } };
  app.post('/v1/import/users', { ...admin, schema: DOCS.importUsers }, (request: ImportRequest, reply) => importUsersRoute(deps, request, reply));
  app.post('/v1/import/keys', { ...admin, schema: DOCS.importKeys }, (request: ImportRequest, reply) => importKeysRoute(deps, request, reply));
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
  return importUsers(deps.db, records, { dryRun: lines.dryRun, actor: by(request), format: 'json', clock: deps.clock });
}

async function importKeysRoute(deps: ImportDeps, request: ImportRequest, reply: FastifyReply) {
  const lines = linesOf(request, reply);
  if (!lines) return reply;
  const knownScopes = new Set(deps.config().routes.flatMap((route) => route.scopes ?? []));
  return importKeys(deps.db, lines.text, { dryRun: lines.dryRun, knownScopes, actor: by(request), clock: deps.clock });
}

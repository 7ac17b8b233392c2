// The OpenAPI fragments of the admin listener's endpoints that are not given beside their handlers,
// found by method and path as each route is registered (../openapi.ts).
import { adminUser, errors, limits, message, ownKey, userId, type EndpointSchema } from './shapes.js';

/** What both imports take and answer (CONTRACT §27): a dry run, and the line-by-line report. */
const importQuery = { type: 'object', properties: { dry_run: { enum: ['true', 'false'] } } };
const importReport = {
  type: 'object',
  properties: {
    dry_run: { type: 'boolean' }, created: { type: 'integer' }, skipped_existing: { type: 'integer' }, refused: { type: 'integer' },
    refusals: { type: 'array', items: { type: 'object', properties: { line: { type: 'integer' }, email: { type: 'string' }, reason: { type: 'string' } } } },
  },
};

/** Each endpoint's schema, by method and path (with its prefix). */
export const ADMIN_ENDPOINTS: Record<string, EndpointSchema> = {
  'GET /metrics': { tags: ['admin'], summary: 'Prometheus metrics (text format)', response: { 200: { description: 'text/plain; version=0.0.4', type: 'string' } } },
  'GET /openapi.json': { tags: ['admin'], summary: 'This document', response: { 200: { type: 'object' } } },
  'GET /admin/v1/users': {
    tags: ['admin'], summary: 'With email: that user (trimmed, any case). Otherwise a page of users, newest first: query matches email (substring, any case), exact external_id or exact id',
    security: [{ adminKey: [] }],
    querystring: {
      type: 'object',
      properties: {
        email: { type: 'string' }, query: { type: 'string' }, plan: { type: 'string' }, active: { enum: ['true', 'false'] }, limit: { type: 'integer', minimum: 1, maximum: 200, default: 50 },
        cursor: { type: 'string' },
      },
    },
    response: {
      200: { anyOf: [adminUser, { type: 'object', properties: { users: { type: 'array', items: adminUser }, next_cursor: { type: ['string', 'null'] } } }] },
      ...errors('adminEmailRequired', 'adminListInvalid', 'adminUnauthorized', 'adminNotFound'),
    },
  },
  'GET /admin/v1/audit': {
    tags: ['admin'], summary: 'The audit log, newest first, in keyset pages: by user, event type and time', security: [{ adminKey: [] }],
    querystring: {
      type: 'object',
      properties: {
        user_id: { type: 'integer' }, type: { type: 'string' }, since: { type: 'string', format: 'date-time' }, limit: { type: 'integer', minimum: 1, maximum: 200, default: 50 },
        cursor: { type: 'string' },
      },
    },
    response: {
      200: {
        type: 'object',
        properties: {
          events: {
            type: 'array',
            items: {
              type: 'object',
              properties: {
                id: { type: 'integer' }, at: { type: 'string', format: 'date-time' }, type: { type: 'string' }, actor: { enum: ['user', 'admin', 'cli', 'console', 'operator', 'billing', 'system'] },
                actor_id: { type: ['integer', 'null'] }, user_id: { type: ['integer', 'null'] }, ip: { type: ['string', 'null'] }, user_agent: { type: ['string', 'null'] }, data: { type: 'object' },
              },
            },
          },
          next_cursor: { type: ['string', 'null'] },
        },
      },
      ...errors('auditListInvalid', 'adminUnauthorized', 'adminNotFound'),
    },
  },
  'GET /admin/v1/users/:id/sessions': {
    tags: ['admin'], summary: 'The user\'s active sessions, most recently used first', security: [{ adminKey: [] }], params: userId,
    response: {
      200: {
        type: 'object',
        properties: {
          sessions: {
            type: 'array',
            items: {
              type: 'object',
              properties: {
                id: { type: 'integer' }, created_at: { type: 'string', format: 'date-time' }, last_used_at: { type: 'string', format: 'date-time' }, user_agent: { type: ['string', 'null'] },
                ip: { type: ['string', 'null'] },
              },
            },
          },
        },
      },
      ...errors('adminUnauthorized', 'adminNotFound'),
    },
  },
  'DELETE /admin/v1/users/:id/sessions': {
    tags: ['admin'], summary: 'End all the user\'s sessions (their refresh tokens stop working)', security: [{ adminKey: [] }], params: userId,
    response: { 200: { type: 'object', properties: { message: { type: 'string' }, revoked: { type: 'integer' } } }, ...errors('adminUnauthorized', 'adminNotFound') },
  },
  'DELETE /admin/v1/users/:id/sessions/:sid': {
    tags: ['admin'], summary: 'End one of the user\'s sessions', security: [{ adminKey: [] }], params: { type: 'object', properties: { id: { type: 'integer' }, sid: { type: 'integer' } } },
    response: { 200: { type: 'object', properties: { message: { type: 'string' }, revoked: { type: 'integer' } } }, ...errors('adminUnauthorized', 'adminNotFound') },
  },
  'GET /admin/v1/users/:id/api-keys': {
    tags: ['admin'], summary: 'The user\'s API keys, newest first, revoked ones too (never the key or its hash)', security: [{ adminKey: [] }], params: userId,
    response: {
      200: { type: 'object', properties: { api_keys: { type: 'array', items: { ...ownKey, properties: { ...ownKey.properties, active: { type: 'boolean' } } } } } },
      ...errors('adminUnauthorized', 'adminNotFound'),
    },
  },
  'DELETE /admin/v1/api-keys/:id': {
    tags: ['admin'], summary: 'Revoke one API key, whoever holds it', security: [{ adminKey: [] }], params: userId,
    response: { 200: { type: 'object', properties: { message: { type: 'string' }, id: { type: 'integer' }, user_id: { type: 'integer' } } }, ...errors('adminUnauthorized', 'adminNotFound') },
  },
  'POST /admin/v1/api-keys/leaked': {
    tags: ['admin'], summary: 'Revoke the live keys among raw keys found in the open (a secret scanner\'s report); unknown ones are ignored', security: [{ adminKey: [] }],
    body: { type: 'object', required: ['keys'], properties: { keys: { type: 'array', maxItems: 1000, items: { type: 'string', maxLength: 256 } } } },
    response: {
      200: { type: 'object', properties: { revoked: { type: 'array', items: { type: 'integer' }, description: 'the ids of the keys revoked now' } } },
      ...errors('badRequest', 'adminUnauthorized', 'adminNotFound'),
    },
  },
  'GET /admin/v1/users/:id/passkeys': {
    tags: ['admin'], summary: 'The user\'s passkeys (never the public key); empty where passkeys are not installed', security: [{ adminKey: [] }], params: userId,
    response: { 200: { type: 'object', properties: { passkeys: { type: 'array', items: { type: 'object' } } } }, ...errors('adminUnauthorized', 'adminNotFound') },
  },
  'GET /admin/v1/users/:id/identities': {
    tags: ['admin'], summary: 'The user\'s linked identity providers; empty where none are installed', security: [{ adminKey: [] }], params: userId,
    response: { 200: { type: 'object', properties: { identities: { type: 'array', items: { type: 'object' } } } }, ...errors('adminUnauthorized', 'adminNotFound') },
  },
  'DELETE /admin/v1/users/:id/mfa': {
    tags: ['admin'], summary: 'Remove the user\'s TOTP and recovery codes (a user locked out)', security: [{ adminKey: [] }], params: userId,
    response: { 200: { type: 'object', properties: { message: { type: 'string' }, user_id: { type: 'integer' } } }, ...errors('adminUnauthorized', 'adminNotFound') },
  },
  'DELETE /admin/v1/users/:id': {
    tags: ['admin'], summary: 'Delete a user and everything of it; answers the user as it was', security: [{ adminKey: [] }], params: userId,
    response: { 200: adminUser, ...errors('adminUnauthorized', 'adminNotFound') },
  },
  'GET /admin/v1/users/:id': {
    tags: ['admin'], summary: 'A user (never the password hash)', security: [{ adminKey: [] }], params: userId, response: { 200: adminUser, ...errors('adminUnauthorized', 'adminNotFound') },
  },
  'PUT /admin/v1/users/:id/plan': {
    tags: ['admin'], summary: 'Set a user\'s plan (and its subscription record)', security: [{ adminKey: [] }], params: userId, body: { type: 'object', properties: { plan: { type: 'string' } } },
    response: { 200: adminUser, ...errors('planUnknown', 'adminUnauthorized', 'adminNotFound') },
  },
  'GET /admin/v1/users/:id/usage': {
    tags: ['admin'], summary: 'Today\'s and this month\'s counts, the limits and the last 30 days', security: [{ adminKey: [] }], params: userId,
    response: {
      200: {
        type: 'object',
        properties: {
          user_id: { type: 'integer' }, plan: { type: 'string' }, limits, today: { type: 'object' }, daily_remaining: { type: ['integer', 'null'] }, month: { type: 'object' },
          monthly_remaining: { type: ['integer', 'null'] }, history: { type: 'array' },
        },
      },
      ...errors('adminUnauthorized', 'adminNotFound'),
    },
  },
  'PUT /admin/v1/users/:id/active': {
    tags: ['admin'], summary: 'Activate or deactivate a user', security: [{ adminKey: [] }], params: userId, body: { type: 'object', properties: { active: { type: 'boolean' } } },
    response: { 200: adminUser, ...errors('activeFlagInvalid', 'adminUnauthorized', 'adminNotFound') },
  },
  'GET /admin/v1/users/:id/webhook-deliveries': {
    tags: ['admin'], summary: 'The user\'s 100 newest webhook messages, newest first (never their bodies)', security: [{ adminKey: [] }], params: userId,
    response: {
      200: {
        type: 'object',
        properties: {
          user_id: { type: 'integer' },
          deliveries: {
            type: 'array',
            items: {
              type: 'object',
              properties: {
                id: { type: 'string', description: 'the webhook-id header' }, type: { type: 'string' }, status: { enum: ['pending', 'delivered', 'failed', 'skipped'] }, attempts: { type: 'integer' },
                last_error: { type: ['string', 'null'] }, created_at: { type: 'string', format: 'date-time' }, last_attempt_at: { type: ['string', 'null'], format: 'date-time' },
                next_attempt_at: { type: ['string', 'null'], format: 'date-time' }, finished_at: { type: ['string', 'null'], format: 'date-time' },
              },
            },
          },
        },
      },
      ...errors('adminUnauthorized', 'adminNotFound'),
    },
  },
  'GET /admin/v1/plans': {
    tags: ['admin'], summary: 'The plans the configuration offers (what PUT …/plan accepts), with their limits; null: unlimited', security: [{ adminKey: [] }],
    response: {
      200: {
        type: 'object',
        properties: {
          plans: {
            type: 'array',
            items: {
              type: 'object', properties: { name: { type: 'string' }, daily: { type: ['integer', 'null'] }, monthly: { type: ['integer', 'null'] }, per_minute: { type: ['integer', 'null'] } },
            },
          },
        },
      },
      ...errors('adminUnauthorized', 'adminNotFound'),
    },
  },
  'POST /admin/v1/users': {
    tags: ['admin'],
    summary: 'Create a user without a password, on plan (default free), and mail it an account_invitation: mail.resetUrl with a single-use token valid 7 days, '
      + 'redeemed by POST /api/v1/auth/password/reset (sets the password, verifies the address)',
    security: [{ adminKey: [] }], body: { type: 'object', required: ['email'], properties: { email: { type: 'string' }, plan: { type: 'string' } } },
    response: { 201: adminUser, ...errors('emailInvalid', 'planUnknown', 'adminUnauthorized', 'adminNotFound', 'emailTaken', 'mailUnavailable') },
  },
  'GET /admin/v1/overview': {
    tags: ['admin'], summary: 'The last 30 UTC days across users and plans: API-key requests and denials and counted uses per plan per day, top users and organizations, plan mix (docs/console.md)',
    security: [{ adminKey: [] }],
    response: {
      200: {
        type: 'object',
        properties: {
          days: { type: 'array', items: { type: 'string', format: 'date' } }, plans: { type: 'array', items: { type: 'object' } }, top_users: { type: 'array', items: { type: 'object' } },
          top_orgs: { type: 'array', items: { type: 'object' } }, plan_mix: { type: 'object' },
        },
      },
      ...errors('adminUnauthorized', 'adminNotFound'),
    },
  },
  'POST /admin/v1/import/users': {
    tags: ['admin'], summary: 'Import accounts: one JSON object a line {email, password_hash, email_verified, plan, is_active, created_at, external_id} (docs/migrating.md)',
    security: [{ adminKey: [] }],
    querystring: importQuery, response: { 200: importReport, ...errors('importBodyInvalid', 'payloadTooLarge', 'adminUnauthorized', 'adminNotFound') },
  },
  'POST /admin/v1/import/keys': {
    tags: ['admin'],
    summary: 'Import API keys by their SHA-256: one JSON object a line {email, name, sha256, scopes, expires_at} (docs/migrating.md); audited api_key.imported per batch',
    security: [{ adminKey: [] }],
    querystring: importQuery, response: { 200: importReport, ...errors('importBodyInvalid', 'payloadTooLarge', 'adminUnauthorized', 'adminNotFound') },
  },
  'POST /admin/v1/alerts': {
    tags: ['admin'], summary: 'Queue an alert for a user\'s webhook', security: [{ adminKey: [] }],
    body: { type: 'object', properties: { user_id: { type: 'integer' }, type: { type: 'string' }, data: { type: 'object' } } },
    response: { 202: message, ...errors('alertInvalid', 'payloadTooLarge', 'adminUnauthorized', 'adminNotFound') },
  },
};

// The OpenAPI fragments of the routes routes.ts registers (/admin/v1's users, sessions, keys,
// audit and alerts), by handler name: read beside its endpoint map, in a file of their own for the
// map's length. Documentation only (src/openapi.ts); each route's role is routes.ts's.
import { BILLING_SCHEMA, OVERRIDE_DESCRIPTION, PLAN_BODY } from '../billing/operator.js';
import { ownKey } from '../keys/index.js';
import { adminUser, errors, limits, message, userId, type EndpointSchema } from '../openapi.js';

/** Each route's fragment, by the name of its handler in routes.ts. */
export const DOCS = {
  getUser: {
    tags: ['admin'], summary: 'A user (never the password hash), with its billing', security: [{ adminKey: [] }], params: userId,
    response: { 200: { ...adminUser, properties: { ...adminUser.properties, billing: BILLING_SCHEMA } }, ...errors('adminUnauthorized', 'adminNotFound') },
  },
  findUsers: {
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
  listAudit: {
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
  listSessions: {
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
  listApiKeys: {
    tags: ['admin'], summary: 'The user\'s API keys, newest first, revoked ones too (never the key or its hash)', security: [{ adminKey: [] }], params: userId,
    response: {
      200: { type: 'object', properties: { api_keys: { type: 'array', items: { ...ownKey, properties: { ...ownKey.properties, active: { type: 'boolean' } } } } } },
      ...errors('adminUnauthorized', 'adminNotFound'),
    },
  },
  listUserPasskeys: {
    tags: ['admin'], summary: 'The user\'s passkeys (never the public key); empty where passkeys are not installed', security: [{ adminKey: [] }], params: userId,
    response: { 200: { type: 'object', properties: { passkeys: { type: 'array', items: { type: 'object' } } } }, ...errors('adminUnauthorized', 'adminNotFound') },
  },
  listIdentities: {
    tags: ['admin'], summary: 'The user\'s linked identity providers; empty where none are installed', security: [{ adminKey: [] }], params: userId,
    response: { 200: { type: 'object', properties: { identities: { type: 'array', items: { type: 'object' } } } }, ...errors('adminUnauthorized', 'adminNotFound') },
  },
  revokeSessions: {
    tags: ['admin'], summary: 'End all the user\'s sessions (their refresh tokens stop working)', security: [{ adminKey: [] }], params: userId,
    response: { 200: { type: 'object', properties: { message: { type: 'string' }, revoked: { type: 'integer' } } }, ...errors('adminUnauthorized', 'adminNotFound') },
  },
  revokeSession: {
    tags: ['admin'], summary: 'End one of the user\'s sessions', security: [{ adminKey: [] }], params: { type: 'object', properties: { id: { type: 'integer' }, sid: { type: 'integer' } } },
    response: { 200: { type: 'object', properties: { message: { type: 'string' }, revoked: { type: 'integer' } } }, ...errors('adminUnauthorized', 'adminNotFound') },
  },
  resetMfa: {
    tags: ['admin'], summary: 'Remove the user\'s TOTP and recovery codes (a user locked out)', security: [{ adminKey: [] }], params: userId,
    response: { 200: { type: 'object', properties: { message: { type: 'string' }, user_id: { type: 'integer' } } }, ...errors('adminUnauthorized', 'adminNotFound') },
  },
  eraseUser: {
    tags: ['admin'],
    summary: 'Delete a user and everything of it; answers the user as it was. The last owner of an organization is refused (409, with orgs: [{id, name}]), as the user\'s own deletion is',
    security: [{ adminKey: [] }], params: userId,
    response: { 200: adminUser, ...errors('adminUnauthorized', 'adminNotFound', 'lastOwner', 'paymentUnavailable') },
  },
  setUserPlan: {
    tags: ['admin'], summary: 'Set a user\'s plan (and its subscription record)', security: [{ adminKey: [] }], params: userId,
    description: OVERRIDE_DESCRIPTION, body: PLAN_BODY,
    response: {
      200: { ...adminUser, properties: { ...adminUser.properties, billing: BILLING_SCHEMA } }, ...errors('planUnknown', 'badRequest', 'adminUnauthorized', 'adminNotFound', 'planManagedByBilling'),
    },
  },
  userUsage: {
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
  userDeliveries: {
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
  setUserActive: {
    tags: ['admin'], summary: 'Activate or deactivate a user', security: [{ adminKey: [] }], params: userId, body: { type: 'object', properties: { active: { type: 'boolean' } } },
    response: { 200: adminUser, ...errors('activeFlagInvalid', 'adminUnauthorized', 'adminNotFound') },
  },
  storeAlert: {
    tags: ['admin'], summary: 'Queue an alert for a user\'s webhook', security: [{ adminKey: [] }],
    body: { type: 'object', properties: { user_id: { type: 'integer' }, type: { type: 'string' }, data: { type: 'object' } } },
    response: { 202: message, ...errors('alertInvalid', 'payloadTooLarge', 'adminUnauthorized', 'adminNotFound') },
  },
  revokeApiKey: {
    tags: ['admin'], summary: 'Revoke one API key, whoever holds it', security: [{ adminKey: [] }], params: userId,
    response: { 200: { type: 'object', properties: { message: { type: 'string' }, id: { type: 'integer' }, user_id: { type: 'integer' } } }, ...errors('adminUnauthorized', 'adminNotFound') },
  },
  revokeLeaked: {
    tags: ['admin'], summary: 'Revoke the live keys among raw keys found in the open (a secret scanner\'s report); unknown ones are ignored', security: [{ adminKey: [] }],
    body: { type: 'object', required: ['keys'], properties: { keys: { type: 'array', maxItems: 1000, items: { type: 'string', maxLength: 256 } } } },
    response: {
      200: { type: 'object', properties: { revoked: { type: 'array', items: { type: 'integer' }, description: 'the ids of the keys revoked now' } } },
      ...errors('badRequest', 'adminUnauthorized', 'adminNotFound'),
    },
  },
} satisfies Record<string, EndpointSchema>;

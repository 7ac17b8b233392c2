// What a key looks like in the API's documents (the routes' OpenAPI fragments, docs/openapi.json):
// the body that makes one, and the key as its owner, an organization's managers and operators see
// it. One place for every endpoint that takes or shows a key (users', organizations', the admin
// API's), so a new field of a key is documented once. Plain JSON Schema: no HTTP here either.
import { ORG_ROLES } from '../storage/orgs/index.js';

const NULLABLE_DATE = { type: ['string', 'null'], format: 'date-time' };

/** The body's fields of a new key (CONTRACT §21, keyRequest() in rules.ts), personal or an organization's. */
export const keyRequestFields = {
  name: { type: 'string', minLength: 1, maxLength: 64 },
  scopes: { type: ['array', 'null'], items: { type: 'string' }, minItems: 1 },
  expires_at: NULLABLE_DATE,
};

/** A key's role in its organization (CONTRACT §22). */
export const keyRole = { enum: ORG_ROLES };

/** A key as listed (never the key or its hash). */
export const ownKey = {
  type: 'object',
  properties: {
    id: { type: 'integer' }, name: { type: 'string' }, start: { type: ['string', 'null'], description: 'the key\'s first characters (null for keys made before named keys)' },
    scopes: { type: ['array', 'null'], items: { type: 'string' }, description: 'null: the owner\'s every right' }, created_at: { type: 'string', format: 'date-time' },
    expires_at: NULLABLE_DATE, last_used_at: NULLABLE_DATE,
  },
};

/** An organization's key as listed: with its role and the member who made it. */
export const orgKey = {
  ...ownKey, properties: { ...ownKey.properties, role: keyRole, created_by: { type: 'integer', description: 'the member who created it' } },
};

const shownOnce = { key: { type: 'string', description: '<prefix>_<32 base62><6 base62 CRC-32>: shown once' } };

/** A key as made: the key itself is shown only in this answer. */
export const createdKey = { ...ownKey, properties: { ...ownKey.properties, ...shownOnce } };

/** An organization's key as made. */
export const createdOrgKey = { ...orgKey, properties: { ...orgKey.properties, ...shownOnce } };

// What a directory reads before it provisions (RFC 7644 §4): ServiceProviderConfig, ResourceTypes
// and Schemas, as CONTRACT §31 says: patch and filter supported, at most 100 results; bulk, sort,
// etag and password change not. The schemas list the attributes the gateway keeps.

export const SCHEMAS = {
  user: 'urn:ietf:params:scim:schemas:core:2.0:User',
  group: 'urn:ietf:params:scim:schemas:core:2.0:Group',
  list: 'urn:ietf:params:scim:api:messages:2.0:ListResponse',
  config: 'urn:ietf:params:scim:schemas:core:2.0:ServiceProviderConfig',
  resourceType: 'urn:ietf:params:scim:schemas:core:2.0:ResourceType',
  schema: 'urn:ietf:params:scim:schemas:core:2.0:Schema',
} as const;

/** The most resources one list answers (CONTRACT §31). */
export const MAX_RESULTS = 100;

export function serviceProviderConfig(base: string) {
  return {
    schemas: [SCHEMAS.config],
    patch: { supported: true },
    bulk: { supported: false, maxOperations: 0, maxPayloadSize: 0 },
    filter: { supported: true, maxResults: MAX_RESULTS },
    changePassword: { supported: false },
    sort: { supported: false },
    etag: { supported: false },
    authenticationSchemes: [
      { type: 'oauthbearertoken', name: 'OAuth Bearer Token', description: 'A SCIM token of the organization, sent as Authorization: Bearer', primary: true },
    ],
    meta: { resourceType: 'ServiceProviderConfig', location: `${base}/ServiceProviderConfig` },
  };
}

export function resourceTypes(base: string) {
  return [
    { schemas: [SCHEMAS.resourceType], id: 'User', name: 'User', endpoint: '/Users', schema: SCHEMAS.user, meta: { resourceType: 'ResourceType', location: `${base}/ResourceTypes/User` } },
    { schemas: [SCHEMAS.resourceType], id: 'Group', name: 'Group', endpoint: '/Groups', schema: SCHEMAS.group, meta: { resourceType: 'ResourceType', location: `${base}/ResourceTypes/Group` } },
  ];
}

const attribute = (name: string, extra: Record<string, unknown> = {}) => ({
  name, type: 'string', multiValued: false, required: false, caseExact: false, mutability: 'readWrite', returned: 'default', uniqueness: 'none', ...extra,
});
const sub = (names: string[]) => names.map((n) => attribute(n));

export function schemas(base: string) {
  return [
    {
      schemas: [SCHEMAS.schema], id: SCHEMAS.user, name: 'User', description: 'An account of the organization',
      attributes: [
        attribute('userName', { required: true, uniqueness: 'server' }),
        attribute('externalId', { caseExact: true }),
        attribute('displayName'),
        attribute('name', { type: 'complex', subAttributes: sub(['formatted', 'familyName', 'givenName', 'middleName', 'honorificPrefix', 'honorificSuffix']) }),
        attribute('emails', { type: 'complex', multiValued: true, subAttributes: [...sub(['value', 'type']), attribute('primary', { type: 'boolean' })] }),
        attribute('active', { type: 'boolean' }),
        attribute('groups', { type: 'complex', multiValued: true, mutability: 'readOnly', subAttributes: sub(['value', 'display']) }),
      ],
      meta: { resourceType: 'Schema', location: `${base}/Schemas/${SCHEMAS.user}` },
    },
    {
      schemas: [SCHEMAS.schema], id: SCHEMAS.group, name: 'Group', description: 'A group of the directory; its name maps to a role through roleMapping',
      attributes: [
        attribute('displayName', { required: true, uniqueness: 'server' }),
        attribute('externalId', { caseExact: true }),
        attribute('members', { type: 'complex', multiValued: true, subAttributes: sub(['value', 'display']) }),
      ],
      meta: { resourceType: 'Schema', location: `${base}/Schemas/${SCHEMAS.group}` },
    },
  ];
}

/** A ListResponse of `resources` (all of them: discovery lists are short). */
export const listOf = (resources: unknown[], startIndex = 1, total = resources.length) =>
  ({ schemas: [SCHEMAS.list], totalResults: total, startIndex, itemsPerPage: resources.length, Resources: resources });

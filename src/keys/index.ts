// The API keys' one door (docs/architecture.md, STYLE 28): what a key is (its format and checksum),
// what it may be (plans, scopes, expiry, apiKeys.maxPerOwner), and every action on one, for a
// personal or an organization owner: create, roll, revoke, list, and what each key was used for;
// and how the API's documents show a key (shapes.ts).
// Users' routes (user/apiToken.ts, apiKeyRoll.ts, apiKeyUsage.ts), organizations' (orgs/apiKeys.ts)
// and the admin API (admin/routes.ts, admin/orgKeys.ts) translate HTTP to it; the guards and the
// proxy read the format; nothing outside keys/ imports past this file. Speaks no HTTP.
export { API_KEY_PATTERN, isForgedKey, keyCandidates, keyChecksum, newApiKey, type NewApiKey } from './format.js';
export { graceOf, keyIdOf, keyPlanDenial, keyRequest, type KeyOutcome, type NamedKeyRequest } from './rules.js';
export {
  createApiKey, createNamedKey, requestNamedKey, requestRoll, revokeApiKeys, revokeKeyAsOperator, revokeKeyByCommand, revokeLeakedKeys, revokeNamedKey, rollNamedKey,
  type ApiKeyDeps, type KeyContext, type Requester,
} from './personal.js';
export { createOrgApiKey, revokeMemberKeys, revokeOrgApiKey, type OrgKeyContext, type OrgApiKeyDeps, type OrgKeyOwner } from './organization.js';
export { ApiKeyUsage, keyUsage, USAGE_DAYS } from './usage.js';
export { createdKey, createdOrgKey, keyRequestFields, keyRole, orgKey, ownKey } from './shapes.js';
// The lists, as the owners and operators see them (never a key or its hash); every personal key of a
// user revoked at once (an account an organization's SAML claims, CONTRACT §31).
export { listKeys, ownKeys, revokeKeys, type ApiKeyRow, type OwnKey } from '../storage/keys/index.js';
export { orgKeys, type OrgKey } from '../storage/keys/index.js';

// Scope guard (CONTRACT §21): an API key with scopes is a restricted key. It passes a route with
// `scopes` only holding every one of them, and nothing else (another route, an own endpoint but
// GET /api/v1/user/me) unless it holds `*`. A bearer sign-in and a key without scopes act with all
// of their owner's rights, as before.
import type { Denial } from '../../errors/index.js';
import type { Identity } from './authenticate.js';

export function checkScopes(identity: Pick<Identity, 'scopes'>, required: readonly string[] | undefined): Denial | null {
  // Only an API key's identity carries scopes (authenticate.ts): a bearer's has none.
  const held = identity.scopes;
  if (!held || held.includes('*')) return null;
  if (required && required.every((scope) => held.includes(scope))) return null;
  return { code: 'scopeInsufficient', extra: { required_scopes: required ? [...required] : ['*'] } };
}

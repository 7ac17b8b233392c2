// Who changes accounts and memberships on an organization's behalf (CONTRACT §31, "Audit and
// hooks"): its SAML sign-in (audit actor `system`, data.via "saml") or its SCIM directory (actor
// `scim`, actor_id the SCIM token's id, data.via "scim").
import type { AuditEvent } from '../audit.js';
import type { Client } from '../storage/accounts/index.js';

/** Who asks: a SAML sign-in (from this browser), or a SCIM token. */
export type ManagingActor = { kind: 'saml'; client?: Client } | { kind: 'scim'; tokenId: number };

/** The audit author of the actor's changes, and the data.via every event of theirs carries. */
export function authorOf(by: ManagingActor): { author: Pick<AuditEvent, 'actor' | 'actorId' | 'ip' | 'userAgent'>; via: 'saml' | 'scim' } {
  return by.kind === 'saml'
    ? { author: { actor: 'system', ...by.client }, via: 'saml' }
    : { author: { actor: 'scim', actorId: by.tokenId }, via: 'scim' };
}

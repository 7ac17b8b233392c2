// Roles from groups (CONTRACT §31 "Roles"): SCIM's groups map to roles through the organization's
// SAML connection's roleMapping; with no connection, no value maps and a member is `member`. The
// rule itself (highest mapped role, never owner, an owner untouched) is the managed accounts'
// applyMappedRole; this file says where the mapping and the values come from.
import type { Queryable } from '../storage/database/index.js';
import { connectionOfOrg } from '../storage/orgs/index.js';

/** The organization's roleMapping (group value → "admin" | "member"), or undefined when it has no SAML connection. */
export type RoleMappingOf = (q: Queryable, orgId: number) => Promise<Readonly<Record<string, string>> | undefined>;

/** The organization's SAML connection's roleMapping, read in the change's transaction; undefined without a connection (groups then give `member`). */
export const connectionRoleMapping: RoleMappingOf = async (q, orgId) => (await connectionOfOrg(q, orgId))?.settings.roleMapping;

/**
 * The values a user's groups offer the mapping: each group's displayName, and its externalId when
 * it has one. Entra ID's SAML groups claim sends a group's object id, which its SCIM sends as
 * externalId, so one roleMapping serves both sign-in and provisioning.
 */
export function groupValues(groups: ReadonlyArray<{ display_name: string; external_id?: string | null }>): string[] {
  return groups.flatMap((g) => (g.external_id ? [g.display_name, g.external_id] : [g.display_name]));
}

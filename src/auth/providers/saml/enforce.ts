// Enforcement (CONTRACT §31): with `enforce` on an organization's SAML connection, every other way
// in for an address of the organization's verified domains is refused, decided by the address's
// domain alone. The one decision every way in asks (password, register, links, passkeys,
// invitations, providers). Not cached: one indexed join, next to a password hash it is nothing,
// and a cache would let a login through on another instance after enforce was turned on.
import type { FastifyReply } from 'fastify';
import { emailDomain } from '../../../domains/index.js';
import { sendError } from '../../../errors/index.js';
import type { Queryable } from '../../../storage/database/index.js';
import { connectionOfDomain } from '../../../storage/orgs/index.js';

/** Where the refused address must sign in instead. */
export interface SsoRequired {
  orgId: number;
  /** The connection that is the one way in (a login code it issued is still good, CONTRACT §31). */
  connectionId: string;
  ssoUrl: string;
}

/** The question each way in asks before it checks anything the user typed. */
export interface SsoGate {
  requiredFor(email: string | undefined): Promise<SsoRequired | undefined>;
}

/** The gate of this gateway: `publicUrl` is organizations.sso.publicUrl (else auth.oidc.publicUrl). */
export function ssoGate(q: Queryable, publicUrl: string): SsoGate {
  return {
    async requiredFor(email) {
      // In the form domains are stored (an IDN as its A-label), as the managed accounts read it.
      const domain = email === undefined ? undefined : emailDomain(email);
      if (!domain) return undefined;
      const connection = await connectionOfDomain(q, domain);
      if (!connection?.settings.enforce) return undefined;
      return { orgId: connection.org_id, connectionId: connection.id, ssoUrl: `${publicUrl}/api/v1/auth/sso?org=${connection.org_id}` };
    },
  };
}

/** A gateway without organizations.sso enforces nothing. */
export const NO_SSO_GATE: SsoGate = { requiredFor: async () => undefined };

/** The 403 sso_required, the same body for every address of the domain (known account or not). */
export function sendSsoRequired(reply: FastifyReply, required: SsoRequired): FastifyReply {
  return sendError(reply, 'ssoRequired', { sso_url: required.ssoUrl });
}

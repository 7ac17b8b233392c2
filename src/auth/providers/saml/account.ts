// Whose account a SAML sign-in is (CONTRACT §31, "Whose account" and "Roles"): the email and the
// link are read here from the accepted assertion; finding, claiming or creating the account and
// setting its membership are the organizations' managed accounts (orgs/managedAccounts.ts), which
// SCIM shares. The public listener's builder hands that function in (SamlAccounts): auth does not
// import the organizations room, which imports auth.
import { normalizeEmail } from '../../../credentials/emailAddress.js';
import type { SamlConnection } from '../../../storage/orgs/index.js';
import type { Client } from '../../../storage/accounts/index.js';
import type { Accepted } from './response.js';

const EMAIL_FORMATS = new Set([
  'urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress', 'urn:oasis:names:tc:SAML:1.1:nameid-format:unspecified',
]);
const TRANSIENT = 'urn:oasis:names:tc:SAML:2.0:nameid-format:transient';

/** What the managed accounts are asked for a sign-in. */
export interface SamlAccountRequest {
  orgId: number;
  email: string;
  /** Never for a transient NameID: it identifies nobody. */
  link?: { connectionId: string; nameId: string };
  allowCreate: boolean;
  /** The values of the connection's groups attribute; absent when it names none or the assertion has none. */
  groups?: readonly string[];
  roleMapping: Readonly<Record<string, string>>;
  client: Client;
}

/** The managed accounts' answer: the account signed in, or why none is. */
export type SamlAccounts = (request: SamlAccountRequest) => Promise<{ ok: { userId: number } } | { refused: string }>;

/** The assertion's email (attributes.email when the connection names one, else an email or unspecified NameID), lower-cased, or undefined. */
export function emailOf(connection: SamlConnection, accepted: Accepted): string | undefined {
  const named = connection.settings.attributes.email;
  const emailNameId = accepted.nameIdFormat === undefined || EMAIL_FORMATS.has(accepted.nameIdFormat);
  const raw = named ? accepted.attributes.get(named)?.[0] : (emailNameId ? accepted.nameId : undefined);
  return raw ? normalizeEmail(raw) : undefined;
}

/** The request for the managed accounts, or undefined when the assertion carries no email. */
export function accountRequest(connection: SamlConnection, accepted: Accepted, client: Client): SamlAccountRequest | undefined {
  const email = emailOf(connection, accepted);
  if (!email) return undefined;
  const { settings } = connection;
  return {
    orgId: connection.org_id,
    email,
    ...(accepted.nameIdFormat === TRANSIENT || !accepted.nameId ? {} : { link: { connectionId: connection.id, nameId: accepted.nameId } }),
    allowCreate: settings.allowJit,
    ...(settings.attributes.groups ? { groups: accepted.attributes.get(settings.attributes.groups) } : {}),
    roleMapping: settings.roleMapping,
    client,
  };
}

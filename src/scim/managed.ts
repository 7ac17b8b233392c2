// Where SCIM meets the managed accounts of CONTRACT §31 ("Whose account", "Roles"): the organizations
// room finds, claims or creates an account and sets its membership's role, for SAML and SCIM alike
// (orgs/managedAccounts.ts). SCIM never writes a second version of that; this file only names what
// it takes from there, so the rest of the room reads one import.
export {
  applyMappedRole, emailInVerifiedDomain, ensureManagedAccountIn, madeMemberships, managedBy, Refused, type ManagedAccountDeps,
} from '../orgs/index.js';

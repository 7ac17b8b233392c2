// storage/orgs/'s one door (issue 73): nothing outside storage/ imports past it. Each file of the
// floor is exported by name and as a namespace (`users.findById`); a new file gets its two lines here.
// Repositories of the organization aggregate: organizations and members, invitations, domains, SAML and SCIM, managed accounts.
export * from './organizations.js';
export * as organizations from './organizations.js';
export * from './orgInvitations.js';
export * as orgInvitations from './orgInvitations.js';
export * from './orgDomains.js';
export * as orgDomains from './orgDomains.js';
export * from './samlConnections.js';
export * as samlConnections from './samlConnections.js';
export * from './scimDirectory.js';
export * as scimDirectory from './scimDirectory.js';
export * from './scimTokens.js';
export * as scimTokens from './scimTokens.js';
export * from './managedAccounts.js';
export * as managedAccounts from './managedAccounts.js';

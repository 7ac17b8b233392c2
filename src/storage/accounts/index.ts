// storage/accounts/'s one door (issue 73): nothing outside storage/ imports past it. Each file of the
// floor is exported by name and as a namespace (`users.findById`); a new file gets its two lines here.
// Repositories of the account aggregate: users and what hangs from a user's row (identities,
// passkeys, factors, sessions, refresh and email tokens), the operators' listing, imports and the
// imported hashes' costs, and the purge of expired single-use rows.
export * from './users.js';
export * as users from './users.js';
export * from './identities.js';
export * as identities from './identities.js';
export * from './passkeys.js';
export * as passkeys from './passkeys.js';
export * from './mfa.js';
export * as mfa from './mfa.js';
export * from './sessions.js';
export * as sessions from './sessions.js';
export * from './refreshTokens.js';
export * as refreshTokens from './refreshTokens.js';
export * from './emailTokens.js';
export * as emailTokens from './emailTokens.js';
export * from './userList.js';
export * as userList from './userList.js';
export * from './importedHashCosts.js';
export * as importedHashCosts from './importedHashCosts.js';
export * from './imports.js';
export * as imports from './imports.js';
export * from './expiredRows.js';
export * as expiredRows from './expiredRows.js';

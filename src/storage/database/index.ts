// storage/database/'s one door (issue 73): nothing outside storage/ imports past it. Each file of the
// floor is exported by name and as a namespace (`users.findById`); a new file gets its two lines here.
// The bottom floor: the connection (one Database over pg or PGlite, its hosts, the embedded data
// directory's lock, waiting for Postgres at start), the migrations and the embedded backup, and
// what the repositories share to build SQL (listing.ts), keep shared secrets (secrets.ts) and write
// counts once a second off the request path (batchedWrites.ts).
export * from './db.js';
export * as db from './db.js';
export * from './failures.js';
export * as failures from './failures.js';
export * from './pgHosts.js';
export * as pgHosts from './pgHosts.js';
export * from './dirLock.js';
export * as dirLock from './dirLock.js';
export * from './startWait.js';
export * as startWait from './startWait.js';
export * from './migrations.js';
export * as migrations from './migrations.js';
export * from './backup.js';
export * as backup from './backup.js';
export * from './listing.js';
export * as listing from './listing.js';
export * from './secrets.js';
export * as secrets from './secrets.js';
export * from './batchedWrites.js';
export * as batchedWrites from './batchedWrites.js';

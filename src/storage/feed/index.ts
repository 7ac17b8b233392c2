// storage/feed/'s one door (issue 73): nothing outside storage/ imports past it. Each file of the
// floor is exported by name and as a namespace (`users.findById`); a new file gets its two lines here.
// The change feed (LISTEN/NOTIFY: its connection, heartbeat and typed events) and the caches it
// keeps fresh on every instance, on one shared base: users and keys, memberships.
export * from './changeFeed.js';
export * as changeFeed from './changeFeed.js';
export * from './feedCache.js';
export * as feedCache from './feedCache.js';
export * from './identityCache.js';
export * as identityCache from './identityCache.js';
export * from './membershipCache.js';
export * as membershipCache from './membershipCache.js';

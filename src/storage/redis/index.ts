// storage/redis/'s one door (issue 73): nothing outside storage/ imports past it. Each file of the
// floor is exported by name and as a namespace (`users.findById`); a new file gets its two lines here.
// Redis: the client (a URL, a Sentinel group or a Cluster), its breaker, and the limiters' Lua.
export * from './client.js';
export * as client from './client.js';
export * from './breaker.js';
export * as breaker from './breaker.js';
export * from './scripts.js';
export * as scripts from './scripts.js';

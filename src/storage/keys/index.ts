// storage/keys/'s one door (issue 73): nothing outside storage/ imports past it. Each file of the
// floor is exported by name and as a namespace (`users.findById`); a new file gets its two lines here.
// The API keys' tables, personal and organizations' (read by keys/ alone, and by the feed's identity cache).
export * from './apiKeys.js';
export * as apiKeys from './apiKeys.js';
export * from './orgApiKeys.js';
export * as orgApiKeys from './orgApiKeys.js';

// storage/operators/'s one door (issue 73): nothing outside storage/ imports past it. Each file of the
// floor is exported by name and as a namespace (`users.findById`); a new file gets its two lines here.
// The operators: accounts and TOTP, the console's sessions (in memory), the console's overview.
export * from './operators.js';
export * as operators from './operators.js';
export * from './operatorTotp.js';
export * as operatorTotp from './operatorTotp.js';
export * from './consoleStore.js';
export * as consoleStore from './consoleStore.js';
export * from './overview.js';
export * as overview from './overview.js';

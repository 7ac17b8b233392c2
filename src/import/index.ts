// Moving in (CONTRACT §27): accounts and API keys from the system a product already has. The one
// door of the room: the CLI (cli/import.ts) and the admin API (admin/imports.ts) come in here.
// formats.ts reads the files, rows.ts checks each account (its hash by the login's own parser),
// firebaseHash.ts joins Firebase's hash parts,
// users.ts and keys.ts write in batches through storage/accounts/imports.ts.
export { FORMATS, ImportFileError, readUsers, type Format, type ReadOptions } from './formats.js';
export { firebaseHash, standardBase64, type FirebaseHashConfig } from './firebaseHash.js';
export { importKeys, type KeyImportRun } from './keys.js';
export { BATCH_SIZE, emptyReport, importUsers, type ImportReport, type ImportRun, type Refusal } from './users.js';
export type { ImportRow, Parsed } from './rows.js';

// Moving in (CONTRACT §27): accounts and API keys from the system a product already has. The one
// door of the room: the CLI (cli/import.ts) and the admin API (admin/importUsers.ts) come in here.
// formats.ts reads the files, rows.ts checks each account, hashShapes.ts knows the hash formats,
// users.ts and keys.ts write in batches through storage/imports.ts.
export { FORMATS, ImportFileError, readUsers, type Format, type ReadOptions } from './formats.js';
export { firebaseHash, hashFormat, unpadded, type FirebaseHashConfig } from './hashShapes.js';
export { importKeys, type KeyImportRun } from './keys.js';
export { BATCH_SIZE, emptyReport, importUsers, type ImportReport, type ImportRun, type Refusal } from './users.js';
export type { ImportRow, Parsed } from './rows.js';

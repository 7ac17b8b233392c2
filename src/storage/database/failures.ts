// What a database error means for the caller: the server not there or not usable (503, the
// connection discarded), a value Postgres refused (the input's fault), or a COMMIT whose outcome
// nobody can know (CONTRACT §32).
import { StorageUnavailableError } from '../../errors/index.js';

/**
 * A COMMIT was sent and its answer lost (the connection died, or gave no answer in time): the
 * transaction may have committed or not, and nobody can tell from here. Answered 503 like any
 * other loss of the database; callers that hand something back on failure must not (it may have
 * been taken), and counted in /metrics and the log (CONTRACT §32).
 */
export class CommitInDoubtError extends StorageUnavailableError {
  constructor(cause: unknown) {
    super(cause);
    this.name = 'CommitInDoubtError';
  }
}

// SQLSTATE classes that mean "the server is not there or not usable", not "your query is wrong".
// 57014: a statement Postgres cancelled, our statement_timeout (db.ts) or an operator's cancel.
// 25006 (read_only_sql_transaction): the host was a primary and is now a standby, or a proxy sent
// the connection to one (CONTRACT §32); 57P01/57P03 (admin_shutdown, cannot_connect_now): a
// primary being shut down or demoted. Each discards its connection (db.ts) and answers 503.
const UNAVAILABLE_SQLSTATE = /^(08|53|57P0[1-4]|57014|58|25006$)/;
const UNAVAILABLE_NODE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN']);

export function isUnavailable(err: unknown): boolean {
  if (err instanceof StorageUnavailableError) return true;
  const e = err as { code?: unknown; message?: unknown } | null;
  if (!e) return false;
  if (typeof e.code === 'string' && (UNAVAILABLE_SQLSTATE.test(e.code) || UNAVAILABLE_NODE_CODES.has(e.code))) return true;
  const message = typeof e.message === 'string' ? e.message : '';
  // 'Query read timeout': node-postgres gave up waiting for an answer (db.ts' query_timeout).
  return /Query read timeout|Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|connection is closed|Cannot use a pool after calling end/i.test(message);
}

// Class 22, data exception (NUL in text 22021, in jsonb 22P05, text that is no number 22P02, a
// number out of range 22003), and 54000 (a value too large for its index): the input, not the
// database, is at fault.
const INPUT_SQLSTATE = /^(22|54000$)/;

/**
 * A statement Postgres (or PGlite) refused because of a value it was given. The gateway's own
 * endpoints refuse such values before (listener/inputs.ts): this is the net for one missed.
 */
export function isRefusedInput(err: unknown): boolean {
  const e = err as { code?: unknown; severity?: unknown } | null;
  return !!e && typeof e.code === 'string' && typeof e.severity === 'string' && INPUT_SQLSTATE.test(e.code);
}

/** `err` thrown again, as StorageUnavailableError when it says the database is not there. */
export function translate(err: unknown): never {
  // One already (pgHosts.ts' read-only host, no host found) is thrown as it is: wrapped again, its
  // message would say "storage unavailable: storage unavailable: …" in every log line.
  throw isUnavailable(err) && !(err instanceof StorageUnavailableError) ? new StorageUnavailableError(err) : err;
}

// A warning on COMMIT (SQLSTATE class 01, or 57P01 as a warning) is Postgres saying it stopped
// waiting for a synchronous standby: a cancel (pg_cancel_backend, 01000) or a shutdown (57P01).
// The transaction is committed on this host only, and lost if a standby is promoted.
export const UNREPLICATED_COMMIT_SQLSTATE = /^(01|57P01$)/;

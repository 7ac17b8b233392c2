// A database that fails on the test's word, as a lost connection or a bug makes a statement fail:
// the gateway's own Database object, patched in place until the returned function restores it.
import type { Database } from '../../src/storage/database/index.js';

/**
 * Until the returned function is called, each statement of `db` whose text matches `statements`
 * fails with `error()`; with `transactions`, every transaction is refused too.
 */
export function failingStatements(db: Database, statements: RegExp, error: () => Error, options: { transactions?: boolean } = {}): () => void {
  const { query, transaction } = db;
  db.query = ((text: string, ...rest: unknown[]) =>
    (statements.test(text) ? Promise.reject(error()) : (query as (...args: unknown[]) => unknown).call(db, text, ...rest))) as typeof db.query;
  if (options.transactions) db.transaction = (() => Promise.reject(error())) as typeof db.transaction;
  return () => Object.assign(db, { query, transaction });
}

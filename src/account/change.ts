// One recipe for a change of an account (docs/architecture.md, "where a new piece goes"): one
// function opens the transaction and locks the user's row before anything hanging from it
// (sessions, links, factors, keys, the plan), then hands the change its writers: the transaction,
// the time, the locked row, the audit row and the webhook event, both in the change's
// transaction, so neither outlives a change rolled back nor goes missing from one that commits.
// One order everywhere: two changes of one account wait for each other rather than deadlock, and
// a password change cannot miss a refresh running beside it. This file alone calls
// users.lockUser (test/architecture/accountChange.test.ts); orgs/change.ts builds on it (the
// user's row, then the organization's).
import type { Audit, AuditEvent, AuditType } from '../audit.js';
import type { HookFacts } from '../hooks/fromAudit.js';
import type { Database, Queryable } from '../storage/database/index.js';
import { type Client, users } from '../storage/accounts/index.js';
import type { Events } from '../webhooks/emitter.js';

/** Who makes a change, as its audit rows say: the user from a client, an operator, the gateway's own rule. */
export type Author = Pick<AuditEvent, 'actor' | 'actorId' | 'operatorEmail' | 'ip' | 'userAgent' | 'via'>;

/** The user changing their own account from `client`. */
export const byUser = (client: Client): Author => ({ actor: 'user', ...client });

export interface AccountChangeDeps {
  clock: () => Date;
  /** The audit log, for a change that records itself (record()). */
  audit?: Pick<Audit, 'record'>;
  /** The webhook outbox, for a change that tells the user's endpoint (event()). */
  events?: Events;
}

/** Which account, how held, by whom. */
export interface AccountLock {
  userId: number;
  /**
   * 'update' for a change of the row or of what hangs from it; 'share' for a change that needs the
   * row to stay as it was read (a sign-in: a password change or a deactivation waits for it).
   */
  mode: 'share' | 'update';
  /** The author of the change's audit rows; without it (or without deps.audit), record() is not to be called. */
  by?: Author;
}

/** What a change of an account is handed, after the lock. */
export interface AccountWriters {
  tx: Queryable;
  /** The time of the change, read once the row is held. */
  now: Date;
  /** The user's row, locked. */
  user: users.UserWithHash;
  /** The change's audit row about this user (and the operator hooks it stands for), in its transaction. */
  record(type: AuditType, data?: Record<string, unknown>, facts?: HookFacts): Promise<void>;
  /** The change's webhook event to the user's endpoint, stored in the outbox with the change. */
  event(type: string, data: Record<string, unknown>): Promise<void>;
}

/**
 * The account's row locked in `tx`, and the writers of a change of it; undefined when there is no
 * such user (deleted meanwhile: what that means is the caller's to say). For a transaction that
 * must first lock the row that names the user (an mfa_token, a TOTP being confirmed, a
 * subscription); any other change goes through changeAccount().
 */
export async function lockAccount(tx: Queryable, deps: AccountChangeDeps, lock: AccountLock): Promise<AccountWriters | undefined> {
  const user = await users.lockUser(tx, lock.userId, lock.mode);
  if (!user) return undefined;
  const record = (type: AuditType, data?: Record<string, unknown>, facts?: HookFacts) => {
    if (!lock.by || !deps.audit) throw new Error(`account change recorded ${type} without an author or the audit log`);
    return deps.audit.record({ type, ...lock.by, userId: user.id, ...(data && { data }) }, tx, facts);
  };
  const event = (type: string, data: Record<string, unknown>) => {
    if (!deps.events) throw new Error(`account change emitted ${type} without the webhook outbox`);
    return deps.events.emit(user.id, type, data, tx);
  };
  return { tx, now: deps.clock(), user, record, event };
}

/**
 * A change of one account, in its own transaction, the user's row locked first; what `change`
 * returns, or undefined when there is no such user (the change did not run).
 */
export function changeAccount<T>(deps: AccountChangeDeps & { db: Database }, lock: AccountLock, change: (w: AccountWriters) => Promise<T>): Promise<T | undefined> {
  return deps.db.transaction(async (tx) => {
    const writers = await lockAccount(tx, deps, lock);
    return writers && change(writers);
  });
}

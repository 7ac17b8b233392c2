// The audit log (CONTRACT §17): who did what to which account, and from where. A record of a
// change goes into the change's own transaction (pass `tx`): it commits or rolls back with it, so
// an event is never lost while its change stands and never kept for a change undone. An event
// with no change (a failed login) is written alone, and its failure never changes the answer.
// Rows older than audit.retention are purged hourly by every instance (housekeeping.ts).
import type { Logger } from 'pino';
import { failureLog, type FailureLog } from './telemetry/logThrottle.js';
import { insertAuditEvent, purgeAuditEvents, type AuditEvent } from './storage/events/index.js';
import type { Database, Queryable } from './storage/database/index.js';
import { hooksOfAudit, type HookFacts } from './hooks/fromAudit.js';
import type { HookWriter } from './hooks/hooks.js';

export type { AuditActor, AuditEvent, AuditType } from './storage/events/index.js';

export interface Audit {
  /**
   * In `tx` when the event records a change made there. Rejects when it cannot be stored (the change then rolls back).
   * With `hooks:` configured, the operator hooks the change stands for are written beside it (hooks/fromAudit.ts);
   * `facts` is what they need that the audit row does not keep.
   */
  record(event: AuditEvent, tx?: Queryable, facts?: HookFacts): Promise<void>;
  /** For an event with no change: a failure to store it is logged, never thrown. */
  note(event: AuditEvent): Promise<void>;
}

export interface AuditLogDeps {
  db: Database;
  clock: () => Date;
  log: Logger;
  retentionMs: number;
  /** Operator hooks (CONTRACT §24), when hooks: is configured. */
  hooks?: HookWriter;
}

/**
 * The audit row of a change and, with `hooks`, the operator hooks it stands for, in `q` (the
 * change's transaction): what AuditLog.record does, and what the CLI on direct storage calls.
 */
export async function recordChange(q: Queryable, event: AuditEvent, at: Date, hooks?: HookWriter, facts?: HookFacts): Promise<void> {
  await insertAuditEvent(q, event, at);
  if (hooks?.active) await hooks.write(await hooksOfAudit(event, q, facts), q);
}

export class AuditLog implements Audit {
  private readonly failing: FailureLog;

  constructor(private readonly deps: AuditLogDeps) {
    this.failing = failureLog(deps.log, 'audit events could not be stored');
  }

  record(event: AuditEvent, tx?: Queryable, facts?: HookFacts): Promise<void> {
    return recordChange(tx ?? this.deps.db, event, this.deps.clock(), this.deps.hooks, facts);
  }

  async note(event: AuditEvent): Promise<void> {
    try {
      await this.record(event);
      this.failing.recovered();
    } catch (err) {
      this.failing.failed(err, { type: event.type });
    }
  }

  /** Removes what audit.retention no longer keeps (hourly, by housekeeping.ts); how many rows went. */
  async purge(): Promise<number> {
    try {
      const n = await purgeAuditEvents(this.deps.db, new Date(this.deps.clock().getTime() - this.deps.retentionMs));
      if (n) this.deps.log.info({ purged: n }, 'audit events past their retention purged');
      return n;
    } catch (err) {
      this.deps.log.warn({ err }, 'audit events could not be purged');
      return 0;
    }
  }
}

// Events for the operator's backend (CONTRACT §24, `hooks:`): written into the webhook outbox
// (010, 030) in the transaction of the change they tell of, so a change rolled back sends nothing
// and one that commits is delivered at least once by whichever instance claims it (outbox.ts),
// in order per subject (a user, an organization). Nothing here waits on the receiver.
import { randomBytes } from 'node:crypto';
import type { HookEventType, HooksConfig } from '../config/schema/hooks.js';
import type { Database, Queryable } from '../storage/database/index.js';
import { insertHookDelivery } from '../storage/events/index.js';
import { servedTraceparent } from '../telemetry/tracing.js';

export interface HookEvent {
  type: HookEventType;
  /** What the receiver's order is kept for: 'user:<id>' or 'org:<id>'. */
  subject: string;
  data: Record<string, unknown>;
}

export const userSubject = (id: number) => `user:${id}`;
export const orgSubject = (id: number) => `org:${id}`;

export interface HookWriterDeps {
  db: Database;
  /** hooks: as it is now (a running instance's live configuration: SIGHUP changes it); undefined: none are written. */
  config: () => HooksConfig | undefined;
  /** webhooks.retries: a hook message is attempted retries + 1 times at most. */
  retries: number;
  clock: () => Date;
}

/** Writes the events hooks.events asks for; a message per event, its id the webhook-id of every attempt. */
export class HookWriter {
  constructor(private readonly deps: HookWriterDeps) {}

  /** Whether hooks: is configured now: without it, nothing is read or written for hooks. */
  get active(): boolean {
    return this.deps.config() !== undefined;
  }

  wants(type: HookEventType): boolean {
    return this.deps.config()?.events.includes(type) ?? false;
  }

  /** In `tx`: the events commit, or not, with the change. Rejects when they cannot be stored (the change rolls back). */
  async write(events: readonly HookEvent[], tx?: Queryable): Promise<void> {
    const timestamp = this.deps.clock().toISOString();
    for (const event of events) {
      if (!this.wants(event.type)) continue;
      await insertHookDelivery(tx ?? this.deps.db, {
        id: `msg_${randomBytes(16).toString('base64url')}`,
        subject: event.subject,
        type: event.type,
        body: JSON.stringify({ type: event.type, timestamp, data: event.data }),
        maxAttempts: this.deps.retries + 1,
        traceparent: servedTraceparent() ?? null,
      });
    }
  }
}

/** The writer `config` asks for, if any (hooks: configured). */
export function hookWriterOf(config: { hooks?: HooksConfig; webhooks: { retries: number } }, db: Database, clock: () => Date = () => new Date()): HookWriter | undefined {
  const { hooks } = config;
  return hooks && new HookWriter({ db, config: () => hooks, retries: config.webhooks.retries, clock });
}

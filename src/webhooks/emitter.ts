// Emitting a webhook event (CONTRACT §5, §9): the message is stored in Postgres (the outbox,
// migration 010) before the response that caused it, in the caller's transaction when there is
// one, and emit() returns: no request waits on a receiver. The outbox worker (outbox.ts) delivers it.
import type { Config } from '../config/schema.js';
import type { Database, Queryable } from '../storage/database/index.js';
import { insertDelivery } from '../storage/events/index.js';
import { servedTraceparent } from '../telemetry/tracing.js';
import { newMessage } from './message.js';

/** A message body larger than this is refused by emit() (POST /admin/v1/alerts checks first). */
export const MAX_MESSAGE_BYTES = 64 * 1024;

/** Webhook events: stored for delivery before the caller answers; delivered off the request. */
export interface Events {
  /**
   * Stores the event for delivery. With `tx`, in that transaction: the event commits, or not,
   * with the change that caused it. Rejects when it cannot be stored (the caller answers 503).
   */
  emit(userId: number, type: string, data: Record<string, unknown>, tx?: Queryable): Promise<void>;
}

export interface EmitterDeps {
  db: Database;
  config: Pick<Config['webhooks'], 'retries'>;
  clock: () => Date;
}

export class OutboxEmitter implements Events {
  constructor(private readonly deps: EmitterDeps) {}

  async emit(userId: number, type: string, data: Record<string, unknown>, tx?: Queryable): Promise<void> {
    const message = newMessage(userId, type, data, this.deps.clock());
    const bytes = Buffer.byteLength(message.body);
    if (bytes > MAX_MESSAGE_BYTES) throw new RangeError(`webhook message of ${bytes} bytes, over the ${MAX_MESSAGE_BYTES}-byte limit`);
    // The request's trace, when it is traced: each delivery attempt continues it.
    await insertDelivery(tx ?? this.deps.db, { id: message.id, userId, type, body: message.body, maxAttempts: this.deps.config.retries + 1, traceparent: servedTraceparent() ?? null });
  }
}

// Metered usage (CONTRACT §23, billing.stripe.meter): the uses served past a plan's included monthly
// allowance are reported to a Stripe Billing meter, off the request path, through the durable
// outbox of webhooks (webhooks/outbox.ts: claims, leases, retries, at least once). Billed = served −
// refunded: each pass takes the served-use records (storage/usage/meteredUses.ts) counted long enough ago
// that no refund can come for them (twice the longest upstream timeout, plus a margin), per owner
// and month, and in one transaction queues one meter event per group and marks the records with it.
// The event's identifier is derived from the records (owner, month, first and last record), and
// is the outbox message's id: a retry, a crash between Stripe's answer and the outbox's mark, or
// another instance resending it sends the same identifier, and Stripe keeps one event per
// identifier. Records are taken FOR UPDATE SKIP LOCKED, so two instances never put a record in two
// events. A Stripe outage delays the events (retried with backoff for about a day), never loses
// them, and never touches a request. Without a Stripe customer for the owner, records wait.
import type { Logger } from 'pino';
import type { Database } from '../storage/database/index.js';
import { markReported, takeSettled } from '../storage/usage/index.js';
import { insertDelivery, type ClaimedDelivery } from '../storage/events/index.js';
import type { MeterAttempt, MeterEventParams, StripeGateway } from './stripe.js';

/** The outbox message type of a meter event (webhook_deliveries.type). */
export const METER_EVENT_TYPE = 'stripe.meter_event';
/** How often each instance looks for settled records: with the settling time, under the contract's two minutes. */
const REPORT_EVERY_MS = 15_000;
/** Records taken per pass. */
const BATCH = 5_000;
/** Attempts of a meter event: with the outbox's backoff (capped at a minute), about a day of Stripe outage. */
const METER_ATTEMPTS = 1_500;
/** A use's refund is decided within its upstream call; past it, the record is final. */
const SETTLE_MARGIN_MS = 2_000;

export interface MeterReporterDeps {
  db: Database;
  /** billing.stripe.meter. */
  eventName: string;
  /** The longest upstream timeout of the live configuration (ms). */
  longestUpstreamMs: () => number;
  log: Logger;
}

export class MeterReporter {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private waiting = false;
  /**
   * When a pass last finished (ms since the epoch), its start until one has:
   * gateway_billing_meter_last_report_timestamp_seconds, which the lag alert reads, so that a
   * reporter that never gets through is late too.
   */
  lastPassAt = Date.now();

  constructor(private readonly deps: MeterReporterDeps) {}

  start(): void {
    this.timer = setInterval(() => void this.report(), REPORT_EVERY_MS);
    this.timer.unref();
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.running;
  }

  /** One pass (or the one under way). Never throws; a failed pass is tried again at the next. */
  report(): Promise<void> {
    this.running ??= this.pass().finally(() => { this.running = undefined; });
    return this.running;
  }

  private async pass(): Promise<void> {
    const settleMs = 2 * this.deps.longestUpstreamMs() + SETTLE_MARGIN_MS;
    try {
      await this.deps.db.transaction(async (tx) => {
        for (const batch of await takeSettled(tx, settleMs, BATCH)) {
          if (batch.value > 0 && !batch.customer) {
            if (!this.waiting) this.deps.log.warn({ userId: batch.userId, orgId: batch.orgId }, 'metered usage: an owner has uses past its allowance but no Stripe customer; they wait');
            this.waiting = true;
            continue;
          }
          if (batch.value > 0) {
            const body: MeterEventParams = {
              event_name: this.deps.eventName, identifier: batch.identifier, timestamp: batch.timestamp,
              payload: { stripe_customer_id: batch.customer!, value: String(batch.value) },
            };
            await insertDelivery(tx, { id: batch.identifier, userId: batch.userId, type: METER_EVENT_TYPE, body: JSON.stringify(body), maxAttempts: METER_ATTEMPTS, traceparent: null });
          }
          // Every use of the group refunded: marked all the same, nothing to bill.
          await markReported(tx, batch.ids, batch.value > 0 ? batch.identifier : 'refunded');
        }
      });
      this.lastPassAt = Date.now();
    } catch (err) {
      this.deps.log.warn({ err }, 'metered usage: records could not be taken; tried again at the next pass');
    }
  }
}

/** The outbox's attempt of a meter event (webhooks/outbox.ts handlers): the same body, so the same identifier, every time. */
export function meterEventSender(stripe: Pick<StripeGateway, 'meterEvent'>) {
  return async (job: ClaimedDelivery): Promise<MeterAttempt> => stripe.meterEvent(JSON.parse(job.body) as MeterEventParams);
}

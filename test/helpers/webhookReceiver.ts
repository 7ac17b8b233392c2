// A real HTTPS webhook receiver for delivery tests, presenting the run's webhook certificate
// (globalSetup.ts; every test gateway trusts it through webhooks.caFile, so any gateway's delivery
// worker can deliver any test's message), and what the delivery suites do with it: start a gateway,
// register a receiver, verify what it received, read the outbox rows.
import { readFileSync } from 'node:fs';
import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
import https from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { expect } from 'vitest';
import type { LookupAll } from '../../src/webhooks/ssrf.js';
import {
  bearer, sql, startTestGateway, testConfig, throwawayDatabase, webhookCertificate, type TestGateway, type TestUser, type ThrowawayDatabase,
} from './gateway.js';

/** What a receiver presents: the run's webhook certificate (valid for 127.0.0.1, localhost, hooks.rebind.test). */
export interface ReceiverCertificate {
  cert: string;
  key: string;
}

let shared: ReceiverCertificate | undefined;
export function receiverCertificate(): ReceiverCertificate {
  shared ??= { cert: readFileSync(webhookCertificate.certFile, 'utf8'), key: readFileSync(webhookCertificate.keyFile, 'utf8') };
  return shared;
}

export interface Delivery {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
  json: { type: string; timestamp: string; data: Record<string, unknown> };
  /** the status the receiver answered (once it did), or 'hang' */
  answer?: number | 'hang';
}

/**
 * What the receiver answers to the n-th request (0-based): a status, a status after a delay, or
 * 'hang' (never answers).
 */
export type Behaviour = (delivery: Delivery, n: number) => number | 'hang' | { status: number; delayMs: number };

export interface Receiver {
  port: number;
  /** https://127.0.0.1:PORT/hook */
  url: string;
  deliveries: Delivery[];
  /** requests received and not answered (hanging) */
  hanging: number;
  /** requests that arrived while another one with the same webhook-id was still unanswered */
  overlaps: number;
  behaviour: Behaviour;
  ofType(type: string): Delivery[];
  /** the deliveries of one webhook-id */
  withId(id: string): Delivery[];
  close(): Promise<void>;
}

export async function startReceiver(cert: ReceiverCertificate = receiverCertificate(), behaviour: Behaviour = () => 200): Promise<Receiver> {
  const sockets = new Set<Socket>();
  const held: ServerResponse[] = [];
  const open = new Map<string, number>();
  const receiver: Receiver = {
    port: 0, url: '', deliveries: [], hanging: 0, overlaps: 0, behaviour,
    ofType: (type) => receiver.deliveries.filter((d) => d.json?.type === type),
    withId: (id) => receiver.deliveries.filter((d) => d.headers['webhook-id'] === id),
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  const server = https.createServer({ key: cert.key, cert: cert.cert }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      let json: Delivery['json'];
      try { json = JSON.parse(body); } catch { json = undefined as never; }
      const delivery: Delivery = { path: req.url ?? '/', headers: req.headers, body, json };
      const n = receiver.deliveries.push(delivery) - 1;
      const id = String(req.headers['webhook-id']);
      if (open.get(id)) receiver.overlaps++;
      open.set(id, (open.get(id) ?? 0) + 1);
      res.on('close', () => { open.set(id, open.get(id)! - 1); });
      const answer = receiver.behaviour(delivery, n);
      if (answer === 'hang') {
        delivery.answer = 'hang';
        receiver.hanging++;
        held.push(res);
        res.on('close', () => { receiver.hanging--; });
        return;
      }
      const { status, delayMs } = typeof answer === 'number' ? { status: answer, delayMs: 0 } : answer;
      setTimeout(() => {
        delivery.answer = status;
        res.writeHead(status, { 'content-type': 'text/plain' }).end('ok');
      }, delayMs);
    });
  });
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  server.on('secureConnection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  receiver.port = (server.address() as AddressInfo).port;
  receiver.url = `https://127.0.0.1:${receiver.port}/hook`;
  return receiver;
}

/** Registers `url` as the user's webhook through `on`; returns its signing secret. */
export async function registerWebhook(on: TestGateway, user: TestUser, url: string): Promise<string> {
  const res = await on.post('/api/v1/user/webhook', { url }, { headers: bearer(user.access) });
  expect(res.status).toBe(201);
  return res.json.secret as string;
}

/** Verifies a delivery like a receiver would, with the independent `standardwebhooks`; returns the payload. */
export function verified(secret: string, d: Delivery): unknown {
  return new Webhook(secret).verify(d.body, {
    'webhook-id': String(d.headers['webhook-id']),
    'webhook-timestamp': String(d.headers['webhook-timestamp']),
    'webhook-signature': String(d.headers['webhook-signature']),
  });
}

/** Waits for the first delivery of event `type` at `path` and returns its payload, verified with `secret`. */
export async function verifiedEvent(receiver: Receiver, path: string, type: string, secret: string): Promise<unknown> {
  const find = () => receiver.deliveries.find((d) => d.path === path && (d.json as { type?: string }).type === type);
  await expect.poll(() => find() !== undefined).toBe(true);
  return verified(secret, find()!);
}

/** An instance's delivery attempts so far, by outcome (gateway_webhook_deliveries_total), of one kind (webhook, hook, billing) or all. */
export async function outcomes(
  metrics: { webhookDeliveries: { get(): Promise<{ values: Array<{ labels: Record<string, unknown>; value: number }> }> } }, kind?: string,
): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const v of (await metrics.webhookDeliveries.get()).values) {
    if (kind === undefined || v.labels.kind === kind) out[String(v.labels.outcome)] = (out[String(v.labels.outcome)] ?? 0) + v.value;
  }
  return out;
}

export interface OutboxRow {
  id: string;
  type: string;
  status: 'pending' | 'delivered' | 'failed' | 'skipped';
  attempts: number;
  last_error: string | null;
}

/** A user's messages in the outbox (webhook_deliveries), oldest first; `query` for a throwawayDatabase(). */
export async function outboxRows(userId: number, query: typeof sql = sql): Promise<OutboxRow[]> {
  return query<OutboxRow>('SELECT id, type, status, attempts, last_error FROM webhook_deliveries WHERE user_id = $1 ORDER BY created_at, id', [userId]);
}

/** Waits until none of the user's messages is pending; returns them all. */
export async function settledRows(userId: number, query: typeof sql = sql, timeoutMs = 10_000): Promise<OutboxRow[]> {
  let rows: OutboxRow[] = [];
  const start = Date.now();
  while (Date.now() - start < timeoutMs) {
    rows = await outboxRows(userId, query);
    if (rows.length && rows.every((r) => r.status !== 'pending')) return rows;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`messages still pending after ${timeoutMs} ms: ${JSON.stringify(rows)}`);
}

export interface DeliverySetup {
  /** Delivers to receivers: private addresses allowed, 2 retries, 5 s timeout. */
  gw: TestGateway;
  /** Statements on the setup's database, the only one its messages are in. */
  sql: ThrowawayDatabase['sql'];
  /** A receiver, closed with the setup. */
  receiver(behaviour?: Behaviour): Promise<Receiver>;
  close(): Promise<void>;
}

/**
 * What the delivery suites share: a gateway on a database of its own, and receivers. Their tests
 * count attempts and wait for them: on the run's shared database another file's gateway may claim
 * a message and be killed holding it, and the attempt then waits for its lease to lapse (seen on
 * CI: a third attempt not made within 10 s).
 */
export async function startDeliverySetup(): Promise<DeliverySetup> {
  const own = await startIsolatedDeliveries({ retries: 2, timeout: '5s' });
  return { gw: own.gateways[0]!, sql: own.db.sql.bind(own.db), receiver: own.receiver, close: own.close };
}

export interface IsolatedDeliveries {
  db: ThrowawayDatabase;
  /** the only instances that can attempt this database's messages */
  gateways: TestGateway[];
  /** A receiver, closed with the rest. */
  receiver(behaviour?: Behaviour): Promise<Receiver>;
  close(): Promise<void>;
}

/**
 * Gateways on a database of their own, for webhook settings the other test files' messages must
 * not meet (private addresses refused, `lookup`: how hosts resolve, the instance's test seam), and
 * for tests that must know which instances may attempt a message: a receiver that hangs on
 * purpose, for one, would otherwise get a second attempt whenever the shared database's instance
 * that held the first one closes and hands it back.
 */
export async function startIsolatedDeliveries(webhooks: Record<string, unknown>, options: { instances?: number; lookup?: LookupAll } = {}): Promise<IsolatedDeliveries> {
  const db = await throwawayDatabase({ migrated: true });
  const receivers: Receiver[] = [];
  const gateways: TestGateway[] = [];
  const close = async () => {
    await Promise.all(gateways.map((gw) => gw.close()));
    await Promise.all(receivers.map((r) => r.close()));
    await db.drop();
  };
  try {
    for (let i = 0; i < (options.instances ?? 1); i++) {
      gateways.push(await startTestGateway(testConfig({ storage: db.storage, webhooks }), { webhookLookup: options.lookup }));
    }
  } catch (err) {
    await close();
    throw err;
  }
  return {
    db, gateways, close,
    async receiver(behaviour) {
      const r = await startReceiver(receiverCertificate(), behaviour);
      receivers.push(r);
      return r;
    },
  };
}

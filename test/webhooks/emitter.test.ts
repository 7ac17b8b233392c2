// The alert webhooks' emitter (src/webhooks/emitter.ts, CONTRACT §5) on a database of its own: a
// message stored in the caller's transaction (rolled back with it) or on its own, retries + 1
// attempts, the served request's traceparent, and a body over 64 KiB refused before anything is
// stored. End to end (delivery, signatures, the outbox): deliveries.*.test.ts.
import { beforeAll, beforeEach, expect, it } from 'vitest';
import type { Database } from '../../src/storage/database/index.js';
import { insertUser } from '../../src/storage/accounts/users.js';
import { MAX_MESSAGE_BYTES, OutboxEmitter } from '../../src/webhooks/emitter.js';
import { describeWithServices } from '../helpers/gateway.js';
import { ownMigratedDatabase } from '../helpers/ownDatabase.js';
import { servedTraces } from '../helpers/servedTrace.js';

const NOW = new Date('2026-11-28T12:00:00.000Z');

interface Row { id: string; user_id: number; type: string; body: string; max_attempts: number; traceparent: string | null; status: string }

describeWithServices('the webhook emitter', () => {
  const own = ownMigratedDatabase();
  let db: Database;
  let userId: number;
  let emitter: OutboxEmitter;
  beforeAll(async () => {
    db = own();
    userId = (await insertUser(db, 'emitter@example.test', null))!;
    emitter = new OutboxEmitter({ db, config: { retries: 3 }, clock: () => NOW });
  });
  beforeEach(async () => { await db.query('DELETE FROM webhook_deliveries'); });

  const traces = servedTraces();

  const rows = () => db.query<Row>('SELECT id, user_id, type, body, max_attempts, traceparent, status FROM webhook_deliveries ORDER BY created_at, type');

  it('stores the message for the user, stamped by the clock, for retries + 1 attempts', async () => {
    await emitter.emit(userId, 'quota.warning', { used: 80 });
    const [row] = await rows();
    expect(row).toMatchObject({ user_id: userId, type: 'quota.warning', max_attempts: 4, traceparent: null, status: 'pending' });
    expect(JSON.parse(row!.body)).toEqual({ type: 'quota.warning', timestamp: '2026-11-28T12:00:00.000Z', data: { used: 80 } });
    expect(row!.id).toMatch(/^msg_[A-Za-z0-9_-]{22}$/);
  });

  it('in the caller\'s transaction: rolled back with it, committed with it', async () => {
    await db.transaction(async (tx) => {
      await emitter.emit(userId, 'rolled.back', {}, tx);
      throw new Error('the change fails');
    }).catch(() => undefined);
    expect(await rows()).toEqual([]);
    await db.transaction((tx) => emitter.emit(userId, 'committed', {}, tx));
    expect((await rows()).map((r) => r.type)).toEqual(['committed']);
  });

  it('refuses a body over 64 KiB and stores nothing; takes one of exactly 64 KiB', async () => {
    // The body around `data`: {"type":"t","timestamp":"2026-11-28T12:00:00.000Z","data":{"x":"…"}}
    const around = JSON.stringify({ type: 't', timestamp: NOW.toISOString(), data: { x: '' } }).length;
    const filler = (bytes: number) => ({ x: 'a'.repeat(bytes - around) });
    await expect(emitter.emit(userId, 't', filler(MAX_MESSAGE_BYTES + 1))).rejects.toThrow(new RangeError(`webhook message of ${MAX_MESSAGE_BYTES + 1} bytes, over the 65536-byte limit`));
    expect(await rows()).toEqual([]);
    await emitter.emit(userId, 't', filler(MAX_MESSAGE_BYTES));
    expect((await rows()).map((r) => Buffer.byteLength(r.body))).toEqual([65536]);
  });

  it('keeps the traceparent of the request it is emitted for, none outside one', async () => {
    const { traceparent } = await traces.within(() => emitter.emit(userId, 'traced', {}));
    await emitter.emit(userId, 'untraced', {});
    expect((await rows()).map((r) => [r.type, r.traceparent])).toEqual([['traced', traceparent], ['untraced', null]]);
  });
});

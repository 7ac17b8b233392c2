// The hook writer (src/hooks/hooks.ts, CONTRACT §24) on a database of its own: a message per event
// that hooks.events asks for, none for the others nor without hooks:, each with the clock's time,
// retries + 1 attempts and the served request's traceparent. End to end (delivery, order, the
// changes that write them): hooks*.test.ts.
import { beforeAll, beforeEach, expect, it } from 'vitest';
import type { HooksConfig } from '../../src/config/schema/hooks.js';
import { HookWriter, hookWriterOf, orgSubject, userSubject } from '../../src/hooks/hooks.js';
import type { Database } from '../../src/storage/database/index.js';
import { describeWithServices } from '../helpers/gateway.js';
import { ownMigratedDatabase } from '../helpers/ownDatabase.js';
import { servedTraces } from '../helpers/servedTrace.js';

const NOW = new Date('2026-11-28T12:00:00.000Z');
const hooks = (events: HooksConfig['events']): HooksConfig => ({ url: 'https://backend.example.test/events', secrets: ['whsec_' + 'a'.repeat(32)], allowPrivateNetworks: false, events });

interface Row { id: string; user_id: number | null; subject: string; type: string; body: string; max_attempts: number; traceparent: string | null; status: string }

describeWithServices('the hook writer', () => {
  const own = ownMigratedDatabase();
  let db: Database;
  beforeAll(() => { db = own(); });
  beforeEach(async () => { await db.query('DELETE FROM webhook_deliveries'); });

  const traces = servedTraces();

  const rows = async () => db.query<Row>('SELECT * FROM webhook_deliveries ORDER BY seq');

  it('writes nothing without hooks:, and one message per wanted event with hooks:', async () => {
    expect(hookWriterOf({ webhooks: { retries: 4 } }, db)).toBeUndefined();
    const writer = hookWriterOf({ hooks: hooks(['user.created', 'org.created']), webhooks: { retries: 4 } }, db, () => NOW)!;
    expect(writer.active).toBe(true);
    await writer.write([
      { type: 'user.created', subject: userSubject(7), data: { id: 7 } },
      { type: 'user.deleted', subject: userSubject(7), data: { id: 7 } },
      { type: 'org.created', subject: orgSubject(3), data: { id: 3 } },
    ]);
    const written = await rows();
    expect(written.map((r) => [r.subject, r.type, r.max_attempts, r.user_id, r.traceparent, r.status])).toEqual([
      ['user:7', 'user.created', 5, null, null, 'pending'],
      ['org:3', 'org.created', 5, null, null, 'pending'],
    ]);
    expect(written.map((r) => JSON.parse(r.body))).toEqual([
      { type: 'user.created', timestamp: '2026-11-28T12:00:00.000Z', data: { id: 7 } },
      { type: 'org.created', timestamp: '2026-11-28T12:00:00.000Z', data: { id: 3 } },
    ]);
    // Each message its own webhook-id: msg_ and 16 random bytes.
    expect(written.every((r) => /^msg_[A-Za-z0-9_-]{22}$/.test(r.id))).toBe(true);
    expect(new Set(written.map((r) => r.id)).size).toBe(2);
  });

  it('stamps a message with the time it is written when given no clock (the CLI\'s writer)', async () => {
    const before = Date.now();
    await hookWriterOf({ hooks: hooks(['user.deleted']), webhooks: { retries: 0 } }, db)!.write([{ type: 'user.deleted', subject: userSubject(9), data: {} }]);
    const [row] = await rows();
    const stamped = Date.parse(JSON.parse(row!.body).timestamp);
    expect(stamped).toBeGreaterThanOrEqual(before);
    expect(stamped).toBeLessThanOrEqual(Date.now());
  });

  it('reads hooks: as it is now: none configured, it is inactive, wants nothing and writes nothing', async () => {
    let now: HooksConfig | undefined = hooks(['user.deleted']);
    const writer = new HookWriter({ db, config: () => now, retries: 0, clock: () => NOW });
    expect([writer.active, writer.wants('user.deleted'), writer.wants('user.created')]).toEqual([true, true, false]);
    now = undefined;
    expect([writer.active, writer.wants('user.deleted')]).toEqual([false, false]);
    await writer.write([{ type: 'user.deleted', subject: userSubject(1), data: {} }]);
    expect(await rows()).toEqual([]);
    now = hooks(['user.deleted']);
    await writer.write([{ type: 'user.deleted', subject: userSubject(1), data: {} }]);
    expect((await rows()).map((r) => [r.type, r.max_attempts])).toEqual([['user.deleted', 1]]);
  });

  it('keeps the traceparent of the request it is written for, and none outside one', async () => {
    const writer = new HookWriter({ db, config: () => hooks(['user.created']), retries: 2, clock: () => NOW });
    const { traceparent } = await traces.within(() => writer.write([{ type: 'user.created', subject: userSubject(2), data: {} }]));
    await writer.write([{ type: 'user.created', subject: userSubject(3), data: {} }]);
    expect((await rows()).map((r) => [r.subject, r.traceparent])).toEqual([['user:2', traceparent], ['user:3', null]]);
    expect(traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
  });
});

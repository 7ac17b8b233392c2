// The assertion keys (src/credentials/assertionKeys.ts, assertionKeyring.ts; CONTRACT §3) on a
// database of their own: what assertion_keys holds after the first start and a rotation, which
// public keys an instance publishes and for how long, which key it signs with after a rotation is
// heard, rows deleted by hand, or a failed read. The change feed is a stand-in whose events the test
// fires (storage/feed/changeFeed.ts is tested on its own). Races (two rotations, a rotation or a deletion
// during a load) are forced with locks the test holds, and seen waiting in pg_stat_activity.
import { Writable } from 'node:stream';
import { calculateJwkThumbprint, compactVerify, FlattenedSign, importJWK, type CryptoKey } from 'jose';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, beforeEach, expect, it, vi } from 'vitest';
import { AssertionKeyring, ASSERTION_TTL_SEC, RELOAD_INTERVAL_MS, RETIRED_KEY_PUBLISHED_MS } from '../../src/credentials/assertionKeyring.js';
import { ensureAssertionKeys, generateAssertionKey, loadAssertionKeys, rotateAssertionKeys, type Rotation } from '../../src/credentials/assertionKeys.js';
import type { ChangeFeed, ChangeHandlers } from '../../src/storage/feed/changeFeed.js';
import { postgresDatabase, type Database, type Queryable } from '../../src/storage/database/db.js';
import { migrate } from '../../src/storage/database/migrations.js';
import { closeSql, describeWithServices, eventually, testClock, throwawayDatabase, type ThrowawayDatabase } from '../helpers/gateway.js';
import { reloadTimersHoldingProcess } from '../helpers/reloadTimer.js';
import { lockWaiters } from '../helpers/rowLock.js';

function standInFeed() {
  const subscribers = new Set<Partial<ChangeHandlers>>();
  const feed = { subscribe: (h: Partial<ChangeHandlers>) => { subscribers.add(h); return () => subscribers.delete(h); } } as unknown as ChangeFeed;
  return { feed, subscribers, fire: (event: 'assertionKeysChanged' | 'resumed') => { for (const h of subscribers) h[event]?.(); } };
}

function capturedLog() {
  const lines: Record<string, unknown>[] = [];
  const log = pino({ level: 'info' }, new Writable({ write(chunk, _enc, done) { lines.push(JSON.parse(String(chunk))); done(); } }));
  return { log, lines };
}

async function signsWith(key: CryptoKey, publicJwk: Record<string, unknown>): Promise<boolean> {
  const jws = await new FlattenedSign(new TextEncoder().encode('x')).setProtectedHeader({ alg: 'EdDSA' }).sign(key);
  const compact = `${jws.protected}.${jws.payload}.${jws.signature}`;
  return compactVerify(compact, await importJWK(publicJwk, 'EdDSA')).then(() => true, () => false);
}

describeWithServices('assertion keys in the database and in an instance', () => {
  let database: ThrowawayDatabase;
  let db: Database;
  /** The database as the keyring sees it, made to fail on demand, counting the statements sent to it. */
  const state = { broken: false, sent: 0 };
  let flaky: Database;

  beforeAll(async () => {
    database = await throwawayDatabase();
    db = postgresDatabase(database.url);
    await migrate(db);
    flaky = new Proxy(db, {
      get: (target, prop, receiver) => (prop !== 'query' ? Reflect.get(target, prop, receiver) : (sql: string, params?: unknown[]) => {
        state.sent += 1;
        return state.broken ? Promise.reject(new Error('database down')) : target.query(sql, params);
      }),
    });
  });
  beforeEach(async () => {
    await db.query('DELETE FROM assertion_keys');
    state.broken = false;
  });
  afterEach(() => { vi.useRealTimers(); });
  afterAll(async () => {
    await db?.close();
    await database?.drop();
    await closeSql();
  });

  /** A transaction of the test that takes `lock`, runs `meanwhile`, and commits once released; `holding` once it has the lock. */
  function holdLock(lock: string, meanwhile: (tx: Queryable) => Promise<unknown> = async () => {}) {
    let release!: () => void;
    const released = new Promise<void>((r) => { release = r; });
    let held!: () => void;
    const holding = new Promise<void>((r) => { held = r; });
    const done = db.transaction(async (tx) => { await tx.query(lock); held(); await meanwhile(tx); await released; });
    return { holding, release: async () => { release(); await done; } };
  }
  /** Every statement that reads assertion_keys waits while the test holds this. */
  const KEYS_EXCLUSIVE = 'LOCK TABLE assertion_keys IN ACCESS EXCLUSIVE MODE';
  /** rotateAssertionKeys inside a transaction of the test. */
  const inTransaction = (tx: Queryable) => ({ transaction: (fn: (t: Queryable) => Promise<unknown>) => fn(tx) }) as unknown as Database;

  /**
   * A reload of `ring` during which a rotation commits just after the load has read the keys (and
   * before any later read): the first lock holds the load's read of the keys, the second (queued
   * behind that read) makes the rotation. `meanwhile` runs while the load waits to read.
   */
  async function rotatedDuringLoad(ring: AssertionKeyring, meanwhile: () => void): Promise<Rotation> {
    const first = holdLock(KEYS_EXCLUSIVE);
    await first.holding;
    const loading = ring.reload();
    await lockWaiters(db, 1);
    let rotation!: Rotation;
    const second = holdLock(KEYS_EXCLUSIVE, async (tx) => { rotation = await rotateAssertionKeys(inTransaction(tx)); });
    await lockWaiters(db, 2);
    meanwhile();
    await first.release();
    await second.release();
    await loading;
    return rotation;
  }

  it('a key pair: Ed25519 JWKs, the private one with d, the kid the public key’s RFC 7638 thumbprint', async () => {
    const key = await generateAssertionKey();
    expect(key.publicJwk).toEqual({ kty: 'OKP', crv: 'Ed25519', x: expect.any(String) });
    expect(key.privateJwk).toEqual({ ...key.publicJwk, d: expect.any(String) });
    expect(key.kid).toBe(await calculateJwkThumbprint(key.publicJwk));
    expect(await signsWith((await importJWK(key.privateJwk, 'EdDSA')) as CryptoKey, key.publicJwk)).toBe(true);
    expect((await generateAssertionKey()).kid).not.toBe(key.kid);
  });

  it('the first start makes a current key (activated) and a next one; a second start adds nothing', async () => {
    await ensureAssertionKeys(db);
    await ensureAssertionKeys(db);
    const rows = await db.query<{ state: string; activated: boolean; has_private: boolean }>(
      'SELECT state, activated_at IS NOT NULL AS activated, private_jwk IS NOT NULL AS has_private FROM assertion_keys ORDER BY state');
    expect(rows).toEqual([{ state: 'current', activated: true, has_private: true }, { state: 'next', activated: false, has_private: true }]);
    await db.query("DELETE FROM assertion_keys WHERE state = 'next'");
    const current = await db.query("SELECT kid FROM assertion_keys WHERE state = 'current'");
    await ensureAssertionKeys(db);
    expect(await db.query("SELECT kid FROM assertion_keys WHERE state = 'current'")).toEqual(current);
    expect(await db.query("SELECT count(*)::int AS n FROM assertion_keys WHERE state = 'next'")).toEqual([{ n: 1 }]);
  });

  it('a rotation promotes the next key, retires the current one (its private key erased) and makes a new next key', async () => {
    await ensureAssertionKeys(db);
    const [before] = [await loadAssertionKeys(db, 600)];
    const rotation = await rotateAssertionKeys(db);
    expect(rotation).toEqual({ current: before[0]!.kid, previous: before[1]!.kid, next: expect.any(String) });
    const keys = await loadAssertionKeys(db, 600);
    expect(keys.map((k) => [k.state, k.kid])).toEqual([['next', rotation.next], ['current', rotation.current], ['retired', rotation.previous]]);
    expect(keys[2]).toMatchObject({ privateJwk: null, retiredAt: expect.any(Date) });
    expect(keys[0]!.retiredAt).toBeNull();
    expect(keys[1]!.privateJwk).toEqual(before[0]!.privateJwk);
    expect(keys[1]!.publicJwk).toEqual(before[0]!.publicJwk);
    expect(Math.abs(keys[2]!.retiredAt!.getTime() - Date.now())).toBeLessThan(10_000);
    const second = await rotateAssertionKeys(db);
    const after = await loadAssertionKeys(db, 600);
    expect(after.map((k) => k.kid)).toEqual([second.next, second.current, rotation.current, rotation.previous]);
  });

  it('a rotation on an empty table makes the keys first', async () => {
    const rotation = await rotateAssertionKeys(db);
    expect(rotation.previous).toEqual(expect.any(String));
    expect((await loadAssertionKeys(db, 600)).map((k) => k.state)).toEqual(['next', 'current', 'retired']);
  });

  it('a current key deleted by hand while a rotation runs: the next key is still promoted, none retired', async () => {
    await ensureAssertionKeys(db);
    const [next] = await loadAssertionKeys(db, 600);
    // Deleted, not yet committed: the rotation finds the keys present, then waits to retire that row.
    const deletion = holdLock("DELETE FROM assertion_keys WHERE state = 'current'");
    await deletion.holding;
    const rotating = rotateAssertionKeys(db);
    await lockWaiters(db, 1);
    await deletion.release();
    expect(await rotating).toEqual({ current: next!.kid, previous: undefined, next: expect.any(String) });
    expect((await loadAssertionKeys(db, 600)).map((k) => k.state)).toEqual(['next', 'current']);
  });

  it('loads retired keys only within the window asked for', async () => {
    await rotateAssertionKeys(db);
    await db.query("UPDATE assertion_keys SET retired_at = now() - interval '100 seconds' WHERE state = 'retired'");
    expect((await loadAssertionKeys(db, 120)).map((k) => k.state)).toEqual(['next', 'current', 'retired']);
    expect((await loadAssertionKeys(db, 90)).map((k) => k.state)).toEqual(['next', 'current']);
  });

  it('an instance signs with the current key and publishes next, current and retired keys for 2 min after retirement', async () => {
    expect(ASSERTION_TTL_SEC).toBe(60);
    expect(RELOAD_INTERVAL_MS).toBe(30_000);
    expect(RETIRED_KEY_PUBLISHED_MS).toBe(120_000);
    const clock = testClock();
    const { feed } = standInFeed();
    const ring = new AssertionKeyring(db, feed, clock, capturedLog().log);
    expect(() => ring.current).toThrow('assertion keyring not started');
    expect(ring.publicJwks()).toEqual([]);
    await ring.start();
    const rotation = await rotateAssertionKeys(db);
    await ring.reload();
    const keys = await loadAssertionKeys(db, 600);
    expect(ring.current.kid).toBe(rotation.current);
    expect(await signsWith(ring.current.key, keys[1]!.publicJwk as Record<string, unknown>)).toBe(true);
    const published = (k: (typeof keys)[number]) => ({ kty: 'OKP', crv: 'Ed25519', x: k.publicJwk.x, kid: k.kid, alg: 'EdDSA', use: 'sig' });
    expect(ring.publicJwks()).toEqual(keys.map(published));
    const retiredAt = keys[2]!.retiredAt!.getTime();
    clock.set(new Date(retiredAt + RETIRED_KEY_PUBLISHED_MS - 1));
    expect(ring.publicJwks().map((k) => k.kid)).toEqual(keys.map((k) => k.kid));
    clock.set(new Date(retiredAt + RETIRED_KEY_PUBLISHED_MS));
    expect(ring.publicJwks().map((k) => k.kid)).toEqual([rotation.next, rotation.current]);
    await ring.close();
  });

  it('keeps retired keys loaded for twice their published time, so a clock ahead of the database cannot hide one', async () => {
    await rotateAssertionKeys(db);
    await db.query("UPDATE assertion_keys SET retired_at = now() - interval '230 seconds' WHERE state = 'retired'");
    const clock = testClock();
    clock.set(new Date(Date.now() - 200_000));
    const ring = new AssertionKeyring(db, standInFeed().feed, clock, capturedLog().log);
    await ring.start();
    expect(ring.publicJwks()).toHaveLength(3);
    // Retired 250 s ago: outside the 240 s loaded, though this clock would still publish it (until 130 s ago).
    await db.query("UPDATE assertion_keys SET retired_at = now() - interval '250 seconds' WHERE state = 'retired'");
    await ring.reload();
    expect(ring.publicJwks()).toHaveLength(2);
    await ring.close();
  });

  it('follows a rotation heard through the feed or after it resumed, logging the new key', async () => {
    const { feed, fire, subscribers } = standInFeed();
    const { log, lines } = capturedLog();
    const ring = new AssertionKeyring(db, feed, () => new Date(), log);
    await ring.start();
    const first = ring.current.kid;
    expect(lines).toEqual([]);
    const rotation = await rotateAssertionKeys(db);
    fire('assertionKeysChanged');
    await eventually(() => ring.current.kid === rotation.current);
    expect(lines).toEqual([expect.objectContaining({ level: 30, kid: rotation.current, previous: first, msg: 'assertion keys: now signing with a new key' })]);
    const again = await rotateAssertionKeys(db);
    fire('resumed');
    await eventually(() => ring.current.kid === again.current);
    await ring.reload();
    expect(lines).toHaveLength(2);
    await ring.close();
    expect(subscribers.size).toBe(0);
  });

  it('reloads every 30 s without a notification', async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    const ring = new AssertionKeyring(db, standInFeed().feed, () => new Date(), capturedLog().log);
    await ring.start();
    const rotation = await rotateAssertionKeys(db);
    vi.advanceTimersByTime(RELOAD_INTERVAL_MS);
    await eventually(() => ring.current.kid === rotation.current);
    await ring.close();
  });

  it('makes the keys again when rows were deleted by hand, rather than stop signing', async () => {
    const ring = new AssertionKeyring(db, standInFeed().feed, () => new Date(), capturedLog().log);
    await ring.start();
    await db.query("DELETE FROM assertion_keys WHERE state = 'next'");
    await ring.reload();
    expect((await loadAssertionKeys(db, 600)).map((k) => k.state)).toEqual(['next', 'current']);
    expect(ring.publicJwks()).toHaveLength(2);
    await db.query('DELETE FROM assertion_keys');
    await ring.reload();
    const keys = await loadAssertionKeys(db, 600);
    expect(keys.map((k) => k.state)).toEqual(['next', 'current']);
    expect(ring.current.kid).toBe(keys[1]!.kid);
    await db.query("DELETE FROM assertion_keys WHERE state = 'current'");
    await ring.reload();
    expect(ring.current.kid).toBe((await loadAssertionKeys(db, 600))[1]!.kid);
    await ring.close();
  });

  it('a failed reload keeps the keys it has and warns; a first load that fails throws', async () => {
    const { log, lines } = capturedLog();
    const ring = new AssertionKeyring(flaky, standInFeed().feed, () => new Date(), log);
    await ring.start();
    const kid = ring.current.kid;
    const jwks = ring.publicJwks();
    state.broken = true;
    await ring.reload();
    expect(ring.current.kid).toBe(kid);
    expect(ring.publicJwks()).toEqual(jwks);
    expect(lines).toEqual([expect.objectContaining({ level: 40, msg: 'assertion keys: reload failed; keeping the keys in memory', err: expect.objectContaining({ message: 'database down' }) })]);
    await ring.close();

    const cold = new AssertionKeyring(flaky, standInFeed().feed, () => new Date(), capturedLog().log);
    await expect(cold.reload()).rejects.toThrow('database down');
    // The server then closes what it started: a keyring whose start failed closes too.
    await expect(cold.start()).rejects.toThrow('database down');
    await cold.close();
    state.broken = false;
  });

  it('a reload with every key present reads them and asks nothing more: no key made, none changed', async () => {
    const ring = new AssertionKeyring(db, standInFeed().feed, () => new Date(), capturedLog().log);
    await ring.start();
    const rows = () => db.query('SELECT kid, state, created_at, activated_at FROM assertion_keys ORDER BY kid');
    const before = await rows();
    const first = holdLock(KEYS_EXCLUSIVE);
    await first.holding;
    const reloading = ring.reload(); // its read of the keys waits for `first`
    await lockWaiters(db, 1);
    const second = holdLock(KEYS_EXCLUSIVE);
    try {
      await lockWaiters(db, 2);
      await first.release();
      await second.holding; // the read done: whatever else the reload asked of assertion_keys would wait for `second`
      expect(await Promise.race([reloading.then(() => 'reloaded'), lockWaiters(db, 1).then(() => 'asked more', () => 'stuck')])).toBe('reloaded');
    } finally {
      await first.release();
      await second.release();
    }
    for (let i = 0; i < 3; i += 1) await ring.reload();
    expect(await rows()).toEqual(before);
    // A key deleted by hand is made again at the next reload, the others kept.
    await db.query("DELETE FROM assertion_keys WHERE state = 'next'");
    await ring.reload();
    const after = await rows();
    expect(after).toHaveLength(2);
    expect(after).toContainEqual(before.find((r) => r.state === 'current'));
    expect(after.find((r) => r.state === 'next')).not.toEqual(before.find((r) => r.state === 'next'));
    await ring.close();
  });

  it('keys deleted by hand between their making again and their read: keeps its keys and says why', async () => {
    const { log, lines } = capturedLog();
    const ring = new AssertionKeyring(db, standInFeed().feed, () => new Date(), log);
    await ring.start();
    const kid = ring.current.kid;
    const jwks = ring.publicJwks();
    await db.query("DELETE FROM assertion_keys WHERE state = 'next'"); // the next reload makes it again
    const first = holdLock(KEYS_EXCLUSIVE);
    await first.holding;
    const reloading = ring.reload(); // its read of the keys waits for `first`
    await lockWaiters(db, 1);
    const second = holdLock(KEYS_EXCLUSIVE);
    await lockWaiters(db, 2); // queued behind the read: the check of the states present then waits for it
    await first.release();
    await second.holding;
    await lockWaiters(db, 1);
    const deletion = holdLock(KEYS_EXCLUSIVE, (tx) => tx.query('DELETE FROM assertion_keys'));
    await lockWaiters(db, 2); // queued behind the check: the next key's insert and the read after it wait for the deletion
    await Promise.all([second.release(), deletion.release(), reloading]);
    expect(ring.current.kid).toBe(kid);
    expect(ring.publicJwks()).toEqual(jwks);
    expect(lines).toEqual([expect.objectContaining({ level: 40, err: expect.objectContaining({ message: 'no current assertion key in the database' }) })]);
    await ring.close();
  });

  it('a rotation made while a load reads is followed: the reloads asked meanwhile are folded into one more', async () => {
    const ring = new AssertionKeyring(flaky, standInFeed().feed, () => new Date(), capturedLog().log);
    await ring.start();
    let sent = state.sent;
    await ring.reload();
    const perLoad = state.sent - sent;
    sent = state.sent;
    const rotation = await rotatedDuringLoad(ring, () => {
      // The notification of the rotation, a resumed feed, the timer: three asked during the load.
      for (let i = 0; i < 3; i += 1) void ring.reload();
    });
    expect(ring.current.kid).toBe(rotation.current);
    expect(state.sent - sent).toBe(2 * perLoad);
    await ring.close();
  });

  it('once closed: a reload asked during the last load does not run, nor does the timer', async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    const ring = new AssertionKeyring(flaky, standInFeed().feed, () => new Date(), capturedLog().log);
    await ring.start();
    const kid = ring.current.kid;
    let closing!: Promise<void>;
    await rotatedDuringLoad(ring, () => {
      void ring.reload();
      closing = ring.close();
    });
    await closing;
    expect(ring.current.kid).toBe(kid);
    const sent = state.sent;
    vi.advanceTimersByTime(2 * RELOAD_INTERVAL_MS);
    await new Promise((r) => setImmediate(r));
    expect(state.sent).toBe(sent);
  });

  it('its reload timer keeps no process alive: a command that never closes the keyring still exits', async () => {
    expect(await reloadTimersHoldingProcess(RELOAD_INTERVAL_MS, async () => {
      const ring = new AssertionKeyring(db, standInFeed().feed, () => new Date(), capturedLog().log);
      await ring.start();
      return ring;
    })).toEqual([false]);
  });

  it('two rotations at once run one after the other: the second retires the key the first made current', async () => {
    await ensureAssertionKeys(db);
    const [, current] = await loadAssertionKeys(db, 600);
    // The current key's row held: the first rotation waits to retire it, the second for the first.
    const row = holdLock("SELECT kid FROM assertion_keys WHERE state = 'current' FOR UPDATE");
    await row.holding;
    const rotations = Promise.all([rotateAssertionKeys(db), rotateAssertionKeys(db)]);
    await lockWaiters(db, 2);
    await row.release();
    const [a, b] = await rotations;
    const [first, second] = a.current === b.previous ? [a, b] : [b, a];
    expect(first.previous).toBe(current!.kid);
    expect(second).toEqual({ previous: first.current, current: first.next, next: expect.any(String) });
    const keys = await loadAssertionKeys(db, 600);
    expect(keys.slice(0, 2).map((k) => k.kid)).toEqual([second.next, second.current]);
    expect(keys.slice(2).map((k) => k.kid).sort()).toEqual([first.previous, first.current].sort());
  });
});

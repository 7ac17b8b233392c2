// The HS256 secrets the database keeps (src/credentials/jwtSecrets.ts) and the key set an instance
// builds from them and from auth.jwt (src/credentials/tokenKeyring.ts), on a database of their own:
// what `gateway keys rotate-jwt` and `drop-previous` leave in gateway_secrets, when a rotated-out
// secret stops verifying, which keys an instance holds after a rotation is heard, a SIGHUP or a
// failed read. The change feed is a stand-in whose events the test fires (storage/feed/changeFeed.ts is
// tested on its own); the keyring's periodic reload runs under fake interval timers. Concurrent
// rotations are forced into their dangerous order by a row the test holds (helpers/rowLock.ts).
import pg from 'pg';
import { afterAll, afterEach, beforeAll, beforeEach, expect, it, vi } from 'vitest';
import { configSchema } from '../../src/config/schema.js';
import { dropPreviousSecret, JWT_RELOAD_INTERVAL_MS, loadStoredSecrets, PREVIOUS_GRACE_MS, rotateStoredSecret } from '../../src/credentials/jwtSecrets.js';
import { TokenKeyring } from '../../src/credentials/tokenKeyring.js';
import { hmacKey, type JwtSettings } from '../../src/credentials/tokenKeys.js';
import type { ChangeFeed, ChangeHandlers } from '../../src/storage/feed/changeFeed.js';
import { postgresDatabase, type Database, type Queryable } from '../../src/storage/database/db.js';
import { migrate } from '../../src/storage/database/migrations.js';
import { closeSql, describeWithServices, eventually, throwawayDatabase, type ThrowawayDatabase } from '../helpers/gateway.js';
import { reloadTimersHoldingProcess } from '../helpers/reloadTimer.js';
import { holdRows } from '../helpers/rowLock.js';

const SECRET = 'a-secret-of-at-least-32-characters-for-hs256';
const OTHER = 'another-secret-of-at-least-32-characters-too';
const TTL = 10_000; // auth.refreshTokenTtl in these tests: a rotated-out secret verifies TTL + 60 s
const kept: JwtSettings = configSchema.parse({ auth: { jwt: { secret: '' } } }).auth.jwt;
const withSecret = (secret: string, previous: string[] = []): JwtSettings => ({ ...kept, secret, previous });

/** A feed whose events the test fires. */
function standInFeed() {
  const subscribers = new Set<Partial<ChangeHandlers>>();
  const feed = { subscribe: (h: Partial<ChangeHandlers>) => { subscribers.add(h); return () => subscribers.delete(h); } } as unknown as ChangeFeed;
  return { feed, subscribers, fire: (event: 'jwtKeysChanged' | 'resumed') => { for (const h of subscribers) h[event]?.(); } };
}

describeWithServices('database-kept HS256 secrets and the token keyring', () => {
  let database: ThrowawayDatabase;
  let db: Database;
  let listener: pg.Client;
  const notified: string[] = [];
  /** The database as the keyring sees it: its reads counted, and made to fail on demand. */
  const reads = { count: 0, broken: false };
  const watched: Queryable = {
    query: (text, params) => {
      if (reads.broken) return Promise.reject(new Error('database down'));
      if (/gateway_secrets/.test(text)) reads.count++;
      return db.query(text, params);
    },
  };

  beforeAll(async () => {
    database = await throwawayDatabase();
    db = postgresDatabase(database.url);
    await migrate(db);
    listener = new pg.Client({ connectionString: database.url });
    await listener.connect();
    listener.on('notification', (n) => notified.push(`${n.channel}:${n.payload}`));
    await listener.query('LISTEN gw_jwt_keys_changed');
  });
  beforeEach(async () => {
    await db.query('DELETE FROM gateway_secrets');
    notified.length = 0;
    reads.count = 0;
    reads.broken = false;
  });
  afterEach(() => { vi.useRealTimers(); });
  afterAll(async () => {
    await listener?.end();
    await db?.close();
    await database?.drop();
    await closeSql();
  });

  const previousAged = (seconds: number) => db.query("UPDATE gateway_secrets SET created_at = now() - make_interval(secs => $1) WHERE name = 'jwt_hs256_previous'", [seconds]);

  it('the first instance makes the secret (48 random bytes), the next ones read it', async () => {
    const first = await loadStoredSecrets(db, TTL);
    expect(first.created).toBe(true);
    expect(first.stored).toEqual({ current: expect.stringMatching(/^[\w-]{64}$/) });
    expect(await loadStoredSecrets(db, TTL)).toEqual({ stored: first.stored, created: false });
    expect(await db.query('SELECT name, value FROM gateway_secrets')).toEqual([{ name: 'jwt_hs256', value: first.stored.current }]);
  });

  it('a rotation makes a new current secret, keeps the old one verifying for the refresh lifetime + 60 s, and tells every instance', async () => {
    expect(JWT_RELOAD_INTERVAL_MS).toBe(30_000);
    expect(PREVIOUS_GRACE_MS).toBe(60_000);
    const { stored: before } = await loadStoredSecrets(db, TTL);
    const started = Date.now();
    const rotation = await rotateStoredSecret(db, TTL);
    const { stored: after } = await loadStoredSecrets(db, TTL);
    expect(after.previous).toBe(before.current);
    expect(after.current).toMatch(/^[\w-]{64}$/);
    expect(after.current).not.toBe(before.current);
    expect(rotation).toEqual({ rotated: true, kid: hmacKey(after.current).kid, previousKid: hmacKey(before.current).kid, previousUntil: expect.any(Date) });
    if (!rotation.rotated) throw new Error('not rotated');
    expect(Math.abs(rotation.previousUntil.getTime() - started - TTL - 60_000)).toBeLessThan(5000);
    await eventually(() => notified.length > 0);
    expect(notified).toEqual(['gw_jwt_keys_changed:']);

    // While the old secret verifies, a second rotation would end its sessions: refused, saying until when.
    const again = await rotateStoredSecret(db, TTL);
    expect(again).toEqual({ rotated: false, previousKid: hmacKey(before.current).kid, previousUntil: rotation.previousUntil });
    expect((await loadStoredSecrets(db, TTL)).stored).toEqual(after);
  });

  it('the rotated-out secret verifies until refresh lifetime + 60 s after the rotation, then a rotation is allowed again', async () => {
    await rotateStoredSecret(db, TTL);
    await previousAged(TTL / 1000 + 55);
    expect((await loadStoredSecrets(db, TTL)).stored.previous).toEqual(expect.any(String));
    await previousAged(TTL / 1000 + 65);
    const { stored } = await loadStoredSecrets(db, TTL);
    expect(stored).toEqual({ current: stored.current });
    const rotation = await rotateStoredSecret(db, TTL);
    expect(rotation).toMatchObject({ rotated: true, previousKid: hmacKey(stored.current).kid });
    expect(await db.query("SELECT count(*)::int AS n FROM gateway_secrets WHERE name = 'jwt_hs256_previous'")).toEqual([{ n: 1 }]);
  });

  it('a rotation on a database without a secret makes one first, then rotates it out', async () => {
    const rotation = await rotateStoredSecret(db, TTL);
    const { stored } = await loadStoredSecrets(db, TTL);
    expect(rotation).toMatchObject({ rotated: true, kid: hmacKey(stored.current).kid, previousKid: hmacKey(stored.previous!).kid });
  });

  it('dropping the previous secret ends it at once and tells every instance; its kid, or undefined when none was alive', async () => {
    const rotation = await rotateStoredSecret(db, TTL);
    await eventually(() => notified.length === 1);
    expect(await dropPreviousSecret(db, TTL)).toBe(rotation.previousKid);
    expect((await loadStoredSecrets(db, TTL)).stored.previous).toBeUndefined();
    await eventually(() => notified.length === 2);
    expect(await dropPreviousSecret(db, TTL)).toBeUndefined();
    await eventually(() => notified.length === 3);
    expect(notified).toEqual(['gw_jwt_keys_changed:', 'gw_jwt_keys_changed:', 'gw_jwt_keys_changed:']);
  });

  /** The current secret's row, held by the test: a rotation waits there to make a new current secret, after writing the previous one. */
  const holdCurrent = () => holdRows("SELECT name FROM gateway_secrets WHERE name = 'jwt_hs256' FOR UPDATE", [], database.url);

  it('two rotations at once: one rotates, the other, run after it, is refused, and one new secret is left', async () => {
    const { stored: before } = await loadStoredSecrets(db, TTL);
    const row = await holdCurrent();
    try {
      // The first waits on the row after writing the previous secret; the second must wait for the first, not write its own.
      const rotations = Promise.allSettled([rotateStoredSecret(db, TTL), rotateStoredSecret(db, TTL)]);
      await row.waiters(2);
      await row.release();
      const results = (await rotations).map((r) => (r.status === 'fulfilled' ? r.value : String(r.reason)));
      const { stored: after } = await loadStoredSecrets(db, TTL);
      const rotated = { rotated: true, kid: hmacKey(after.current).kid, previousKid: hmacKey(before.current).kid, previousUntil: expect.any(Date) };
      const refused = { rotated: false, previousKid: hmacKey(before.current).kid, previousUntil: expect.any(Date) };
      expect(results).toEqual(expect.arrayContaining([rotated, refused]));
      expect(after.previous).toBe(before.current);
    } finally {
      await row.release().catch(() => {});
    }
  });

  it('dropping the previous secret during a rotation waits for it, then drops the secret it rotated out', async () => {
    const { stored: before } = await loadStoredSecrets(db, TTL);
    const row = await holdCurrent();
    try {
      const rotation = rotateStoredSecret(db, TTL);
      await row.waiters(1);
      const drop = dropPreviousSecret(db, TTL);
      // Seen waiting behind the rotation (not done already, having found no previous secret to drop).
      expect(await Promise.race([row.waiters(2).then(() => 'waiting', () => 'gone'), drop.then(() => 'dropped')])).toBe('waiting');
      await row.release();
      await rotation;
      expect(await drop).toBe(hmacKey(before.current).kid);
      expect((await loadStoredSecrets(db, TTL)).stored.previous).toBeUndefined();
    } finally {
      await row.release().catch(() => {});
    }
  });

  it('a keyring with auth.jwt.secret reads nothing and warns nothing; one without reads the stored secret, saying so', async () => {
    const warnings: string[] = [];
    const configured = new TokenKeyring({ jwt: withSecret(SECRET, [OTHER]), refreshTokenTtlMs: TTL, db: watched, warn: (m) => warnings.push(m) });
    expect(() => configured.current).toThrow('token keyring not started');
    await configured.start();
    expect(configured.current.all.map((k) => k.kid)).toEqual([hmacKey(SECRET).kid, hmacKey(OTHER).kid]);
    expect(configured.settings).toEqual(withSecret(SECRET, [OTHER]));
    expect(reads.count).toBe(0);
    expect(warnings).toEqual([]);

    const first = new TokenKeyring({ jwt: kept, refreshTokenTtlMs: TTL, db: watched, warn: (m) => warnings.push(m) });
    await first.start();
    const second = new TokenKeyring({ jwt: kept, refreshTokenTtlMs: TTL, db: watched, warn: (m) => warnings.push(m) });
    await second.start();
    expect(warnings).toEqual([
      'auth.jwt.secret is empty: generated an HS256 secret and stored it in the database (gateway_secrets); set auth.jwt.secret to manage it yourself',
      'auth.jwt.secret is empty: using the HS256 secret stored in the database (gateway_secrets)',
    ]);
    const { stored } = await loadStoredSecrets(db, TTL);
    expect(second.current.current.kid).toBe(hmacKey(stored.current).kid);
    expect(first.current.current.kid).toBe(hmacKey(stored.current).kid);
  });

  it('a rotation heard through the feed, or after the feed resumed, swaps the key set; the old key verifies, the new one signs', async () => {
    const { feed, fire, subscribers } = standInFeed();
    const ring = new TokenKeyring({ jwt: kept, refreshTokenTtlMs: TTL, db: watched, warn: () => {}, feed });
    await ring.start();
    const before = ring.current;
    fire('jwtKeysChanged');
    await ring.reloadStored();
    expect(ring.current).toBe(before); // nothing changed: the same set, its cache of verified tokens kept
    const rotation = await rotateStoredSecret(db, TTL);
    fire('jwtKeysChanged');
    await eventually(() => ring.current.current.kid === (rotation.rotated ? rotation.kid : ''));
    expect(ring.current.all.map((k) => k.kid)).toEqual([ring.current.current.kid, rotation.previousKid]);
    await dropPreviousSecret(db, TTL);
    fire('resumed');
    await eventually(() => ring.current.all.length === 1);
    await ring.close();
    expect(subscribers.size).toBe(0);
  });

  it('reloads every 30 s without a notification; a failed reload keeps the keys and warns', async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    const warnings: string[] = [];
    const { feed } = standInFeed();
    const ring = new TokenKeyring({ jwt: kept, refreshTokenTtlMs: TTL, db: watched, warn: (m) => warnings.push(m), feed });
    await ring.start();
    const rotation = await rotateStoredSecret(db, TTL);
    vi.advanceTimersByTime(JWT_RELOAD_INTERVAL_MS - 1);
    await ring.reloadStored().catch(() => {});
    const kid = ring.current.current.kid;
    reads.count = 0;
    vi.advanceTimersByTime(1);
    await eventually(() => reads.count > 0);
    await ring.reloadStored();
    expect(ring.current.current.kid).toBe(rotation.rotated ? rotation.kid : '');
    expect(kid).toBe(ring.current.current.kid);
    warnings.length = 0;
    reads.broken = true;
    const keys = ring.current;
    vi.advanceTimersByTime(JWT_RELOAD_INTERVAL_MS);
    await eventually(() => warnings.length > 0);
    expect(warnings).toEqual(['token keys: reload failed; keeping the keys in memory (Error: database down)']);
    expect(ring.current).toBe(keys);
    await ring.close();
    reads.broken = false;
    reads.count = 0;
    vi.advanceTimersByTime(JWT_RELOAD_INTERVAL_MS * 2);
    expect(reads.count).toBe(0);
  });

  it('its reload timer keeps no process alive: a command that never closes the keyring still exits', async () => {
    expect(await reloadTimersHoldingProcess(JWT_RELOAD_INTERVAL_MS, async () => {
      const ring = new TokenKeyring({ jwt: kept, refreshTokenTtlMs: TTL, db: watched, warn: () => {}, feed: standInFeed().feed });
      await ring.start();
      return ring;
    })).toEqual([false]);
  });

  it('folds reloads asked during a read into one more read; closes without a feed', async () => {
    const ring = new TokenKeyring({ jwt: kept, refreshTokenTtlMs: TTL, db: watched, warn: () => {} });
    await ring.start();
    reads.count = 0;
    const one = ring.reloadStored();
    const two = ring.reloadStored();
    const three = ring.reloadStored();
    expect(two).toBe(one);
    expect(three).toBe(one);
    await one;
    // A load is three queries (the current secret: insert if missing, else read; the previous one): the first load and one more.
    expect(reads.count).toBe(6);
    reads.count = 0;
    await ring.reloadStored();
    expect(reads.count).toBe(3);
    await ring.close(); // without a feed: nothing to unsubscribe from
  });

  it('a SIGHUP: a new auth.jwt swaps the keys whole, the same keys keep the same set, another algorithm needs a restart', async () => {
    const ring = new TokenKeyring({ jwt: withSecret(SECRET), refreshTokenTtlMs: TTL, db: watched, warn: () => {} });
    await ring.start();
    const before = ring.current;
    expect(ring.prepare({ ...withSecret(SECRET), algorithm: 'EdDSA', privateKeyFile: 'k.pem' })).toBeUndefined();
    const same = ring.prepare({ ...withSecret(SECRET), issuer: 'https://gw.example.test' })!;
    expect(ring.current).toBe(before);
    same();
    expect(ring.current).toBe(before);
    expect(ring.settings.issuer).toBe('https://gw.example.test');
    // Another secret, as many keys: a new set (the old one's cache of verified tokens must not outlive its key).
    ring.prepare(withSecret(OTHER))!();
    const other = ring.current;
    expect(other.all.map((k) => k.kid)).toEqual([hmacKey(OTHER).kid]);
    const swap = ring.prepare(withSecret(OTHER, [SECRET]))!;
    expect(ring.current).toBe(other); // nothing changes before the swap
    swap();
    expect(ring.current.all.map((k) => k.kid)).toEqual([hmacKey(OTHER).kid, hmacKey(SECRET).kid]);
    expect(() => ring.prepare({ ...withSecret(''), algorithm: 'HS256', secret: '' })).not.toThrow();
    await ring.reloadStored();
    expect(reads.count).toBe(0); // auth.jwt.secret is set: nothing read

    // auth.jwt.secret removed: the stored secret is read (made here) at the swap.
    const toStored = ring.prepare(kept)!;
    expect(ring.current.current.kid).toBe(hmacKey(OTHER).kid);
    toStored();
    await ring.reloadStored();
    const { stored } = await loadStoredSecrets(db, TTL);
    expect(ring.current.all.map((k) => k.kid)).toEqual([hmacKey(stored.current).kid]);
    expect(ring.settings).toEqual(kept);
  });

  it('a SIGHUP that removes auth.jwt.secret while the database is down keeps the keys, and warns', async () => {
    const warnings: string[] = [];
    const ring = new TokenKeyring({ jwt: withSecret(SECRET), refreshTokenTtlMs: TTL, db: watched, warn: (m) => warnings.push(m) });
    await ring.start();
    reads.broken = true;
    ring.prepare(kept)!();
    await eventually(() => warnings.length > 0);
    expect(warnings).toEqual(['token keys: cannot read the stored secret (Error: database down)']);
    expect(ring.current.current.kid).toBe(hmacKey(SECRET).kid);
  });

  it('a SIGHUP with the database-kept key builds on the stored secrets it holds', async () => {
    const ring = new TokenKeyring({ jwt: kept, refreshTokenTtlMs: TTL, db: watched, warn: () => {} });
    await ring.start();
    const current = ring.current.current.kid;
    const swap = ring.prepare({ ...kept, previous: [OTHER] })!;
    swap();
    expect(ring.current.all.map((k) => k.kid)).toEqual([current, hmacKey(OTHER).kid]);
  });
});

// The assertion keys one instance holds in memory: the current signing key, and the public keys
// /.well-known/gateway-assertion-keys.json publishes (next, current, and recently retired).
// A rotation made anywhere (another instance, `gateway keys rotate`, SQL) reaches every instance
// through the change feed (trigger in 003_assertion_keys.sql) within milliseconds; a reload every
// RELOAD_INTERVAL_MS covers the times the LISTEN connection is down and notifications are lost.
import { importJWK, type CryptoKey, type JWK } from 'jose';
import type { Logger } from 'pino';
import type { ChangeFeed } from '../storage/feed/index.js';
import type { Database } from '../storage/database/index.js';
import { ASSERTION_ALG, ensureAssertionKeys, loadAssertionKeys, type StoredKey } from './assertionKeys.js';

/** Lifetime of an assertion (CONTRACT §3: exp at most 60 s after iat). */
export const ASSERTION_TTL_SEC = 60;
export const RELOAD_INTERVAL_MS = 30_000;
/**
 * How long a retired key stays published. An instance whose LISTEN connection was down may sign
 * with the old key until its next reload (RELOAD_INTERVAL_MS), and what it signed lives
 * ASSERTION_TTL_SEC more; 30 s more absorb clock skew between the database and the instances.
 */
export const RETIRED_KEY_PUBLISHED_MS = ASSERTION_TTL_SEC * 1000 + RELOAD_INTERVAL_MS + 30_000;

export interface SigningKey {
  kid: string;
  key: CryptoKey;
}

interface PublishedKey {
  jwk: JWK;
  /** ms since epoch; undefined while the key is current or next. */
  until: number | undefined;
}

export class AssertionKeyring {
  private signing: SigningKey | undefined;
  private published: PublishedKey[] = [];
  private loading: Promise<void> | undefined;
  private reloadAgain = false;
  private timer: NodeJS.Timeout | undefined;
  private unsubscribe: (() => void) | undefined;
  private closed = false;

  constructor(private readonly db: Database, private readonly feed: ChangeFeed, private readonly clock: () => Date, private readonly log: Logger) {}

  /** Creates the keys if this is the first instance ever, loads them and starts following rotations. */
  async start(): Promise<void> {
    // A first start finds no keys, and load() makes them (as after a deletion by hand).
    await this.reload();
    // Once started, reload() only logs its failures (it keeps the keys it has), so nothing to catch here.
    const reload = () => void this.reload().catch(() => {});
    // After an interruption of the feed a rotation may have gone unheard: reload then too.
    this.unsubscribe = this.feed.subscribe({ assertionKeysChanged: reload, resumed: reload });
    this.timer = setInterval(reload, RELOAD_INTERVAL_MS);
    this.timer.unref();
  }

  get current(): SigningKey {
    if (!this.signing) throw new Error('assertion keyring not started');
    return this.signing;
  }

  /** The public keys to publish now: next, current, and retired ones until their window closes. */
  publicJwks(): JWK[] {
    const now = this.clock().getTime();
    return this.published.filter((k) => k.until === undefined || k.until > now).map((k) => k.jwk);
  }

  /** Reloads from the database; calls made while a reload runs are folded into one more reload. */
  reload(): Promise<void> {
    if (this.loading) {
      this.reloadAgain = true;
      return this.loading;
    }
    this.loading = (async () => {
      do {
        this.reloadAgain = false;
        try {
          await this.load();
        } catch (err) {
          // Keep signing with the keys we have: the old key stays published long enough for that.
          this.log.warn({ err }, 'assertion keys: reload failed; keeping the keys in memory');
          if (!this.signing) throw err;
        }
      } while (this.reloadAgain && !this.closed);
    })().finally(() => {
      this.loading = undefined;
    });
    return this.loading;
  }

  private async load(): Promise<void> {
    // Loaded a little wider than published, so clock skew between database and instance cannot hide a key.
    const window = Math.ceil((2 * RETIRED_KEY_PUBLISHED_MS) / 1000);
    let keys = await loadAssertionKeys(this.db, window);
    // Asked only when a key is missing: every 30 s on every instance, the read of the keys is all a reload costs.
    if (!keys.some((k) => k.state === 'current') || !keys.some((k) => k.state === 'next')) {
      // Someone deleted rows by hand: make them again rather than stop signing.
      await ensureAssertionKeys(this.db);
      keys = await loadAssertionKeys(this.db, window);
    }
    const current = keys.find((k) => k.state === 'current');
    if (!current?.privateJwk) throw new Error('no current assertion key in the database');
    if (current.kid !== this.signing?.kid) {
      const key = (await importJWK(current.privateJwk, ASSERTION_ALG)) as CryptoKey;
      if (this.signing) this.log.info({ kid: current.kid, previous: this.signing.kid }, 'assertion keys: now signing with a new key');
      this.signing = { kid: current.kid, key };
    }
    this.published = keys.map((k) => ({ jwk: publicJwk(k), until: k.retiredAt ? k.retiredAt.getTime() + RETIRED_KEY_PUBLISHED_MS : undefined }));
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.timer);
    this.unsubscribe?.();
    await this.loading?.catch(() => {});
  }
}

function publicJwk(key: StoredKey): JWK {
  const { kty, crv, x } = key.publicJwk;
  return { kty, crv, x, kid: key.kid, alg: ASSERTION_ALG, use: 'sig' };
}

// The token key set one instance holds (CONTRACT §25), and the one place it changes: a SIGHUP with
// edited auth.jwt keys (prepare), or a rotation of the database-kept secret, heard through the
// change feed within milliseconds, or at the next periodic reload when a notification was lost.
// Readers take `current` per token; a swap is one assignment, so no token sees half a key set.
import type { ChangeFeed } from '../storage/feed/index.js';
import type { Queryable } from '../storage/database/index.js';
import { JWT_RELOAD_INTERVAL_MS, loadStoredSecrets } from './jwtSecrets.js';
import { buildKeySet, isDatabaseKept, type JwtSettings, type StoredSecrets, type TokenKeySet } from './tokenKeys.js';

export interface TokenKeyringOptions {
  jwt: JwtSettings;
  refreshTokenTtlMs: number;
  db: Queryable;
  warn: (message: string) => void;
  /** Without one (a test's bare tokens), rotations are not followed. */
  feed?: ChangeFeed;
}

export class TokenKeyring {
  private keys: TokenKeySet | undefined;
  private jwt: JwtSettings;
  private stored: StoredSecrets | undefined;
  private timer: NodeJS.Timeout | undefined;
  private unsubscribe: (() => void) | undefined;
  private loading: Promise<void> | undefined;
  private loadAgain = false;

  constructor(private readonly options: TokenKeyringOptions) {
    this.jwt = options.jwt;
  }

  /** Loads the keys (the stored secret made if this is the first instance ever) and follows rotations. */
  async start(): Promise<void> {
    const { db, warn, refreshTokenTtlMs } = this.options;
    if (isDatabaseKept(this.jwt)) {
      const { stored, created } = await loadStoredSecrets(db, refreshTokenTtlMs);
      this.stored = stored;
      warn(created
        ? 'auth.jwt.secret is empty: generated an HS256 secret and stored it in the database (gateway_secrets); set auth.jwt.secret to manage it yourself'
        : 'auth.jwt.secret is empty: using the HS256 secret stored in the database (gateway_secrets)');
    }
    this.keys = buildKeySet(this.jwt, this.stored);
    const { feed } = this.options;
    if (!feed) return;
    // A failed reload keeps the keys in memory: the previous secret outlives a missed rotation.
    const reload = () => void this.reloadStored().catch((err: unknown) => warn(`token keys: reload failed; keeping the keys in memory (${String(err)})`));
    this.unsubscribe = feed.subscribe({ jwtKeysChanged: reload, resumed: reload });
    // Also drops a previous secret once every token it signed has expired.
    this.timer = setInterval(reload, JWT_RELOAD_INTERVAL_MS);
    this.timer.unref();
  }

  get current(): TokenKeySet {
    if (!this.keys) throw new Error('token keyring not started');
    return this.keys;
  }

  /** The auth.jwt settings the keys were last built from (live/reload.ts compares a new file with them). */
  get settings(): JwtSettings {
    return this.jwt;
  }

  /**
   * SIGHUP: builds the key set of a new auth.jwt (reading its key files again: a key renewed in
   * place keeps its file name) and returns the swap; throws, changing nothing, when a key is
   * unusable. Undefined when the algorithm changed: that needs a restart.
   */
  prepare(jwt: JwtSettings): (() => void) | undefined {
    if (jwt.algorithm !== this.jwt.algorithm) return undefined;
    if (isDatabaseKept(jwt) && !this.stored) {
      // auth.jwt.secret removed: the stored secret is read (made, if need be) before the switch.
      return () => {
        this.jwt = jwt;
        void this.reloadStored().catch((err: unknown) => this.options.warn(`token keys: cannot read the stored secret (${String(err)})`));
      };
    }
    const built = buildKeySet(jwt, this.stored);
    // The same keys (a reload that changed something else) keep the same set: its cache of verified tokens stays.
    const kids = (set: TokenKeySet) => set.all.map((k) => k.kid).join(' ');
    const keys = this.keys && kids(this.keys) === kids(built) ? this.keys : built;
    return () => {
      this.jwt = jwt;
      this.keys = keys;
    };
  }

  /** Reads the stored secrets again and rebuilds the key set; a call made during a read runs one more read after it. */
  reloadStored(): Promise<void> {
    if (this.loading) {
      // That read may have begun before the rotation committed.
      this.loadAgain = true;
      return this.loading;
    }
    this.loading = (async () => {
      do {
        this.loadAgain = false;
        await this.loadStored();
      } while (this.loadAgain);
    })().finally(() => {
      this.loading = undefined;
    });
    return this.loading;
  }

  private async loadStored(): Promise<void> {
    if (!isDatabaseKept(this.jwt)) return;
    const { stored } = await loadStoredSecrets(this.options.db, this.options.refreshTokenTtlMs);
    const changed = stored.current !== this.stored?.current || stored.previous !== this.stored?.previous;
    this.stored = stored;
    if (changed || !this.keys) this.keys = buildKeySet(this.jwt, stored);
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    this.unsubscribe?.();
    await this.loading?.catch(() => {});
  }
}

// Live reload (SIGHUP): routes, upstreams, cors, plans (limits included), auth.rateLimit, admin.apiKey and hooks (§24) and the
// token keys (auth.jwt.secret, privateKeyFile, previous: CONTRACT §25) from a changed gateway.yaml take effect without a restart and without dropping a request. They are the live
// state (live/live.ts), read per request: swapping it is the whole reload. A request in flight keeps
// the snapshot it started with; the next one sees the new one. An invalid file changes nothing.
// Everything else (listeners, storage, keys, token lifetimes, webhooks) was wired into the running
// instance at start, so a change there is reported as needing a restart. Files named by the
// configuration that are meant to be renewed in place (the listeners' certificates, upstream TLS)
// are read again on every reload.
import type { Logger } from 'pino';
import type { Config } from '../config/schema.js';
import { ConfigError } from '../config/load.js';
import type { DailyLimiter } from '../pipeline/index.js';
import type { Certificates } from '../listener/tls.js';
import type { Tokens } from '../credentials/tokens.js';
import { Live, LIVE_SETTINGS, liveSettingsOf } from './live.js';

export interface ReloadDeps {
  live: Live;
  /** The configuration the instance started with: the settings that need a restart are compared with it. */
  config: Config;
  daily: Pick<DailyLimiter, 'forgetToday'>;
  log: Logger;
  /** The HTTPS listeners' certificates (server.tls, admin.tls): their files are read again on every reload. */
  certificates?: Certificates;
  /** The instance's token keys: the key settings of auth.jwt swap live, their files read again on every reload. */
  tokens?: Pick<Tokens, 'keyring'>;
}

export interface ReloadResult {
  applied: string[];
  needsRestart: string[];
}

const isLive = (key: string) => LIVE_SETTINGS.some((live) => key === live || key.startsWith(`${live}.`));
/** Live when the instance's keyring is at hand and the algorithm stays (a new algorithm needs a restart). */
const JWT_KEY_SETTINGS = ['auth.jwt.secret', 'auth.jwt.privateKeyFile', 'auth.jwt.previous'];

/** Leaf paths whose values differ (arrays compared whole). Values are never returned: some are secrets. */
export function changedSettings(before: unknown, after: unknown, path = ''): string[] {
  const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);
  if (isObject(before) && isObject(after)) {
    const keys = new Set([...Object.keys(before), ...Object.keys(after)]);
    return [...keys].flatMap((k) => changedSettings(before[k], after[k], path ? `${path}.${k}` : k));
  }
  return JSON.stringify(before) === JSON.stringify(after) ? [] : [path];
}

/**
 * Applies the live part of `next` to the running instance; the rest stays as it started. Files
 * the live part names (upstream TLS) are read again even when the settings did not change: a
 * rotated client certificate keeps its file name. Throws, changing nothing, when one is unusable.
 */
export function applyConfig(deps: Pick<ReloadDeps, 'live' | 'config' | 'daily' | 'tokens'>, next: Config): ReloadResult {
  const live = deps.live.current.settings;
  const jwt = deps.tokens?.keyring.settings ?? deps.config.auth.jwt;
  // What runs now: the start-up configuration with the live settings as last applied.
  const current: Config = { ...deps.config, ...live, auth: { ...deps.config.auth, rateLimit: live.auth.rateLimit, jwt }, admin: { ...deps.config.admin, apiKey: live.admin.apiKey } };
  const changed = changedSettings(current, next);
  const keysLive = deps.tokens !== undefined && next.auth.jwt.algorithm === jwt.algorithm;
  const appliesLive = (key: string) => isLive(key) || (keysLive && JWT_KEY_SETTINGS.some((k) => key === k || key.startsWith(`${k}.`)));
  const applied = changed.filter(appliesLive);
  const needsRestart = changed.filter((key) => !appliesLive(key));
  const readsFiles = Object.values(next.upstreams).some((upstream) => upstream.tls);
  if (applied.length === 0 && !readsFiles) return { applied, needsRestart };

  if (!changed.some(isLive) && !readsFiles) return { applied, needsRestart };
  const settings = liveSettingsOf(next);
  // Built whole first, then swapped: no request ever sees half a configuration.
  deps.live.replace(Live.snapshotOf(settings));
  // The gates also count refused attempts: harmless while the limits stay put, but they would
  // keep refusing users a raised limit admits. Postgres stays the authority; the gates rebuild.
  if (JSON.stringify(settings.plans) !== JSON.stringify(live.plans)) void deps.daily.forgetToday('plan limits changed');
  return { applied, needsRestart };
}

/** Loads the file again and applies it, logging what changed, what needs a restart, or why it was refused. */
export function reload(deps: ReloadDeps, load: () => Config): ReloadResult | undefined {
  const { log } = deps;
  let result: ReloadResult;
  try {
    const next = load();
    // Everything is read and checked before anything changes: a refused reload changes nothing.
    const swapCertificates = deps.certificates?.reread();
    // Key files are read again too (a key renewed in place keeps its name); undefined for a new algorithm.
    const swapKeys = deps.tokens?.keyring.prepare(next.auth.jwt);
    result = applyConfig(deps, next);
    swapCertificates?.();
    swapKeys?.();
  } catch (err) {
    const problems = err instanceof ConfigError ? err.problems : [err instanceof Error ? err.message : String(err)];
    log.error({ problems }, 'configuration reload refused: keeping the running configuration');
    return undefined;
  }
  if (result.needsRestart.length) log.warn({ settings: result.needsRestart }, 'changed settings need a restart to take effect');
  const certificates = deps.certificates ? { certificates: 'reloaded' } : {};
  const message = result.applied.length ? 'configuration reloaded' : 'configuration reloaded: nothing live changed';
  log.info({ applied: result.applied, routes: deps.live.current.routes.all.length, ...certificates }, message);
  return result;
}

/** Reloads on SIGHUP; returns the function that stops listening for it. */
export function reloadOnSignal(deps: ReloadDeps, load: () => Config, signal: NodeJS.Signals = 'SIGHUP'): () => void {
  const onSignal = () => {
    deps.log.info({ signal }, 'reloading the configuration');
    reload(deps, load);
  };
  process.on(signal, onSignal);
  return () => process.off(signal, onSignal);
}

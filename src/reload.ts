// Live reload (SIGHUP): routes, upstreams, plans.freeDailyLimit and auth.rateLimit from a changed
// gateway.yaml take effect without a restart and without dropping a request. Each is read per
// request from services, so swapping the objects is the whole reload: a request in flight keeps
// the route table and limiter it started with, the next one sees the new ones. An invalid file
// changes nothing. Everything else (listeners, storage, keys, token lifetimes, webhooks) was wired
// into the running instance at start, so a change there is reported as needing a restart.
import type { Logger } from 'pino';
import type { Config } from './config/schema.js';
import { ConfigError } from './config/load.js';
import { DailyLimiter } from './guards/dailyLimit.js';
import { RouteTable } from './proxy/routeTable.js';
import type { Services } from './services.js';

/** Setting paths a reload applies to the running instance. */
export const LIVE_SETTINGS = ['routes', 'upstreams', 'plans.freeDailyLimit', 'auth.rateLimit'] as const;

export interface ReloadResult {
  applied: string[];
  needsRestart: string[];
}

const isLive = (key: string) => LIVE_SETTINGS.some((live) => key === live || key.startsWith(`${live}.`));

/** Leaf paths whose values differ (arrays compared whole). Values are never returned: some are secrets. */
export function changedSettings(before: unknown, after: unknown, path = ''): string[] {
  const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);
  if (isObject(before) && isObject(after)) {
    const keys = new Set([...Object.keys(before), ...Object.keys(after)]);
    return [...keys].flatMap((k) => changedSettings(before[k], after[k], path ? `${path}.${k}` : k));
  }
  return JSON.stringify(before) === JSON.stringify(after) ? [] : [path];
}

/** Applies the live part of `next` to the running instance; the rest stays as it started. */
export function applyConfig(services: Services, next: Config): ReloadResult {
  const current = services.config;
  const changed = changedSettings(current, next);
  const applied = changed.filter(isLive);
  const needsRestart = changed.filter((key) => !isLive(key));
  if (applied.length === 0) return { applied, needsRestart };

  const config: Config = {
    ...current,
    routes: next.routes,
    upstreams: next.upstreams,
    plans: { ...current.plans, freeDailyLimit: next.plans.freeDailyLimit },
    auth: { ...current.auth, rateLimit: next.auth.rateLimit },
  };
  // Build everything first, then swap: no request ever sees half a configuration.
  const routes = new RouteTable(config);
  const oldLimit = current.plans.freeDailyLimit;
  const newLimit = config.plans.freeDailyLimit;
  const daily = newLimit === oldLimit ? services.daily
    : new DailyLimiter(services.db, services.redis, newLimit, services.clock, services.log);
  services.config = config;
  services.routes = routes;
  services.daily = daily;
  if (newLimit > oldLimit) void daily.forgetToday('daily limit raised');
  return { applied, needsRestart };
}

/** Loads the file again and applies it, logging what changed, what needs a restart, or why it was refused. */
export function reload(services: Services, load: () => Config, log: Logger = services.log): ReloadResult | undefined {
  let next: Config;
  try {
    next = load();
  } catch (err) {
    const problems = err instanceof ConfigError ? err.problems : [err instanceof Error ? err.message : String(err)];
    log.error({ problems }, 'configuration reload refused: keeping the running configuration');
    return undefined;
  }
  const result = applyConfig(services, next);
  if (result.needsRestart.length) log.warn({ settings: result.needsRestart }, 'changed settings need a restart to take effect');
  log.info({ applied: result.applied, routes: services.routes.all.length }, result.applied.length ? 'configuration reloaded' : 'configuration reloaded: nothing live changed');
  return result;
}

/** Reloads on SIGHUP; returns the function that stops listening for it. */
export function reloadOnSignal(services: Services, load: () => Config, signal: NodeJS.Signals = 'SIGHUP'): () => void {
  const onSignal = () => {
    services.log.info({ signal }, 'reloading the configuration');
    reload(services, load);
  };
  process.on(signal, onSignal);
  return () => process.off(signal, onSignal);
}

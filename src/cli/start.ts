// `gateway start`: one instance, or the primary of server.workers; its failures as one fatal line.
import { ConfigError, loadConfig, NO_CONFIG_FILE } from '../config/load.js';
import { StorageLockedError } from '../storage/database/dirLock.js';
import { PendingMigrationsError } from '../storage/database/migrations.js';
import { PostgresStartError } from '../storage/database/startWait.js';
import { LOG_LEVELS, loadChecked, logLevelProblem, type Args } from './command.js';

export const SHUTDOWN_GRACE_MS = 10_000;

/**
 * `start` speaks only JSON log lines on stdout, its failures included: the logger exists before
 * anything can fail, and whatever stops the start becomes one fatal line with a hint (startFailure).
 */
export async function start({ config: configPath }: Args): Promise<number> {
  const [
    { asyncStdout, createLogger }, { startGateway }, { reload, reloadOnSignal }, { readiness }, { runPrimary, workerCount }, { joinFleet }, { default: cluster },
    { default: closeWithGrace },
  ] = await Promise.all([
    import('../telemetry/logger.js'), import('../server.js'), import('../live/reload.js'), import('../listener/health.js'), import('../fleet/primary.js'),
    import('../fleet/workerLink.js'), import('node:cluster'), import('close-with-grace'),
  ]);
  const levelProblem = logLevelProblem();
  const root = createLogger(levelProblem ? 'info' : process.env.LOG_LEVEL ?? 'info', asyncStdout());
  // A worker of server.workers (fleet/) says which one it is on every line.
  const log = cluster.isWorker ? root.child({ worker: cluster.worker!.id }) : root;
  const fail = (failure: StartFailure): number => {
    const { msg, ...fields } = failure;
    // Even with LOG_LEVEL=silent: an instance that will not start says why once.
    (log.isLevelEnabled('fatal') ? log : createLogger('fatal')).fatal(fields, msg);
    return 1;
  };
  if (levelProblem) return fail({ msg: levelProblem, hint: `set LOG_LEVEL to one of ${LOG_LEVELS.join(', ')}, or leave it unset (info)` });
  const fleet = cluster.isWorker ? joinFleet() : undefined;
  let gateway: Awaited<ReturnType<typeof startGateway>>;
  let file: string | undefined;
  try {
    // A worker runs what the primary checked, never the file as it may be by now.
    const config = fleet ? await fleet.config : (await loadChecked(configPath).then((loaded) => { file = loaded.file; return loaded.config; }));
    const count = workerCount(config.server.workers);
    if (!fleet && count > 1) {
      const loadFile = file!;
      const code = await runPrimary({
        config, count, log,
        load: async () => (await loadChecked(loadFile)).config,
        stopTimeoutMs: config.server.shutdownDelay + SHUTDOWN_GRACE_MS,
        listening: (urls) => log.info({ ...urls, workers: count, storage: 'postgres', node: process.version, nodeFlags: process.execArgv }, 'gateway listening'),
      });
      if (code === 0) log.info('shut down');
      return code;
    }
    gateway = await startGateway(config, { log, defaultMetrics: true, fleet });
  } catch (err) {
    return fail(startFailure(err));
  }
  const { config } = gateway.services;
  const reloadDeps = { ...gateway.services, certificates: gateway.certificates };
  // SIGHUP reloads (src/live/reload.ts); close-with-grace would otherwise treat it as a shutdown. A
  // worker reloads what the primary read on its SIGHUP instead.
  const stopReloading = fleet ? () => {} : reloadOnSignal(reloadDeps, () => loadConfig(file).config);
  fleet?.onReload((next) => reload(reloadDeps, () => next));
  const { shutdownDelay } = config.server;
  // A worker takes SIGINT from the primary only (fleet/).
  const skip: Array<'SIGHUP' | 'SIGINT'> = fleet ? ['SIGHUP', 'SIGINT'] : ['SIGHUP'];
  const grace = closeWithGrace({ delay: shutdownDelay + SHUTDOWN_GRACE_MS, skip, logger: { error: (m: unknown) => log.error(m) } }, async ({ signal, err }) => {
    stopReloading();
    if (err) log.error({ err }, 'shutting down after an error');
    else log.info({ signal }, 'shutting down: finishing requests in flight');
    // SIGTERM is an orchestrator's or a load balancer's: drain first. Ctrl-C (SIGINT) is a person's.
    await gateway.close(signal === 'SIGTERM' ? shutdownDelay : 0);
    log.info('shut down');
  });
  fleet?.onStop(() => void grace.close());
  const urls = { url: gateway.url, admin: gateway.adminUrl, decisions: gateway.decisionsUrl, metrics: gateway.metricsUrl };
  if (fleet) {
    const { services } = gateway;
    fleet.serve({
      metrics: () => services.metrics.registry.getMetricsAsJSON(),
      readiness: () => readiness({ db: services.db, redis: services.redis, lifecycle: services.lifecycle }),
    });
    log.info(urls, 'worker listening');
    fleet.listening(urls);
    return -1;
  }
  // Said only now: whoever waits for this line may signal at once, and a SIGHUP that came
  // before its handler would end the process (the default action) instead of reloading.
  const storage = config.storage.postgres ? 'postgres' : `embedded (${config.storage.embeddedDir})`;
  log.info({ url: gateway.url, admin: gateway.adminUrl, metrics: gateway.metricsUrl, storage, node: process.version, nodeFlags: process.execArgv }, 'gateway listening');
  return -1; // keeps running
}

export const MIGRATE_HINT = 'run `gateway migrate` with the same configuration (with storage.migrate: false, nothing else applies migrations)';

interface StartFailure {
  msg: string;
  hint: string;
  [detail: string]: unknown;
}

/** What stopped the start, as an operator acts on it: what is wrong, and what to do (hint). */
function startFailure(err: unknown): StartFailure {
  if (err instanceof ConfigError && err.problems.length === 1 && err.problems[0] === NO_CONFIG_FILE) {
    const hint = '`npx gateway init` writes a commented gateway.yaml here (`--profile public-api` for a public API); then `npx gateway start`';
    return { msg: 'no configuration file', file: err.file, problems: err.problems, hint };
  }
  if (err instanceof ConfigError) {
    return { msg: 'invalid configuration', file: err.file, problems: err.problems, hint: `fix the configuration; \`gateway check --config ${err.file}\` lists the same problems` };
  }
  if (err instanceof PendingMigrationsError) {
    return { msg: err.message, pending: err.pending, hint: MIGRATE_HINT };
  }
  if (err instanceof PostgresStartError) {
    return { msg: err.message, postgres: err.postgres, code: err.code, hint: err.hint };
  }
  if (err instanceof StorageLockedError) {
    return { msg: err.message, pid: err.pid, hint: `stop process ${err.pid}, or give this instance storage.postgres (several instances need Postgres)` };
  }
  const listen = err as NodeJS.ErrnoException & { address?: string; port?: number };
  if (listen.syscall === 'listen') {
    const where = `${listen.address}:${listen.port}`;
    const hints: Record<string, string> = {
      EADDRINUSE: `another process listens on ${where}: stop it, or change server.port (PORT) or admin.port`,
      EACCES: 'ports below 1024 need privileges: choose a higher server.port (PORT) or admin.port',
      EADDRNOTAVAIL: `${listen.address} is not an address of this machine: change server.host (HOST) or admin.host`,
    };
    return {
      msg: `cannot listen on ${where}: ${listen.code}`, code: listen.code, address: listen.address, port: listen.port,
      hint: hints[listen.code ?? ''] ?? 'check server.host/port and admin.host/port',
    };
  }
  return { msg: `cannot start: ${err instanceof Error ? err.message : String(err)}`, err, hint: 'see err; `gateway check` validates the configuration without the network' };
}

#!/usr/bin/env node
// The `gateway` command: start | migrate | check | users set-plan|deactivate|activate | keys rotate.
import closeWithGrace from 'close-with-grace';
import { ConfigError, loadConfig } from './config/load.js';
import { PLANS, type Config, type Plan } from './config/schema.js';
import { createLogger } from './logger.js';
import { startGateway } from './server.js';
import { reloadOnSignal } from './reload.js';
import { openDatabase } from './storage/db.js';
import { migrate } from './storage/migrations.js';
import { findByEmail, setActive, setPlan } from './storage/users.js';
import { rotateAssertionKeys } from './assertion/keys.js';
import { RETIRED_KEY_PUBLISHED_MS } from './assertion/keyring.js';
import { checkSigningKey, SigningKeyError } from './auth/tokens.js';

const USAGE = `Usage: gateway <command> [--config FILE]

Commands:
  start                        start the gateway (applies pending migrations unless storage.migrate is false)
  migrate                      apply pending migrations
  check                        validate the configuration and print the route table
  users set-plan EMAIL PLAN    set a user's plan (free, premium, pro)
  users deactivate EMAIL       deactivate a user
  users activate EMAIL         activate a user
  keys rotate                  make a new upstream assertion key current (the previous one stays published until what it signed has expired)

The config file is --config FILE, else $GATEWAY_CONFIG, else ./gateway.yaml.`;

const SHUTDOWN_GRACE_MS = 10_000;

class UsageError extends Error {}
/** A well-formed command that cannot be carried out (unknown email): its message alone, no usage text. */
class CommandError extends Error {}

function parseArgs(argv: string[]): { args: string[]; configPath?: string } {
  const args: string[] = [];
  let configPath: string | undefined;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--config' || arg === '-c') {
      configPath = argv[++i];
      if (!configPath) throw new UsageError('--config needs a file');
    } else if (arg.startsWith('--config=')) configPath = arg.slice('--config='.length);
    else if (arg === '--help' || arg === '-h') args.unshift('help');
    else args.push(arg);
  }
  return { args, configPath };
}

export function routeTable(config: Config): string {
  const rows = [['PATH', 'METHODS', 'AUTH', 'PLANS', 'DAILY', 'UPSTREAM', 'FORWARDED AS']];
  for (const r of [...config.routes].sort((a, b) => a.path.localeCompare(b.path))) {
    const upstream = config.upstreams[r.upstream]!;
    rows.push([r.path, r.methods?.join(',') ?? '*', r.auth, r.plans?.join(',') ?? '-', r.dailyLimit ? 'yes' : '-', `${r.upstream} (${upstream.url})`, `${r.rewritePrefix ?? r.path}/…`]);
  }
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((row) => row[i]!.length)));
  return rows.map((row) => row.map((cell, i) => cell.padEnd(widths[i]!)).join('  ').trimEnd()).join('\n');
}

async function withDatabase<T>(config: Config, work: (db: Awaited<ReturnType<typeof openDatabase>>) => Promise<T>): Promise<T> {
  const db = await openDatabase(config.storage);
  try {
    return await work(db);
  } finally {
    await db.close();
  }
}

async function usersCommand(config: Config, [action, email, plan]: string[]): Promise<string> {
  if (!action || !email || !['set-plan', 'deactivate', 'activate'].includes(action)) throw new UsageError('users needs: set-plan EMAIL PLAN | deactivate EMAIL | activate EMAIL');
  if (action === 'set-plan' && !PLANS.includes(plan as Plan)) throw new UsageError(`unknown plan ${JSON.stringify(plan ?? '')}: expected one of ${PLANS.join(', ')}`);
  return withDatabase(config, async (db) => {
    if (config.storage.migrate) await migrate(db);
    const user = await findByEmail(db, email.trim().toLowerCase());
    if (!user) throw new CommandError(`no user with email ${email}`);
    if (action === 'set-plan') {
      await setPlan(db, user.id, plan as Plan);
      return `user ${user.id} (${user.email}): plan ${user.plan} → ${plan}`;
    }
    await setActive(db, user.id, action === 'activate');
    return `user ${user.id} (${user.email}): ${action === 'activate' ? 'active' : 'inactive'}`;
  });
}

async function keysCommand(config: Config, [action]: string[]): Promise<string> {
  if (action !== 'rotate') throw new UsageError('keys needs: rotate');
  return withDatabase(config, async (db) => {
    if (config.storage.migrate) await migrate(db);
    const { current, previous, next } = await rotateAssertionKeys(db);
    // Running instances pick the rotation up through NOTIFY (or their periodic reload).
    return `assertion key rotated: now signing with kid ${current}` + (previous ? `; ${previous} stays published for ${RETIRED_KEY_PUBLISHED_MS / 1000} s` : '') + `; next kid ${next} is published ahead`;
  });
}

async function main(argv: string[]): Promise<number> {
  const { args, configPath } = parseArgs(argv);
  const [command, ...rest] = args;
  if (!command || command === 'help') {
    console.log(USAGE);
    return command ? 0 : 1;
  }
  const { config, file } = loadConfig(configPath);
  try {
    return await run(command, rest, config, file);
  } catch (err) {
    // The key file is part of the configuration: a bad one (read by `check`, or by `start` while
    // setting up tokens) is reported like any other configuration problem.
    if (err instanceof SigningKeyError) throw new ConfigError(file, [`auth.jwt.privateKeyFile: ${err.message}`]);
    throw err;
  }
}

async function run(command: string, rest: string[], config: Config, file: string): Promise<number> {
  switch (command) {
    case 'check':
      await checkSigningKey(config.auth.jwt);
      console.log(`${file}: valid\n\n${routeTable(config)}`);
      return 0;
    case 'migrate': {
      const applied = await withDatabase(config, (db) => migrate(db));
      console.log(applied.length ? `applied: ${applied.join(', ')}` : 'nothing to apply');
      return 0;
    }
    case 'keys':
      console.log(await keysCommand(config, rest));
      return 0;
    case 'users':
      console.log(await usersCommand(config, rest));
      return 0;
    case 'start': {
      const log = createLogger(process.env.LOG_LEVEL ?? 'info');
      const gateway = await startGateway(config, { log, defaultMetrics: true });
      // SIGHUP reloads (src/reload.ts); close-with-grace would otherwise treat it as a shutdown.
      const stopReloading = reloadOnSignal(gateway.services, () => loadConfig(file).config);
      closeWithGrace({ delay: SHUTDOWN_GRACE_MS, skip: ['SIGHUP'], logger: { error: (m: unknown) => log.error(m) } }, async ({ signal, err }) => {
        stopReloading();
        if (err) log.error({ err }, 'shutting down after an error');
        else log.info({ signal }, 'shutting down: finishing requests in flight');
        await gateway.close();
        log.info('shut down');
      });
      // Said only now: whoever waits for this line may signal at once, and a SIGHUP that came
      // before its handler would end the process (the default action) instead of reloading.
      log.info({ url: gateway.url, admin: gateway.adminUrl, storage: config.storage.postgres ? 'postgres' : `embedded (${config.storage.embeddedDir})` }, 'gateway listening');
      console.log(`gateway listening on ${gateway.url}${gateway.adminUrl ? ` (admin on ${gateway.adminUrl})` : ''}`);
      return -1; // keeps running
    }
    default:
      throw new UsageError(`unknown command ${JSON.stringify(command)}`);
  }
}

main(process.argv.slice(2)).then((code) => {
  if (code >= 0) process.exitCode = code;
}, (err: unknown) => {
  if (err instanceof ConfigError) console.error(err.message);
  else if (err instanceof UsageError) console.error(`gateway: ${err.message}\n\n${USAGE}`);
  else if (err instanceof CommandError) console.error(`gateway: ${err.message}`);
  else console.error(`gateway: ${err instanceof Error ? err.stack ?? err.message : String(err)}`);
  process.exitCode = 1;
});

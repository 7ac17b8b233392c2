#!/usr/bin/env -S node --max-semi-space-size=32
// The `gateway` command, also installed as `auth-gateway` (the npm name `gateway` belongs to an
// unrelated package). One entry per subcommand in COMMANDS, each with its own help; node:util
// parseArgs reads the options. Commands import the heavy modules (fastify, storage) themselves,
// so `--help` and `gateway health` (run by Docker every 10 s) start in a fraction of the time.
// The first line gives the installed command (`npx gateway`, `gateway`) the V8 flag npm start and
// the Dockerfile pass (docs/operating.md): however it is launched, the gateway runs alike.
// First: refuses a Node older than package.json's engines before anything else runs.
import './nodeVersion.js';
import { readFileSync } from 'node:fs';
import { get } from 'node:http';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { levels } from 'pino';
import { consoleOffReasons } from './admin/consoleOrigin.js';
import { checkFiles } from './config/files.js';
import { ConfigError, configWarnings, loadConfig } from './config/load.js';
import type { Config } from './config/schema.js';
import { knownPlans } from './plans.js';
import { PendingMigrationsError } from './storage/migrations.js';
import { StorageLockedError } from './storage/dirLock.js';
import { PostgresStartError } from './storage/startWait.js';
import type { Database, Queryable } from './storage/db.js';

const SHUTDOWN_GRACE_MS = 10_000;
const HEALTH_TIMEOUT_MS = 2000;
const LOG_LEVELS = [...Object.keys(levels.values), 'silent'];

/** Wrong words on the command line: the message, then how to use what was asked (by default, the command list). */
class UsageError extends Error {
  constructor(message: string, readonly usage = USAGE) {
    super(message);
  }
}

/** A well-formed command that cannot be carried out (unknown email): its message alone, no usage text. */
class CommandError extends Error {}

interface Args {
  /** The words after the command's name (EMAIL, PLAN). */
  operands: string[];
  /** --config, when given. */
  config?: string;
  /** --admin URL: act through a running gateway's admin API (users and keys commands). */
  admin?: string;
  /** The command's own options (Command.options), as given. */
  values: Record<string, string | boolean | undefined>;
}

interface Command {
  /** One word, or a group and an action: `users set-plan`. */
  name: string;
  operands?: string[];
  /** One line, for the command list. */
  summary: string;
  /** The command's own help, after its usage line. */
  help: string;
  /** Takes --config (every command but `schema`). */
  config: boolean;
  /** Takes --admin URL (the commands that change accounts or keys). */
  admin?: boolean;
  /** Options of this command alone (`users list --json`). */
  options?: Record<string, { type: 'string' | 'boolean' }>;
  run(args: Args): Promise<number>;
}

const COMMANDS: Command[] = [
  {
    name: 'start', config: true, run: start,
    summary: 'start the gateway (migrations first, unless storage.migrate is false)',
    help: `Applies pending migrations (unless storage.migrate is false: then a database that lacks
one stops the start), then serves on server.host:server.port, and on admin.host:admin.port
unless admin.port is 0.

Output: JSON log lines (pino) on stdout and nothing else, at LOG_LEVEL (default info). The line
with msg "gateway listening" carries the URLs (url, admin). Whatever stops the start (an invalid
configuration or file it names, an unknown LOG_LEVEL, a port in use, a database not migrated or
not reachable) is one line at level 60 (fatal) with msg, hint and the details, then exit status
1; \`gateway check\` prints the same configuration problems as text. A Postgres that does not
answer yet (refused, unreachable, starting up) is waited for up to storage.startTimeout (default
60 s), with a warn line "waiting for Postgres at host:port (code)" at each attempt.

Signals: SIGHUP reloads routes, upstreams, cors and limits from the file, and reads certificate
files again (other changes are logged as needing a restart). SIGTERM first drains for
server.shutdownDelay (default 5 s: /readyz answers 503, every response closes its connection, so
a load balancer moves away), then closes open WebSockets (1001), stops accepting, lets the
requests in flight finish (up to ${SHUTDOWN_GRACE_MS / 1000} s more) and exits; SIGINT (Ctrl-C)
skips the drain.`,
  },
  {
    name: 'migrate', config: true, run: migrateCommand,
    summary: 'apply pending database migrations',
    help: `Applies the files of migrations/ that the configured database lacks, in name order, in
one transaction, and prints their names (or "nothing to apply"). Safe when several instances
run it at once: an advisory lock makes the others wait. A Postgres that does not answer yet is
waited for as by \`start\` (storage.startTimeout), each attempt said on stderr. Needed before
\`start\` when storage.migrate is false.`,
  },
  {
    name: 'check', config: true, run: check,
    summary: 'validate the configuration and the files it names; print the route table',
    help: `Validates what \`start\` reads, without touching the network: the YAML, every key
(unknown keys are errors), the \${VAR} references, PORT, HOST and LOG_LEVEL, and every file the
configuration names (keys, CA and certificate files), which must exist and parse as what they
are. Prints "FILE: valid" and the route table, exit status 0, with on stderr a "FILE: warning:"
line for what a valid file leaves off (the console, with its reason); or, on stderr, the file and
one line per problem (key path, what is wrong), exit status 1.`,
  },
  {
    name: 'health', config: true, run: health,
    summary: "ask the running gateway's /healthz (container health checks)",
    help: `Reads the configuration as \`start\` does (so PORT and HOST apply), then asks
GET http://HOST:PORT/healthz, with 127.0.0.1 for a host of 0.0.0.0 (::1 for ::) and a
${HEALTH_TIMEOUT_MS / 1000} s timeout. Exit status 0 when it answers 200, else 1. The Docker
image's HEALTHCHECK runs it.`,
  },
  {
    name: 'schema', config: false, run: schema,
    summary: 'print the JSON Schema of gateway.yaml',
    help: `Prints the JSON Schema (draft-07) of gateway.yaml, generated from the validator that
\`check\` and \`start\` use. The repository keeps it as gateway.schema.json; editors with the YAML
language server complete and check a file whose first line is
  # yaml-language-server: $schema=./gateway.schema.json`,
  },
  {
    name: 'openapi', config: false, run: openapi,
    summary: 'print the OpenAPI 3.1 document of the public and admin HTTP APIs',
    help: `Prints the OpenAPI 3.1 document of the gateway's own endpoints (public and admin
listeners), as the admin listener serves it at /openapi.json. It builds both listeners on a
throwaway embedded database, so it needs no configuration and no network. The repository keeps
it as docs/openapi.json.`,
  },
  {
    name: 'users set-plan', operands: ['EMAIL', 'PLAN'], config: true, admin: true, run: (args) => users('set-plan', args),
    summary: 'set a user\'s plan (free, premium, pro, or any plan gateway.yaml names)',
    help: `Sets the user's plan and their subscription record. EMAIL is matched without regard to
case. Running instances apply the change within a second.`,
  },
  {
    name: 'users deactivate', operands: ['EMAIL'], config: true, admin: true, run: (args) => users('deactivate', args),
    summary: 'deactivate a user',
    help: `Deactivates the user: every running instance refuses their tokens and API keys within a
second. Nothing is deleted; \`users activate\` undoes it.`,
  },
  {
    name: 'users activate', operands: ['EMAIL'], config: true, admin: true, run: (args) => users('activate', args),
    summary: 'activate a user',
    help: 'Activates the user again; running instances accept them within a second.',
  },
  {
    name: 'users list', config: true, run: listUsersCommand,
    options: { query: { type: 'string' }, plan: { type: 'string' }, limit: { type: 'string' }, json: { type: 'boolean' } },
    summary: 'list users, newest first (--query Q, --plan P, --limit N, --json)',
    help: `Lists users, newest first, as GET /admin/v1/users does: --query matches the email (a
substring, any case) or an exact id; --plan keeps one plan; --limit caps the count (default 50,
at most 200). Prints a table, or with --json one JSON object {"users": [...]}.`,
  },
  {
    name: 'audit', config: true, run: auditCommand,
    options: { user: { type: 'string' }, type: { type: 'string' }, since: { type: 'string' }, limit: { type: 'string' }, json: { type: 'boolean' } },
    summary: 'list audit events, newest first (--user ID, --type T, --since TIME, --limit N, --json)',
    help: `Lists the audit log (docs/audit.md), newest first, as GET /admin/v1/audit does: --user keeps
one account's events (its id), --type one event type (login.failed, admin.plan_changed, ...),
--since those at or after a time (ISO 8601, e.g. 2026-11-25T08:00:00Z); --limit caps the count
(default 50, at most 200). Prints a table, or with --json one JSON object {"events": [...]}.
Reads the database: on embedded storage, with the gateway stopped (or ask its admin API).`,
  },
  {
    name: 'users reset-link', operands: ['EMAIL'], config: true, admin: true, run: (args) => users('reset-link', args),
    summary: 'print a password reset link for a user (no SMTP needed)',
    help: `Makes a password reset link, as POST /api/v1/auth/password/forgot would mail it, and prints
it: for a deployment without mail.smtp, or a user whose mail does not arrive. It needs
mail.resetUrl (the application's reset page, with {token}). The link works once, within 30
minutes; using it sets the password and ends every session of the user. Give it only to the
owner of the address.`,
  },
  {
    name: 'users delete', operands: ['EMAIL'], config: true, admin: true, run: (args) => users('delete', args),
    summary: 'delete a user and everything of theirs',
    help: `Deletes the account (GDPR erasure): the user, its subscription record, refresh tokens and
sessions, API keys, webhook and links. The email can register again. Running instances refuse
the user's tokens and API keys within a second. It cannot be undone; \`users deactivate\` can.`,
  },
  {
    name: 'keys rotate', config: true, admin: true, run: rotateKeys,
    summary: 'make a new upstream assertion key current',
    help: `Makes the next upstream assertion key current and publishes a new next one. The previous
key stays published (/.well-known/gateway-assertion-keys.json) until every assertion it signed
has expired, so upstreams verifying with a cached key set keep working. Running instances
switch at once (NOTIFY), or at their next periodic reload.`,
  },
];

const CONFIG_OPTION = '  -c, --config FILE  the configuration file (default: $GATEWAY_CONFIG, else ./gateway.yaml)';
const ADMIN_OPTION = `  --admin URL        act through the running gateway's admin API (e.g. http://127.0.0.1:9090), with
                     admin.apiKey: needed while a gateway holds embedded storage`;

function synopsis(command: Command): string {
  const own = Object.entries(command.options ?? {}).map(([name, o]) => `[--${name}${o.type === 'string' ? ` ${name.toUpperCase()}` : ''}]`);
  return [command.name, ...(command.operands ?? []), ...own, ...(command.config ? ['[--config FILE]'] : []), ...(command.admin ? ['[--admin URL]'] : [])].join(' ');
}

function commandHelp(command: Command): string {
  return `Usage: gateway ${synopsis(command)}\n\n${command.help}\n\nOptions:\n${command.config ? `${CONFIG_OPTION}\n` : ''}${command.admin ? `${ADMIN_OPTION}\n` : ''}  -h, --help         this help`;
}

function commandList(commands: Command[]): string {
  const left = (c: Command) => [c.name, ...(c.operands ?? [])].join(' ');
  const width = Math.max(...commands.map((c) => left(c).length));
  return commands.map((c) => `  ${left(c).padEnd(width)}  ${c.summary}`).join('\n');
}

const USAGE = `Usage: gateway <command> [options]     (also installed as auth-gateway)

Commands:
${commandList(COMMANDS)}

Options:
${CONFIG_OPTION}
  -h, --help         help; \`gateway COMMAND --help\` (or \`gateway help COMMAND\`) shows a command's own
      --version      print the version

Environment:
  GATEWAY_CONFIG     the configuration file when --config is not given
  PORT, HOST         override server.port and server.host
  LOG_LEVEL          start: ${LOG_LEVELS.join(', ')} (default info)
  and every \${VAR} the configuration file names

Exit status: 0 on success, 1 on any error.`;

/** The help of a group of commands (`gateway users --help`). */
function groupHelp(group: string, commands: Command[]): string {
  return `Usage: gateway ${group} <${commands.map((c) => c.name.slice(group.length + 1)).join('|')}> … [--config FILE]\n\nCommands:\n${commandList(commands)}\n\nRun \`gateway ${group} ACTION --help\` for an action's own help.`;
}

function version(): string {
  return (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;
}

// ---------------------------------------------------------------------------------------------
// Reading the command line.

const COMMON_OPTIONS = { help: { type: 'boolean', short: 'h' } } as const;
const CONFIG_OPTIONS = { config: { type: 'string', short: 'c' }, ...COMMON_OPTIONS } as const;

const ADMIN_OPTIONS = { ...CONFIG_OPTIONS, admin: { type: 'string' } } as const;
const GLOBAL_OPTIONS = { ...CONFIG_OPTIONS, version: { type: 'boolean' } } as const;

/** Writes what was asked on stdout and returns the exit status. */
async function main(argv: string[]): Promise<number> {
  // A first, lenient pass finds the command's words wherever the options are (`--config F check`
  // works too); the second pass, strict, knows the command and refuses options it does not take.
  const [first, ...rest] = parseArgs({ args: argv, options: GLOBAL_OPTIONS, strict: false, allowPositionals: true }).positionals;
  if (first === undefined) {
    const { values } = strictly(argv, GLOBAL_OPTIONS);
    if (values.version) return print(version());
    if (values.help) return print(USAGE);
    throw new UsageError('a command is needed');
  }
  if (first === 'help') {
    if (!rest.length) return print(USAGE);
    const found = findCommand(rest);
    return print(found.command ? commandHelp(found.command) : groupHelp(found.group, found.commands));
  }
  const found = findCommand([first, ...rest]);
  if (!found.command) {
    if (strictly(argv, CONFIG_OPTIONS).values.help) return print(groupHelp(found.group, found.commands));
    const actions = found.commands.map((c) => [c.name.slice(found.group.length + 1), ...(c.operands ?? [])].join(' '));
    throw new UsageError(`${found.group} needs one of: ${actions.join(' | ')}`, groupHelp(found.group, found.commands));
  }
  const { command } = found;
  const usage = `Usage: gateway ${synopsis(command)}\nRun \`gateway ${command.name} --help\` for its help.`;
  const parsed = strictly(argv, { ...(command.admin ? ADMIN_OPTIONS : command.config ? CONFIG_OPTIONS : COMMON_OPTIONS), ...command.options }, usage);
  const values = parsed.values as { help?: boolean; config?: string; admin?: string } & Args['values'];
  if (values.help) return print(commandHelp(command));
  const operands = parsed.positionals.slice(command.name.split(' ').length);
  const expected = command.operands ?? [];
  if (operands.length < expected.length) throw new UsageError(`${command.name} needs ${expected.slice(operands.length).join(' and ')}`, usage);
  if (operands.length > expected.length) throw new UsageError(`unexpected argument ${JSON.stringify(operands[expected.length])}`, usage);
  if (values.config === '') throw new UsageError('--config needs a FILE', usage);
  if (values.admin !== undefined && !/^https?:\/\/[^/]/.test(values.admin)) throw new UsageError('--admin needs the admin listener\'s URL, such as http://127.0.0.1:9090', usage);
  return command.run({ operands, config: values.config, admin: values.admin, values });
}

/** parseArgs, strict: an option the command does not take is a usage error naming it. */
function strictly<O extends NonNullable<ParseArgsConfig['options']>>(argv: string[], options: O, usage?: string) {
  try {
    return parseArgs({ args: argv, options, strict: true, allowPositionals: true });
  } catch (err) {
    const { code, message } = err as NodeJS.ErrnoException;
    // node's own messages go on about positionals that start with `-`, or spell `<value>`.
    const option = /'([^']+)'/.exec(message)?.[1];
    const known = Object.entries(options).map(([name, o]) => `--${name}${o.type === 'string' ? (name === 'config' ? ' FILE' : name === 'admin' ? ' URL' : ` ${name.toUpperCase()}`) : ''}`).join(', ');
    if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') throw new UsageError(`unknown option ${option}; known options: ${known}`, usage);
    if (code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE' && option?.includes('--config')) throw new UsageError('--config needs a FILE', usage);
    throw new UsageError(message, usage);
  }
}

type Found = { command: Command } | { command?: undefined; group: string; commands: Command[] };

/** The command the words name (`check`, `users set-plan`), or the group they start (`users`). */
function findCommand([first, second]: string[]): Found {
  const command = COMMANDS.find((c) => c.name === first || c.name === `${first} ${second}`);
  if (command) return { command };
  const group = COMMANDS.filter((c) => c.name.startsWith(`${first} `));
  if (group.length) return { group: first!, commands: group };
  throw new UsageError(`unknown command ${JSON.stringify(first)}`);
}

function print(text: string): number {
  console.log(text);
  return 0;
}

// ---------------------------------------------------------------------------------------------
// The commands.

/** LOG_LEVEL, as `start` reads it; a problem line for `check`, or nothing. */
function logLevelProblem(): string | undefined {
  const level = process.env.LOG_LEVEL;
  return level === undefined || LOG_LEVELS.includes(level) ? undefined : `LOG_LEVEL: unknown level ${JSON.stringify(level)}; expected one of ${LOG_LEVELS.join(', ')}`;
}

/** The configuration, every file it names read and parsed, and LOG_LEVEL: all `start` checks before the network. */
async function loadChecked(configPath: string | undefined): Promise<{ config: Config; file: string }> {
  const { config, file } = loadConfig(configPath);
  const problems = [...await checkFiles(config), logLevelProblem()].filter((p) => p !== undefined);
  if (problems.length) throw new ConfigError(file, problems);
  return { config, file };
}

async function check({ config: configPath }: Args): Promise<number> {
  const { config, file } = await loadChecked(configPath);
  for (const warning of configWarnings(config)) console.error(`${file}: warning: ${warning}`);
  // A valid file that leaves the console off although it has a key: the operator meant to use it.
  const consoleOff = config.admin.apiKey ? consoleOffReasons(config.admin) : [];
  for (const reason of consoleOff) console.error(`${file}: warning: the console (/console/) is off: ${reason}`);
  return print(`${file}: valid\n\n${routeTable(config)}`);
}

export function routeTable(config: Config): string {
  const rows = [['PATH', 'METHODS', 'AUTH', 'PLANS', 'DAILY', 'PER MINUTE', 'UPSTREAM', 'FORWARDED AS']];
  for (const r of [...config.routes].sort((a, b) => a.path.localeCompare(b.path))) {
    const upstream = r.upstream === undefined ? undefined : config.upstreams[r.upstream]!;
    rows.push([r.path, r.methods?.join(',') ?? '*', r.mfa === 'required' ? `${r.auth} (mfa)` : r.auth, r.plans?.join(',') ?? '-', r.dailyLimit ? 'yes' : '-', r.rateLimit ? 'yes' : '-',
      upstream ? `${r.upstream} (${upstream.url})` : '- (decision only)', upstream ? `${(r.rewritePrefix ?? r.path).replace(/\/+$/, '')}/…` : '-']);
  }
  return columns(rows);
}

async function schema(): Promise<number> {
  const { configJsonSchema } = await import('./config/jsonSchema.js');
  return print(JSON.stringify(configJsonSchema(), null, 2));
}

async function openapi(): Promise<number> {
  const [{ mkdtempSync, rmSync }, os, path, { configSchema }, { createLogger }, { startGateway }, { DOCUMENTED_OPTIONS }] = await Promise.all([
    import('node:fs'), import('node:os'), import('node:path'), import('./config/schema.js'), import('./telemetry/logger.js'), import('./server.js'), import('./openapi.js'),
  ]);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'gateway-openapi-'));
  const config = configSchema.parse({ ...DOCUMENTED_OPTIONS, server: { host: '127.0.0.1', port: 0 }, storage: { embeddedDir: dir }, admin: { host: '127.0.0.1', port: 0 } });
  const gateway = await startGateway(config, { log: createLogger('silent') });
  try {
    const { buildAdminApp } = await import('./admin/app.js');
    const admin = await buildAdminApp(gateway.services, { publicDocument: () => gateway.app.swagger() as Record<string, unknown> });
    const res = await admin.inject({ method: 'GET', url: '/openapi.json' });
    await admin.close();
    return print(JSON.stringify(res.json(), null, 2));
  } finally {
    await gateway.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Opens the configured database, brought up to date (or checked, with storage.migrate: false). */
async function withDatabase<T>(config: Config, work: (db: Database) => Promise<T>, { migrated = true } = {}): Promise<T> {
  const [{ openDatabase }, { assertMigrated, migrate }] = await Promise.all([import('./storage/db.js'), import('./storage/migrations.js')]);
  const db = await openDatabase(config.storage);
  try {
    if (migrated) await (config.storage.migrate ? migrate(db) : assertMigrated(db));
    return await work(db);
  } finally {
    await db.close();
  }
}

async function migrateCommand({ config: configPath }: Args): Promise<number> {
  const { config } = loadConfig(configPath);
  const [{ migrate }, { waitForPostgres }] = await Promise.all([import('./storage/migrations.js'), import('./storage/startWait.js')]);
  // A migration Job starts beside its Postgres as the gateway does: it waits the same way (stdout keeps the result alone).
  if (config.storage.postgres) await waitForPostgres(config.storage.postgres, config.storage.startTimeout, { warn: (_fields, msg) => console.error(`gateway: ${msg}`) });
  const applied = await withDatabase(config, (db) => migrate(db), { migrated: false });
  return print(applied.length ? `applied: ${applied.join(', ')}` : 'nothing to apply');
}

type UserAction = 'set-plan' | 'deactivate' | 'activate' | 'reset-link' | 'delete';

async function users(action: UserAction, { operands: [email, plan], config: configPath, admin }: Args): Promise<number> {
  const { config, file } = loadConfig(configPath);
  const plans = knownPlans(config);
  if (action === 'set-plan' && !plans.includes(plan ?? '')) throw new UsageError(`unknown plan ${JSON.stringify(plan ?? '')}: expected one of ${plans.join(', ')}`);
  if (admin) return print(await usersThroughAdmin(action, email!, plan, admin, config.admin.apiKey));
  const mail = config.mail;
  if (action === 'reset-link' && !mail) throw new CommandError(`${file}: mail.resetUrl is not set: the link needs the application's reset page (a URL with {token})`);
  const [{ deleteUser, findByEmail, setActive, setPlan }, { LINK_TTL_MS, makeLink }, { insertAuditEvent }] = await Promise.all([
    import('./storage/users.js'), import('./auth/links.js'), import('./storage/audit.js'),
  ]);
  return print(await withDatabase(config, async (db) => {
    const user = await findByEmail(db, email!.trim().toLowerCase());
    if (!user) throw new CommandError(`no user with email ${email}`);
    const who = `user ${user.id} (${user.email})`;
    // Each change with its audit row (CONTRACT §17), in one transaction.
    const audited = (tx: Queryable, type: 'admin.plan_changed' | 'admin.user_deleted' | 'admin.active_changed', data?: Record<string, unknown>) =>
      insertAuditEvent(tx, { type, actor: 'cli', userId: user.id, data }, new Date());
    switch (action) {
      case 'set-plan':
        await setPlan(db, user.id, plan!, (tx) => audited(tx, 'admin.plan_changed', { plan }));
        return `${who}: plan ${user.plan} → ${plan}`;
      case 'reset-link': {
        const url = await makeLink(db, user, 'reset', mail!.resetUrl, new Date());
        return `${who}: password reset link, single use, valid ${LINK_TTL_MS.reset / 60_000} minutes:\n${url}`;
      }
      case 'delete':
        await db.transaction(async (tx) => {
          if (await deleteUser(tx, user.id)) await audited(tx, 'admin.user_deleted');
        });
        return `${who}: deleted, with its sessions, API keys, webhook and links`;
      default:
        await db.transaction(async (tx) => {
          if (await setActive(tx, user.id, action === 'activate')) await audited(tx, 'admin.active_changed', { active: action === 'activate' });
        });
        return `${who}: ${action === 'activate' ? 'active' : 'inactive'}`;
    }
  }));
}

/**
 * A users command through a running gateway's admin API (CONTRACT §18): the way to change an
 * account while a gateway holds embedded storage, and a way that works on Postgres too.
 */
async function usersThroughAdmin(action: UserAction, email: string, plan: string | undefined, base: string, key: string): Promise<string> {
  if (action === 'reset-link') throw new CommandError('the admin API does not make reset links: run `gateway users reset-link` where it can open the database (on embedded storage, with the gateway stopped), or let the user ask through password/forgot');
  if (!key) throw new CommandError('--admin needs admin.apiKey (GATEWAY_ADMIN_KEY) in the configuration: the admin API answers 404 without one');
  const call = async (method: string, path: string, body?: unknown) => {
    let res: Response;
    try {
      res = await fetch(new URL(path, base), {
        // The audit log's actor: the CLI (the admin API takes the word of whoever holds the key).
        method, headers: { authorization: `Bearer ${key}`, 'x-gateway-actor': 'cli', ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        body: body === undefined ? undefined : JSON.stringify(body), signal: AbortSignal.timeout(10_000),
      });
    } catch (err) {
      throw new CommandError(`cannot reach the admin API at ${base}: ${(err as Error & { cause?: { code?: string } }).cause?.code ?? (err as Error).message}`);
    }
    const json = (await res.json().catch(() => ({}))) as Record<string, unknown>;
    return { status: res.status, json };
  };
  const found = await call('GET', `/admin/v1/users?email=${encodeURIComponent(email)}`);
  if (found.status === 404) throw new CommandError(`no user with email ${email}`);
  if (found.status !== 200) throw new CommandError(`the admin API at ${base} answered ${found.status} ${JSON.stringify(found.json)}`);
  const user = found.json as { id: number; email: string; plan: string };
  const who = `user ${user.id} (${user.email})`;
  const done = action === 'set-plan' ? await call('PUT', `/admin/v1/users/${user.id}/plan`, { plan })
    : action === 'delete' ? await call('DELETE', `/admin/v1/users/${user.id}`)
      : await call('PUT', `/admin/v1/users/${user.id}/active`, { active: action === 'activate' });
  if (done.status !== 200) throw new CommandError(`the admin API at ${base} answered ${done.status} ${JSON.stringify(done.json)}`);
  if (action === 'set-plan') return `${who}: plan ${user.plan} → ${plan}`;
  if (action === 'delete') return `${who}: deleted, with its sessions, API keys, webhook and links`;
  return `${who}: ${action === 'activate' ? 'active' : 'inactive'}`;
}

const LIST_MAX = 200;

async function listUsersCommand({ config: configPath, values }: Args): Promise<number> {
  const { config } = loadConfig(configPath);
  const query = values.query as string | undefined;
  const plan = values.plan as string | undefined;
  const limitText = (values.limit as string | undefined) ?? '50';
  const limit = /^\d{1,3}$/.test(limitText) ? Number(limitText) : NaN;
  if (!(limit >= 1 && limit <= LIST_MAX)) throw new UsageError(`--limit: expected a number from 1 to ${LIST_MAX}`);
  const plans = knownPlans(config);
  if (plan !== undefined && !plans.includes(plan)) throw new UsageError(`unknown plan ${JSON.stringify(plan)}: expected one of ${plans.join(', ')}`);
  const { listUsers } = await import('./storage/users.js');
  const rows = await withDatabase(config, (db) => listUsers(db, { ...(query?.trim() ? { query: query.trim() } : {}), ...(plan ? { plan } : {}), limit }));
  const users = rows.map((u) => ({ id: u.id, email: u.email, plan: u.plan, is_active: u.is_active, created_at: u.created_at.toISOString() }));
  if (values.json) return print(JSON.stringify({ users }));
  return print(columns([['ID', 'EMAIL', 'PLAN', 'ACTIVE', 'CREATED'], ...users.map((u) => [String(u.id), u.email, u.plan, u.is_active ? 'yes' : 'no', u.created_at])]));
}

async function auditCommand({ config: configPath, values }: Args): Promise<number> {
  const { config } = loadConfig(configPath);
  const [userText, type, sinceText, limitText = '50'] = [values.user, values.type, values.since, values.limit] as Array<string | undefined>;
  const limit = /^\d{1,3}$/.test(limitText) ? Number(limitText) : NaN;
  if (!(limit >= 1 && limit <= LIST_MAX)) throw new UsageError(`--limit: expected a number from 1 to ${LIST_MAX}`);
  const userId = userText === undefined ? undefined : /^[1-9]\d{0,9}$/.test(userText) ? Number(userText) : NaN;
  if (Number.isNaN(userId)) throw new UsageError('--user: expected a user id');
  const since = sinceText === undefined ? undefined : new Date(sinceText);
  if (since && Number.isNaN(since.getTime())) throw new UsageError('--since: expected a time such as 2026-11-25T08:00:00Z');
  const { listAuditEvents } = await import('./storage/audit.js');
  const rows = await withDatabase(config, (db) => listAuditEvents(db, { userId, type, since, limit }));
  const events = rows.map((e) => ({ id: e.id, at: e.at.toISOString(), type: e.type, actor: e.actor, user_id: e.user_id, ip: e.ip, user_agent: e.user_agent, data: e.data }));
  if (values.json) return print(JSON.stringify({ events }));
  // The user agent (whatever a client sent) stays out of the table; JSON escapes what data holds.
  return print(columns([['AT', 'TYPE', 'ACTOR', 'USER', 'IP', 'DATA'], ...events.map((e) => [e.at, e.type, e.actor, e.user_id === null ? '-' : String(e.user_id), e.ip ?? '-', JSON.stringify(e.data)])]));
}

/** Rows as aligned columns, the first row the heading. */
function columns(rows: string[][]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((row) => row[i]!.length)));
  return rows.map((row) => row.map((cell, i) => cell.padEnd(widths[i]!)).join('  ').trimEnd()).join('\n');
}

async function rotateKeys({ config: configPath, admin }: Args): Promise<number> {
  const { config } = loadConfig(configPath);
  if (admin) throw new CommandError('the admin API does not rotate keys: run `gateway keys rotate` where it can open the database (on Postgres, anywhere; on embedded storage, with the gateway stopped)');
  const [{ rotateAssertionKeys }, { RETIRED_KEY_PUBLISHED_MS }] = await Promise.all([import('./assertion/keys.js'), import('./assertion/keyring.js')]);
  const { current, previous, next } = await withDatabase(config, (db) => rotateAssertionKeys(db));
  // Running instances pick the rotation up through NOTIFY (or their periodic reload).
  return print(`assertion key rotated: now signing with kid ${current}` + (previous ? `; ${previous} stays published for ${RETIRED_KEY_PUBLISHED_MS / 1000} s` : '') + `; next kid ${next} is published ahead`);
}

async function health({ config: configPath }: Args): Promise<number> {
  const { config } = loadConfig(configPath);
  const { host, port } = config.server;
  if (port === 0) throw new CommandError('server.port is 0 (any free port): there is no port to ask');
  // A listener on every address is reached on loopback; an IPv6 literal goes in brackets.
  const target = host === '0.0.0.0' || host === '' ? '127.0.0.1' : host === '::' ? '::1' : host;
  const url = `http://${target.includes(':') ? `[${target}]` : target}:${port}/healthz`;
  // node:http rather than fetch: no undici to load and no kept-alive socket to wait for, on a
  // command that runs every few seconds for the life of the container.
  const status = await new Promise<number>((resolve, reject) => {
    const req = get(url, { agent: false, timeout: HEALTH_TIMEOUT_MS }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('timeout', () => req.destroy(new Error(`no answer within ${HEALTH_TIMEOUT_MS} ms`)));
    req.on('error', (err: NodeJS.ErrnoException) => reject(new CommandError(`unhealthy: GET ${url}: ${err.code ?? err.message}`)));
  });
  if (status !== 200) throw new CommandError(`unhealthy: GET ${url} answered ${status}`);
  return print(`healthy: GET ${url} answered 200`);
}

/**
 * `start` speaks only JSON log lines on stdout, its failures included: the logger exists before
 * anything can fail, and whatever stops the start becomes one fatal line with a hint (startFailure).
 */
async function start({ config: configPath }: Args): Promise<number> {
  const [{ asyncStdout, createLogger }, { startGateway }, { reload, reloadOnSignal }, { readiness }, workers, { default: cluster }, { default: closeWithGrace }] = await Promise.all([
    import('./telemetry/logger.js'), import('./server.js'), import('./live/reload.js'), import('./health.js'), import('./workers.js'), import('node:cluster'), import('close-with-grace'),
  ]);
  const levelProblem = logLevelProblem();
  const root = createLogger(levelProblem ? 'info' : process.env.LOG_LEVEL ?? 'info', asyncStdout());
  // A worker of server.workers (workers.ts) says which one it is on every line.
  const log = cluster.isWorker ? root.child({ worker: cluster.worker!.id }) : root;
  const fail = (failure: StartFailure): number => {
    const { msg, ...fields } = failure;
    // Even with LOG_LEVEL=silent: an instance that will not start says why once.
    (log.isLevelEnabled('fatal') ? log : createLogger('fatal')).fatal(fields, msg);
    return 1;
  };
  if (levelProblem) return fail({ msg: levelProblem, hint: `set LOG_LEVEL to one of ${LOG_LEVELS.join(', ')}, or leave it unset (info)` });
  const fleet = cluster.isWorker ? workers.joinFleet() : undefined;
  let gateway: Awaited<ReturnType<typeof startGateway>>;
  let file: string | undefined;
  try {
    // A worker runs what the primary checked, never the file as it may be by now.
    const config = fleet ? await fleet.config : (await loadChecked(configPath).then((loaded) => { file = loaded.file; return loaded.config; }));
    const count = workers.workerCount(config.server.workers);
    if (!fleet && count > 1) {
      const loadFile = file!;
      const code = await workers.runPrimary({
        config, count, log,
        load: async () => (await loadChecked(loadFile)).config,
        stopTimeoutMs: config.server.shutdownDelay + SHUTDOWN_GRACE_MS,
        listening: (urls) => log.info({ url: urls.url, admin: urls.admin, workers: count, storage: 'postgres', node: process.version, nodeFlags: process.execArgv }, 'gateway listening'),
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
  // SIGHUP reloads (src/reload.ts); close-with-grace would otherwise treat it as a shutdown. A
  // worker reloads what the primary read on its SIGHUP instead.
  const stopReloading = fleet ? () => {} : reloadOnSignal(reloadDeps, () => loadConfig(file).config);
  fleet?.onReload((next) => reload(reloadDeps, () => next));
  const { shutdownDelay } = config.server;
  // A worker takes SIGINT from the primary only (workers.ts).
  const grace = closeWithGrace({ delay: shutdownDelay + SHUTDOWN_GRACE_MS, skip: fleet ? ['SIGHUP', 'SIGINT'] : ['SIGHUP'], logger: { error: (m: unknown) => log.error(m) } }, async ({ signal, err }) => {
    stopReloading();
    if (err) log.error({ err }, 'shutting down after an error');
    else log.info({ signal }, 'shutting down: finishing requests in flight');
    // SIGTERM is an orchestrator's or a load balancer's: drain first. Ctrl-C (SIGINT) is a person's.
    await gateway.close(signal === 'SIGTERM' ? shutdownDelay : 0);
    log.info('shut down');
  });
  fleet?.onStop(() => void grace.close());
  const urls = { url: gateway.url, admin: gateway.adminUrl, decisions: gateway.decisionsUrl };
  if (fleet) {
    const { services } = gateway;
    fleet.serve({
      metrics: () => services.metrics.registry.getMetricsAsJSON(),
      readiness: () => readiness({ db: services.db, redis: services.redis?.client ?? null, lifecycle: services.lifecycle }),
    });
    log.info(urls, 'worker listening');
    fleet.listening(urls);
    return -1;
  }
  // Said only now: whoever waits for this line may signal at once, and a SIGHUP that came
  // before its handler would end the process (the default action) instead of reloading.
  log.info({ url: gateway.url, admin: gateway.adminUrl, storage: config.storage.postgres ? 'postgres' : `embedded (${config.storage.embeddedDir})`, node: process.version, nodeFlags: process.execArgv }, 'gateway listening');
  return -1; // keeps running
}

const MIGRATE_HINT = 'run `gateway migrate` with the same configuration (with storage.migrate: false, nothing else applies migrations)';

interface StartFailure {
  msg: string;
  hint: string;
  [detail: string]: unknown;
}

/** What stopped the start, as an operator acts on it: what is wrong, and what to do (hint). */
function startFailure(err: unknown): StartFailure {
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
    return { msg: `cannot listen on ${where}: ${listen.code}`, code: listen.code, address: listen.address, port: listen.port, hint: hints[listen.code ?? ''] ?? 'check server.host/port and admin.host/port' };
  }
  return { msg: `cannot start: ${err instanceof Error ? err.message : String(err)}`, err, hint: 'see err; `gateway check` validates the configuration without the network' };
}

main(process.argv.slice(2)).then((code) => {
  if (code >= 0) process.exitCode = code;
}, (err: unknown) => {
  if (err instanceof ConfigError) console.error(err.message);
  else if (err instanceof UsageError) console.error(`gateway: ${err.message}\n\n${err.usage}`);
  else if (err instanceof CommandError) console.error(`gateway: ${err.message}`);
  else if (err instanceof PendingMigrationsError) console.error(`gateway: ${err.message}\n${MIGRATE_HINT}`);
  else if (err instanceof StorageLockedError) console.error(`gateway: ${err.message}`);
  else if (err instanceof PostgresStartError) console.error(`gateway: ${err.message}\n${err.hint}`);
  else console.error(`gateway: ${err instanceof Error ? err.stack ?? err.message : String(err)}`);
  process.exitCode = 1;
});

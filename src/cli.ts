#!/usr/bin/env -S node --max-semi-space-size=32
// The `gateway` command, also installed as `auth-gateway` (the npm name `gateway` belongs to an
// unrelated package). One entry per subcommand in COMMANDS, each with its own help; node:util
// parseArgs reads the options. Commands import the heavy modules (fastify, storage) themselves,
// so `--help` and `gateway health` (run by Docker every 10 s) start in a fraction of the time.
// The first line gives the installed command (`npx gateway`, `gateway`) the V8 flag npm start and
// the Dockerfile pass (docs/operating.md): however it is launched, the gateway runs alike.
// First: refuses a Node older than package.json's engines before anything else runs.
import './cli/nodeVersion.js';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { CommandError, print, UsageError, type Args, type Command } from './cli/command.js';
import { COMMANDS } from './cli/commands.js';
import { commandHelp, groupHelp, synopsis, usageText, version } from './cli/help.js';
import { MIGRATE_HINT } from './cli/start.js';
import { ConfigError } from './config/load.js';
import { StorageLockedError } from './storage/database/dirLock.js';
import { PendingMigrationsError } from './storage/database/migrations.js';
import { PostgresStartError } from './storage/database/startWait.js';

const USAGE = usageText(COMMANDS);

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


main(process.argv.slice(2)).then((code) => {
  if (code >= 0) process.exitCode = code;
}, (err: unknown) => {
  if (err instanceof ConfigError) console.error(err.message);
  else if (err instanceof UsageError) console.error(`gateway: ${err.message}\n\n${err.usage ?? USAGE}`);
  else if (err instanceof CommandError) console.error(`gateway: ${err.message}`);
  else if (err instanceof PendingMigrationsError) console.error(`gateway: ${err.message}\n${MIGRATE_HINT}`);
  else if (err instanceof StorageLockedError) console.error(`gateway: ${err.message}`);
  else if (err instanceof PostgresStartError) console.error(`gateway: ${err.message}\n${err.hint}`);
  else console.error(`gateway: ${err instanceof Error ? err.stack ?? err.message : String(err)}`);
  process.exitCode = 1;
});


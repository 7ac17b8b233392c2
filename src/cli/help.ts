// The help texts of `gateway`: the command list, a command's own help, a group's.
import { readFileSync } from 'node:fs';
import { LOG_LEVELS, type Command } from './command.js';

const CONFIG_OPTION = '  -c, --config FILE  the configuration file (default: $GATEWAY_CONFIG, else ./gateway.yaml)';
const ADMIN_OPTION = `  --admin URL        act through the running gateway's admin API (e.g. http://127.0.0.1:9090), with
                     admin.apiKey, or an operator's token in GATEWAY_OPERATOR_TOKEN: needed while a
                     gateway holds embedded storage`;

export function synopsis(command: Command): string {
  const own = Object.entries(command.options ?? {}).map(([name, o]) => `[--${name}${o.type === 'string' ? ` ${name.toUpperCase()}` : ''}]`);
  return [command.name, ...(command.operands ?? []), ...own, ...(command.config ? ['[--config FILE]'] : []), ...(command.admin ? ['[--admin URL]'] : [])].join(' ');
}

export function commandHelp(command: Command): string {
  return `Usage: gateway ${synopsis(command)}\n\n${command.help}\n\nOptions:\n${command.config ? `${CONFIG_OPTION}\n` : ''}${command.admin ? `${ADMIN_OPTION}\n` : ''}  -h, --help         this help`;
}

function commandList(commands: Command[]): string {
  const left = (c: Command) => [c.name, ...(c.operands ?? [])].join(' ');
  const width = Math.max(...commands.map((c) => left(c).length));
  return commands.map((c) => `  ${left(c).padEnd(width)}  ${c.summary}`).join('\n');
}

/** The command list and the options every command takes: `gateway --help`. */
export function usageText(commands: Command[]): string {
  return `Usage: gateway <command> [options]     (also installed as auth-gateway)

Commands:
${commandList(commands)}

Options:
${CONFIG_OPTION}
  -h, --help         help; \`gateway COMMAND --help\` (or \`gateway help COMMAND\`) shows a command's own
      --version      print the version

Environment:
  GATEWAY_CONFIG     the configuration file when --config is not given
  PORT, HOST         override server.port and server.host
  ADMIN_PORT, ADMIN_HOST, DECISIONS_PORT, DECISIONS_HOST, REDIS_KEY_PREFIX
                     override admin.*, decisions.* and storage.redisKeyPrefix
  LOG_LEVEL          start: ${LOG_LEVELS.join(', ')} (default info)
  and every \${VAR} the configuration file names

Exit status: 0 on success, 1 on any error.`;
}

/** The help of a group of commands (`gateway users --help`). */
export function groupHelp(group: string, commands: Command[]): string {
  return `Usage: gateway ${group} <${commands.map((c) => c.name.slice(group.length + 1)).join('|')}> … [--config FILE]\n\nCommands:\n${commandList(commands)}\n\n`
    + `Run \`gateway ${group} ACTION --help\` for an action's own help.`;
}

export function version(): string {
  return (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
}

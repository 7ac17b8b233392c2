// Loads gateway.yaml: ${VAR} substitution, YAML parsing, validation, then the PORT/HOST overrides.
// After this, nothing in the gateway reads process.env.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parseDocument } from 'yaml';
import { configSchema, type Config } from './schema.js';

export class ConfigError extends Error {
  constructor(readonly file: string, readonly problems: string[]) {
    super(`${file}: invalid configuration\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

type Env = Record<string, string | undefined>;

export function resolveConfigPath(explicit: string | undefined, env: Env): string {
  return path.resolve(explicit ?? env.GATEWAY_CONFIG ?? 'gateway.yaml');
}

// Whole-line comments are left alone, so documenting `${VAR}` in a comment is not an error.
export function substituteEnv(text: string, env: Env, file: string): string {
  const missing: string[] = [];
  const out = text.split('\n').map((line) => {
    if (/^\s*#/.test(line)) return line;
    return line.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g, (_m, name: string, fallback?: string) => {
      const value = env[name];
      if (value !== undefined && value !== '') return value;
      if (fallback !== undefined) return fallback;
      if (value === '') return '';
      missing.push(`\${${name}}: environment variable ${name} is not set and has no default (write \${${name}:-default})`);
      return '';
    });
  }).join('\n');
  if (missing.length) throw new ConfigError(file, missing);
  return out;
}

export function parseConfig(text: string, file: string, env: Env = {}): Config {
  const doc = parseDocument(substituteEnv(text, env, file));
  if (doc.errors.length) throw new ConfigError(file, doc.errors.map((e) => `YAML: ${e.message.split('\n')[0]}`));
  const raw = doc.toJS() ?? {};
  const result = configSchema.safeParse(raw);
  if (!result.success) {
    throw new ConfigError(file, result.error.issues.map((issue) => {
      const key = issue.path.length ? issue.path.map((p, i) => (typeof p === 'number' ? `[${p}]` : `${i ? '.' : ''}${String(p)}`)).join('') : '(top level)';
      const message = issue.code === 'unrecognized_keys' ? `unknown key(s) ${issue.keys.map((k) => JSON.stringify(k)).join(', ')}` : issue.message;
      return `${key}: ${message}`;
    }));
  }
  const config = result.data;
  if (env.PORT) config.server.port = validPort(env.PORT, 'PORT', file);
  if (env.HOST) config.server.host = env.HOST;
  return config;
}

function validPort(text: string, name: string, file: string): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new ConfigError(file, [`${name}: expected a port number, got ${JSON.stringify(text)}`]);
  return n;
}

export function loadConfig(explicitPath: string | undefined, env: Env = process.env): { config: Config; file: string } {
  const file = resolveConfigPath(explicitPath, env);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError(file, [`cannot read the file: ${(err as NodeJS.ErrnoException).code ?? String(err)}`]);
  }
  const config = parseConfig(text, file, env);
  // Relative paths in the file are relative to the file, not to wherever the process was started.
  const base = path.dirname(file);
  config.storage.embeddedDir = path.resolve(base, config.storage.embeddedDir);
  if (config.auth.jwt.privateKeyFile) config.auth.jwt.privateKeyFile = path.resolve(base, config.auth.jwt.privateKeyFile);
  if (config.webhooks.caFile) config.webhooks.caFile = path.resolve(base, config.webhooks.caFile);
  return { config, file };
}

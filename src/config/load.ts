// Loads gateway.yaml: YAML parsing, ${VAR} substitution, validation, then the PORT/HOST overrides.
// After this, nothing in the gateway reads process.env.
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { isPair, isScalar, isSeq, parseDocument, visit, type Document } from 'yaml';
import { fileSettings } from './files.js';
import { configSchema, type Config } from './schema.js';
import type { z } from 'zod';

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

/** `${VAR}` or `${VAR:-default}` anywhere in a value. */
export const ENV_REFERENCE = /\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g;

/**
 * `${VAR}` and `${VAR:-default}` are replaced in the parsed YAML, never in its text: a value holding
 * `#`, `: `, `*` or quotes (common in secrets) would otherwise be re-read as YAML and silently cut
 * short or change the file's structure. References are first masked by placeholders that YAML
 * reads as plain text, so comments drop theirs and flow collections (`{ max: ${MAX} }`) still parse.
 */
export function parseConfig(text: string, file: string, env: Env = {}): Config {
  const nonce = randomBytes(6).toString('hex');
  const references: Array<{ name: string; fallback?: string }> = [];
  const masked = text.replace(ENV_REFERENCE, (_m, name: string, fallback?: string) => `__gwenv${nonce}_${references.push({ name, fallback }) - 1}__`);
  const doc = parseDocument(masked);
  if (doc.errors.length) throw new ConfigError(file, doc.errors.map((e) => `YAML: ${e.message.split('\n')[0]}`));
  substituteEnv(doc, new RegExp(`__gwenv${nonce}_(\\d+)__`, 'g'), references, env, file);
  const raw = doc.toJS() ?? {};
  const result = configSchema.safeParse(raw);
  if (!result.success) {
    throw new ConfigError(file, result.error.issues.flatMap(meantBranch).map((issue) => {
      const message = issue.code === 'unrecognized_keys' ? unknownKeys(issue.keys, keysAt(issue.path)) : issue.message;
      return `${keyPath(issue.path)}: ${message}`;
    }));
  }
  const config = result.data;
  if (env.PORT) config.server.port = validPort(env.PORT, 'PORT', file);
  if (env.HOST) config.server.host = env.HOST;
  return config;
}

/**
 * A value that fits no form of a union (storage.redis: a URL, a sentinels map or a cluster map)
 * gets each form's complaints. Show those of the form it was meant as: the one whose complaints
 * all lie deepest (a bad address inside `sentinels` rather than "not a string" or "unknown key
 * sentinels"). When no form stands out, the union's own message says what is expected.
 */
function meantBranch(issue: z.core.$ZodIssue): z.core.$ZodIssue[] {
  if (issue.code !== 'invalid_union' || !issue.errors.length) return [issue];
  const depth = (branch: z.core.$ZodIssue[]) => Math.min(...branch.map((i) => i.path.length));
  const deepest = Math.max(...issue.errors.map(depth));
  const meant = issue.errors.filter((branch) => depth(branch) === deepest);
  if (deepest === 0 || meant.length !== 1) return [issue];
  return meant[0]!.flatMap(meantBranch).map((i) => ({ ...i, path: [...issue.path, ...i.path] }));
}

/** `unknown key(s) "timout" (did you mean "timeout"?)`: each key with the known one it is closest to, if any is close. */
function unknownKeys(keys: readonly string[], known: readonly string[]): string {
  const named = keys.map((key) => {
    const guess = closest(key, known);
    return guess ? `${JSON.stringify(key)} (did you mean ${JSON.stringify(guess)}?)` : JSON.stringify(key);
  });
  return `unknown key(s) ${named.join(', ')}`;
}

/** The known key spelled closest to `key`: the same but for case, or at most two edits away (one for short keys). */
function closest(key: string, known: readonly string[]): string | undefined {
  const lower = key.toLowerCase();
  const allowed = key.length <= 4 ? 1 : 2;
  let best: { name: string; distance: number } | undefined;
  for (const name of known) {
    // Known elsewhere (another form of a union): not a misspelling.
    if (name === key) continue;
    const distance = name.toLowerCase() === lower ? 0 : editDistance(lower, name.toLowerCase());
    if (distance <= allowed && (!best || distance < best.distance)) best = { name, distance };
  }
  return best?.name;
}

/** Levenshtein distance, with a swap of neighbours counting one (`tiemout`). */
function editDistance(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array<number>(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) d[0]![j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      d[i]![j] = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d[i]![j] = Math.min(d[i]![j]!, d[i - 2]![j - 2]! + 1);
    }
  }
  return d[a.length]![b.length]!;
}

type SchemaNode = { _zod?: { def?: { type: string; innerType?: SchemaNode; in?: SchemaNode; shape?: Record<string, SchemaNode>; element?: SchemaNode; valueType?: SchemaNode; options?: SchemaNode[] } } };

/** The keys the schema knows for the object at `path` (through defaults, pipes, arrays, maps and unions). */
function keysAt(path: ReadonlyArray<PropertyKey>): string[] {
  const unwrap = (node: SchemaNode | undefined): SchemaNode[] => {
    const def = node?._zod?.def;
    if (!def) return [];
    if (def.innerType) return unwrap(def.innerType);
    if (def.type === 'pipe') return unwrap(def.in);
    if (def.type === 'union') return (def.options ?? []).flatMap(unwrap);
    return [node!];
  };
  let nodes = unwrap(configSchema as unknown as SchemaNode);
  for (const key of path) {
    nodes = nodes.flatMap((node) => {
      const def = node._zod!.def!;
      if (def.type === 'object') return unwrap(def.shape?.[String(key)]);
      if (def.type === 'array') return unwrap(def.element);
      if (def.type === 'record') return unwrap(def.valueType);
      return [];
    });
  }
  return nodes.flatMap((node) => Object.keys(node._zod!.def!.shape ?? {}));
}

function keyPath(path: ReadonlyArray<PropertyKey>): string {
  return path.length ? path.map((p, i) => (typeof p === 'number' ? `[${p}]` : `${i ? '.' : ''}${String(p)}`)).join('') : '(top level)';
}

function substituteEnv(doc: Document, placeholder: RegExp, references: Array<{ name: string; fallback?: string }>, env: Env, file: string): void {
  const missing: string[] = [];
  visit(doc, {
    Scalar(_key, node, ancestors) {
      if (typeof node.value !== 'string' || !node.value.match(placeholder)) return;
      const resolve = (index: string): string => {
        const { name, fallback } = references[Number(index)]!;
        const value = env[name];
        if (value !== undefined && value !== '') return value;
        if (fallback !== undefined) return fallback;
        if (value === '') return '';
        missing.push(`${nodePath(ancestors, node)}: \${${name}}: environment variable ${name} is not set and has no default (write \${${name}:-default})`);
        return '';
      };
      const whole = new RegExp(`^${placeholder.source}$`).exec(node.value);
      // Alone in a plain scalar, an empty value reads as `key:` with nothing (null); values stay
      // text otherwise, and the schema reads "20" or "true" where it expects a number or boolean.
      node.value = whole && node.type === 'PLAIN' ? resolve(whole[1]!) || null : node.value.replace(placeholder, (_m, index: string) => resolve(index));
    },
  });
  if (missing.length) throw new ConfigError(file, missing);
}

/** The key path (auth.jwt.secret, routes[0].upstream) of a node, from the visitor's ancestors. */
function nodePath(ancestors: readonly unknown[], node: unknown): string {
  const segments: PropertyKey[] = [];
  const chain = [...ancestors, node];
  chain.forEach((item, i) => {
    const child = chain[i + 1];
    if (isPair(item)) segments.push(isScalar(item.key) ? String(item.key.value) : String(item.key));
    else if (isSeq(item) && child !== undefined) segments.push(item.items.indexOf(child as never));
  });
  return keyPath(segments);
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
  for (const setting of fileSettings(config)) {
    const file = setting.get();
    if (file) setting.set(path.resolve(base, file));
  }
  return { config, file };
}

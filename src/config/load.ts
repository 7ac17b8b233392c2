// Loads gateway.yaml: YAML parsing, ${VAR} substitution, the environment's overrides (PORT, HOST,
// ADMIN_*, DECISIONS_*, REDIS_KEY_PREFIX), then validation.
// After this, nothing in the gateway reads process.env.
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { isPair, isScalar, isSeq, parseDocument, stringify, visit, type Document } from 'yaml';
import { fileSettings } from './files.js';
import { configSchema, originsWithoutCookie, type Config } from './schema.js';
import { z } from 'zod';
import { sectionOf, withEnvironment } from './environment.js';

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
  const { raw, problems: envProblems } = withEnvironment(doc.toJS() ?? {}, env);
  if (envProblems.length) throw new ConfigError(file, envProblems);
  // Zod's own wording ("Invalid input: expected array, received string") is marked, to be
  // replaced by what the schema expects there (expected()); a message the schema gives is kept.
  const result = configSchema.safeParse(raw, { error: (issue) => `${GENERIC}${zodMessage(issue)}`, reportInput: true });
  if (!result.success) throw new ConfigError(file, problems(result.error.issues));
  const config = result.data;
  // server.host unset: loopback on embedded storage (`npm start` on a laptop is not a server for
  // the café's network), every interface with Postgres (a deployment behind its load balancer).
  if (sectionOf(raw, 'server')?.host == null && config.storage.postgres) config.server.host = '0.0.0.0';
  return config;
}

const GENERIC = '\u0000';

function zodMessage(issue: z.core.$ZodRawIssue): string {
  const message = z.config().localeError?.(issue);
  return (typeof message === 'string' ? message : message?.message) ?? 'Invalid input';
}

/** `key.path: message` for each issue, zod's generic wording replaced by what is expected there. */
function problems(issues: readonly z.core.$ZodIssue[]): string[] {
  const all = issues.flatMap(meantBranch);
  return all.filter((issue, i) => !followsFrom(issue, all.slice(0, i))).map((issue) => {
    if (issue.code === 'unrecognized_keys') return `${keyPath(issue.path)}: ${unknownKeys(issue.keys, keysAt(issue.path))}`;
    if (issue.code === 'invalid_key') {
      // A map's key (plans.limits.Gold): the key's own problem, said of the map.
      const key = issue.path.at(-1)!;
      const inner = issue.issues.map((i) => (i.message.startsWith(GENERIC) ? expected(issue.path, i, 'key') ?? i.message.slice(1) : i.message));
      return `${keyPath(issue.path.slice(0, -1))}: key ${JSON.stringify(String(key))}: ${inner.join('; ')}`;
    }
    const message = issue.message.startsWith(GENERIC) ? expected(issue.path, issue) ?? issue.message.slice(1) : issue.message;
    return `${keyPath(issue.path)}: ${message}`;
  });
}

/**
 * A rule between keys (configSchema's check) also runs when a section is malformed, reading it as
 * written: what it then says of a value already reported as the wrong type (`server: 5`, then
 * "more than one worker…") is that problem again, not another one.
 */
function followsFrom(issue: z.core.$ZodIssue, before: readonly z.core.$ZodIssue[]): boolean {
  if (issue.code !== 'custom') return false;
  return before.some((b) => b.code !== 'custom' && b.code !== 'unrecognized_keys' && b.path.length <= issue.path.length && b.path.every((p, i) => p === issue.path[i]));
}

/**
 * What is expected at `path`, said from the schema itself (its type, its values, its range, its
 * `.meta({ title, examples })`, its default), in one form for every key: "expected a list of plan
 * names, e.g. [premium, pro]", "expected a whole number from 0 to 65535, e.g. 8080", "expected
 * true or false", "expected one of required, optional, none". Undefined where the schema does not
 * say: zod's wording is kept. Range problems keep it too ("Too big: expected number to be
 * <=65535"): it names the bound crossed.
 */
function expected(path: ReadonlyArray<PropertyKey>, issue: { code: string; input?: unknown }, part: 'value' | 'key' = 'value'): string | undefined {
  if (!['invalid_type', 'invalid_value', 'invalid_union', 'invalid_format'].includes(issue.code)) return undefined;
  const found = nodesAt(path, part)[0];
  const said = found && describe(found);
  if (!said) return undefined;
  const missing = 'input' in issue && issue.input === undefined;
  // Text written as a number or true (`name: 123`): the value itself, quoted, is the example.
  const quoted = said.text && said.examples.length === 0 && (typeof issue.input === 'number' || typeof issue.input === 'boolean') ? [String(issue.input)] : [];
  const example = said.listed ? undefined : [...said.examples, ...quoted][0];
  return `${missing ? 'missing; ' : ''}expected ${said.one}${example === undefined ? '' : `, e.g. ${yamlText(example)}`}`;
}

type Def = {
  type: string; innerType?: SchemaNode; in?: SchemaNode; out?: SchemaNode; shape?: Record<string, SchemaNode>; element?: SchemaNode;
  keyType?: SchemaNode; valueType?: SchemaNode; options?: SchemaNode[]; entries?: Record<string, string | number>; values?: unknown[];
  checks?: Array<{ _zod: { def: { check: string; value?: unknown; inclusive?: boolean; format?: string; minimum?: number } } }>; defaultValue?: unknown;
};
type SchemaNode = { _zod?: { def?: Def } };
/** A schema node with what its wrappers said: its default and its meta (outermost first). */
type Found = { node: SchemaNode; fallback?: unknown; title?: string; examples?: unknown[] };

/** The node under defaults, optionals, pipes (their input side) and preprocessing, gathering default and meta on the way. */
function unwrap(node: SchemaNode | undefined, seen: Omit<Found, 'node'> = {}): Found[] {
  const def = node?._zod?.def;
  if (!def) return [];
  const meta = z.globalRegistry.get(node as z.ZodType) as { title?: string; examples?: unknown[] } | undefined;
  const found = { title: seen.title ?? meta?.title, examples: seen.examples ?? meta?.examples, fallback: seen.fallback };
  if ((def.type === 'default' || def.type === 'prefault') && found.fallback === undefined) found.fallback = def.defaultValue;
  if (def.innerType) return unwrap(def.innerType, found);
  // z.preprocess is a pipe from a transform: what it checks is the pipe's output.
  if (def.type === 'pipe') return unwrap(def.in?._zod?.def?.type === 'transform' ? def.out : def.in, found);
  return [{ node: node!, ...found }];
}

/** The schema nodes at `path` (through objects, lists, maps and the forms of unions); `key`: a map's key type at its last step. */
function nodesAt(path: ReadonlyArray<PropertyKey>, part: 'value' | 'key' = 'value'): Found[] {
  let found = unwrap(configSchema as unknown as SchemaNode);
  path.forEach((key, i) => {
    found = found.flatMap((f) => (f.node._zod!.def!.type === 'union' ? f.node._zod!.def!.options!.flatMap((o) => unwrap(o)) : [f])).flatMap(({ node }) => {
      const def = node._zod!.def!;
      if (def.type === 'object') return unwrap(def.shape?.[String(key)]);
      if (def.type === 'array') return unwrap(def.element);
      if (def.type === 'record') return unwrap(part === 'key' && i === path.length - 1 ? def.keyType : def.valueType);
      return [];
    });
  });
  return found;
}

/** The keys the schema knows for the object at `path` (through defaults, pipes, arrays, maps and unions). */
function keysAt(path: ReadonlyArray<PropertyKey>): string[] {
  return nodesAt(path).flatMap((f) => (f.node._zod!.def!.type === 'union' ? f.node._zod!.def!.options!.flatMap((o) => unwrap(o)) : [f]))
    .flatMap((f) => Object.keys(f.node._zod!.def!.shape ?? {}));
}

/**
 * How to say what a node expects: one value of it (`a plan name`), several (`plan names`), examples
 * (its default first); `listed`: the values are named (an enum, true or false), no example needed.
 */
type Said = { one: string; many: string; examples: unknown[]; listed?: boolean; text?: boolean };

function describe(found: Found): Said | undefined {
  const { node, title } = found;
  const def = node._zod!.def!;
  const checks = (def.checks ?? []).map((c) => c._zod.def);
  const given = [...(empty(found.fallback) ? [] : [found.fallback]), ...(found.examples ?? [])];
  const titled = (one: string, many: string, examples: unknown[] = []): Said => ({ one: title ? article(title) : one, many: title ? plural(title) : many, examples: [...given, ...examples] });
  switch (def.type) {
    case 'boolean':
      return { one: 'true or false', many: 'true or false values', examples: [true, false], listed: true };
    case 'enum':
    case 'literal': {
      const values = def.type === 'enum' ? Object.values(def.entries!) : def.values!;
      const listed = values.map((v) => yamlText(v)).join(', ');
      return { one: values.length === 1 ? listed : `one of ${listed}`, many: title ? plural(title) : `values among ${listed}`, examples: [...given, ...values], listed: true };
    }
    case 'number': {
      const whole = checks.some((c) => c.check === 'number_format' && /int/.test(c.format ?? ''));
      const above = checks.find((c) => c.check === 'greater_than');
      const min = above && (above.inclusive || !whole ? (above.value as number) : (above.value as number) + 1);
      const max = checks.find((c) => c.check === 'less_than')?.value as number | undefined;
      const range = min !== undefined && max !== undefined && max < Number.MAX_SAFE_INTEGER ? ` from ${min} to ${max}` : min !== undefined ? ` of at least ${min}` : '';
      const kind = whole ? 'whole number' : 'number';
      return titled(`a ${kind}${range}`, `${kind}s${range}`, [min !== undefined && min > 0 ? min : 1]);
    }
    case 'string': {
      const nonEmpty = checks.some((c) => c.check === 'min_length' && (c.minimum ?? 0) > 0);
      return { ...titled(nonEmpty ? 'non-empty text' : 'text', nonEmpty ? 'non-empty texts' : 'texts'), text: true };
    }
    case 'array': {
      const element = unwrap(def.element)[0];
      const each = element && describe(element);
      if (!each) return undefined;
      return { one: `a list of ${each.many}`, many: `lists of ${each.many}`, examples: [...given, ...(each.examples.length ? [each.examples.slice(0, 2)] : [])] };
    }
    case 'object': {
      // The keys it needs, with an example each; if it needs none, the first key that has one.
      const shape = Object.entries(def.shape ?? {});
      const required = shape.filter(([, child]) => !optional(child));
      const entries = (required.length ? required : shape).flatMap(([key, child]) => {
        const inner = unwrap(child)[0];
        const example = inner && describe(inner)?.examples[0];
        return example === undefined ? [] : [[key, example] as const];
      });
      return titled('a map', 'maps', entries.length ? [Object.fromEntries(required.length ? entries : entries.slice(0, 1))] : []);
    }
    case 'record': {
      const key = unwrap(def.keyType)[0];
      const value = unwrap(def.valueType)[0];
      const example = value && describe(value)?.examples[0];
      return titled('a map', 'maps', example === undefined ? [] : [{ [String(key?.examples?.[0] ?? 'name')]: example }]);
    }
    case 'union': {
      if (title) return titled('', '');
      const forms = def.options!.map((o) => unwrap(o)[0]).map((f) => f && describe(f));
      if (forms.some((f) => !f)) return undefined;
      return { one: forms.map((f) => f!.one).join(' or '), many: forms.map((f) => f!.many).join(' or '), examples: [...given, ...forms.flatMap((f) => f!.examples)] };
    }
    default:
      return undefined;
  }
}

/** Whether a key may be left out (it is optional or has a default). */
function optional(node: SchemaNode | undefined): boolean {
  const def = node?._zod?.def;
  if (!def) return false;
  if (def.type === 'optional' || def.type === 'default' || def.type === 'prefault') return true;
  if (def.type === 'pipe') return optional(def.in);
  return def.innerType ? optional(def.innerType) : false;
}

function empty(value: unknown): boolean {
  return value === undefined || value === '' || value === 0 || (Array.isArray(value) && !value.length) || (typeof value === 'object' && value !== null && !Object.keys(value).length);
}

function article(noun: string): string {
  return `${/^[aeiou]/i.test(noun) ? 'an' : 'a'} ${noun}`;
}

function plural(noun: string): string {
  return /(s|sh|ch|x)$/.test(noun) ? `${noun}es` : `${noun}s`;
}

/** A value as it would be written in the file, in flow style: `[premium, pro]`, `{ url: http://127.0.0.1:3000 }`. */
function yamlText(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(yamlText).join(', ')}]`;
  if (value && typeof value === 'object') return `{ ${Object.entries(value).map(([k, v]) => `${yamlText(k)}: ${yamlText(v)}`).join(', ')} }`;
  return stringify(value, { lineWidth: 0 }).trimEnd();
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


export const NO_CONFIG_FILE = 'no such file: write one with `npx gateway init` (`--profile public-api` for a public API), or name another with --config FILE or GATEWAY_CONFIG';

export function loadConfig(explicitPath: string | undefined, env: Env = process.env): { config: Config; file: string } {
  const file = resolveConfigPath(explicitPath, env);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    // The first thing a newcomer meets without a file: say how to make one (CONTRACT §28).
    throw new ConfigError(file, [code === 'ENOENT' ? NO_CONFIG_FILE : `cannot read the file: ${code ?? String(err)}`]);
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

/**
 * What `gateway check` warns about in a valid configuration: settings whose meaning changed under
 * them. An auth.oidc.returnTo entry ending in "/" below the root was a prefix for every page under
 * it (CONTRACT §15); it is now one exact URL (§26), and the pages under it are refused.
 */
export function configWarnings(config: Config): string[] {
  const oidc = config.auth.oidc;
  const prefixes = (oidc?.returnTo ?? []).flatMap((entry, i) => (new URL(entry).pathname.length > 1 && entry.endsWith('/')
    ? [`auth.oidc.returnTo[${i}]: ${entry} is an exact URL, no longer a prefix (CONTRACT §26): a return_to under it is refused; list each page the browser comes back to`]
    : []));
  // On by default (every return page is of the gateway's site), yet a page's exchange could not carry the cookie.
  const unbindable = oidc?.bindToBrowser && oidc.bindToBrowserDefaulted ? originsWithoutCookie(config) : [];
  return [...prefixes, ...unbindable.map((origin) => 'auth.oidc.bindToBrowser: on by default (every returnTo origin is same-site with publicUrl), '
    + `but cors does not allow ${origin} with credentials: true, so its page's exchange cannot carry the gw_oidc cookie and is refused; `
    + 'allow it in cors, or set bindToBrowser: false to bind by the application\'s PKCE verifier alone')];
}

// The shape of the code, enforced: no import cycles among src/ modules (STYLE 14: a type declared
// in the composition root and implemented in a leaf makes a circle), and the composition root is
// read only by the listeners' builders and the server, never by the modules they wire.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const SRC = path.resolve(import.meta.dirname, '../../src');
const IMPORT = /^\s*(?:import|export)\s[^'"]*?from\s+'(\.[^']+)'/gm;
const PACKAGE_IMPORT = /^\s*(?:import|export)\s([^'"]*?)from\s+'([^.'][^']*)'/gm;

/** Modules at the bottom: every room may import them, and they import nothing of the gateway but each other. */
// The errors room's door and what it is made of: every room answers errors.
const ERRORS_ROOM = ['errors/index.ts', 'errors/catalog.ts', 'errors/messages.ts', 'errors/success.ts', 'errors/negotiation.ts'];
const LEAVES = new Set([
  ...ERRORS_ROOM, 'time.ts', 'credentials/digest.ts', 'http.ts', 'telemetry/logger.ts', 'telemetry/metrics.ts', 'telemetry/logThrottle.ts', 'pipeline/plans.ts',
  'config/schema.ts', 'config/schema/values.ts', 'config/schema/routes.ts', 'config/schema/providers.ts', 'config/schema/billing.ts', 'config/schema/hooks.ts',
  'config/schema/redis.ts', 'routing/paths.ts', 'routing/methodOverrides.ts', 'orgActing.ts',
]);
/**
 * What speaks HTTP: the listeners' framework (even its types: code that names a FastifyRequest is
 * an adapter), the HTTP client and server modules (their values; IncomingHttpHeaders is a plain type).
 */
function speaksHttp(spec: string): boolean {
  const [name, typeOnly] = spec.split(' ');
  if (name === 'fastify' || name!.startsWith('@fastify/')) return true;
  return typeOnly !== 'type' && ['undici', 'ws', 'node:http', 'node:https', 'node:http2'].includes(name!);
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(full);
    return entry.name.endsWith('.ts') ? [full] : [];
  });
}

/** src-relative file → the src-relative files it imports (type-only imports included: they are dependencies too). */
function importGraph(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of sourceFiles(SRC)) {
    const text = readFileSync(file, 'utf8');
    const targets = [...text.matchAll(IMPORT)].map((m) => path.relative(SRC, path.resolve(path.dirname(file), m[1]!.replace(/\.js$/, '.ts'))));
    graph.set(path.relative(SRC, file), targets);
  }
  return graph;
}

function cycles(graph: Map<string, string[]>): string[][] {
  const found: string[][] = [];
  const state = new Map<string, 'visiting' | 'done'>();
  const stack: string[] = [];
  const visit = (node: string) => {
    if (state.get(node) === 'done') return;
    if (state.get(node) === 'visiting') {
      found.push([...stack.slice(stack.indexOf(node)), node]);
      return;
    }
    state.set(node, 'visiting');
    stack.push(node);
    for (const next of graph.get(node) ?? []) visit(next);
    stack.pop();
    state.set(node, 'done');
  };
  for (const node of graph.keys()) visit(node);
  return found;
}

/** src-relative file → the packages (npm and node:) it imports, as `name` or `name type` for a type-only import. */
function packageImports(): Map<string, string[]> {
  return new Map(sourceFiles(SRC).map((file) => [
    path.relative(SRC, file),
    [...readFileSync(file, 'utf8').matchAll(PACKAGE_IMPORT)].map((m) => (/^type\s/.test(m[1]!) ? `${m[2]} type` : m[2]!)),
  ]));
}

/** `file → target` for every import of a file under `from` (a folder or a file) that `allowed` refuses. */
function refused(graph: Map<string, string[]>, from: (file: string) => boolean, allowed: (target: string) => boolean): string[] {
  return [...graph].filter(([file]) => from(file)).flatMap(([file, targets]) => targets.filter((t) => !allowed(t)).map((t) => `${file} → ${t}`));
}

const under = (folder: string) => (file: string) => file.startsWith(`${folder}/`);

/** A file's room: its folder under src/, or the file itself at the root. */
const roomOf = (file: string) => (file.includes('/') ? file.split('/')[0]! : file);

/**
 * The arrows that run back up between rooms, each named in docs/architecture.md with its reason;
 * without them the rooms form no cycle.
 */
const UPWARD_ARROWS = [
  'config/schema/routes.ts → routing/paths.ts', // a route's path is validated by the normalizer the router uses
  'live/reload.ts → pipeline/index.ts', // SIGHUP hands the daily limiter the plans' new limits
  'live/reload.ts → listener/tls.ts', // SIGHUP rereads the listeners' certificates with the file
];

/** The rooms and the arrows between them, but the upward arrows named above. */
function roomGraph(graph: Map<string, string[]>): Map<string, string[]> {
  const rooms = new Map<string, Set<string>>();
  for (const [file, targets] of graph) {
    const from = roomOf(file);
    if (!rooms.has(from)) rooms.set(from, new Set());
    for (const target of targets) {
      if (roomOf(target) !== from && !UPWARD_ARROWS.includes(`${file} → ${target}`)) rooms.get(from)!.add(roomOf(target));
    }
  }
  return new Map([...rooms].map(([room, targets]) => [room, [...targets]]));
}

/** The files and packages `entry` loads when it starts: its static imports and theirs, type-only ones left out (erased). */
function loadedAtStart(entry: string): Set<string> {
  const VALUE_IMPORT = /^\s*(?:import|export)\s+(?!type\s)(?:[^'"]*?from\s+)?'([^']+)'/gm;
  const seen = new Set<string>();
  const visit = (file: string) => {
    if (seen.has(file)) return;
    seen.add(file);
    for (const [, spec] of readFileSync(path.join(SRC, file), 'utf8').matchAll(VALUE_IMPORT)) {
      if (spec!.startsWith('.')) visit(path.relative(SRC, path.resolve(path.dirname(path.join(SRC, file)), spec!.replace(/\.js$/, '.ts'))));
      else seen.add(spec!);
    }
  };
  visit(entry);
  return seen;
}

describe('module dependencies', () => {
  const graph = importGraph();
  const packages = packageImports();

  it('every relative import names a file that exists', () => {
    const missing = [...graph].flatMap(([file, targets]) => targets.filter((t) => !graph.has(t)).map((t) => `${file} → ${t}`));
    expect(missing).toEqual([]);
  });

  it('form no cycle', () => {
    expect(cycles(graph).map((cycle) => cycle.join(' → '))).toEqual([]);
  });

  it('rooms form no cycle either, but for the upward arrows named and justified in docs/architecture.md', () => {
    expect(cycles(roomGraph(graph)).map((cycle) => cycle.join(' → '))).toEqual([]);
    const present = UPWARD_ARROWS.filter((arrow) => { const [from, to] = arrow.split(' → '); return graph.get(from!)?.includes(to!); });
    expect(present).toEqual(UPWARD_ARROWS);
    expect(UPWARD_ARROWS.length).toBeLessThanOrEqual(4);
  });

  it('leave the composition root to the listeners\' builders and the server', () => {
    const readers = [...graph].filter(([, targets]) => targets.includes('instance.ts')).map(([file]) => file).sort();
    expect(readers).toEqual(['admin/app.ts', 'app.ts', 'decisions/app.ts', 'server.ts']);
  });

  it('routing reads neither the proxy, the pipeline, the guards nor storage: both callers use it, it uses neither', () => {
    expect(refused(graph, under('routing'), (t) => t.startsWith('routing/') || t === 'config/schema.ts' || LEAVES.has(t))).toEqual([]);
  });

  it('the pipeline imports nothing from the proxy, a listener or fastify: it decides, the proxy forwards', () => {
    expect(refused(graph, under('pipeline'), (t) => !t.startsWith('proxy/') && !t.startsWith('listener/') && t !== 'app.ts')).toEqual([]);
    expect(refused(packages, under('pipeline'), (p) => !speaksHttp(p))).toEqual([]);
  });

  it('guards are pipeline stages: they never import the pipeline that runs them', () => {
    expect(refused(graph, under('pipeline/guards'), (t) => t !== 'pipeline/pipeline.ts' && t !== 'pipeline/index.ts')).toEqual([]);
  });

  it('the pipeline has one door: nothing outside it imports past pipeline/index.ts', () => {
    expect(refused(graph, (f) => !f.startsWith('pipeline/'), (t) => !t.startsWith('pipeline/') || t === 'pipeline/index.ts' || LEAVES.has(t))).toEqual([]);
  });

  it('the account system has one door: nothing outside auth/ imports past auth/index.ts', () => {
    expect(refused(graph, (f) => !f.startsWith('auth/'), (t) => !t.startsWith('auth/') || t === 'auth/index.ts')).toEqual([]);
  });

  it('organizations have one door: nothing outside orgs/ imports past orgs/index.ts, and below it nothing imports orgs/', () => {
    expect(refused(graph, (f) => !f.startsWith('orgs/'), (t) => !t.startsWith('orgs/') || t === 'orgs/index.ts')).toEqual([]);
    // A feature is a folder with one door (docs/architecture.md, 24): only the public listener's builder opens it.
    expect([...graph].filter(([file, targets]) => !file.startsWith('orgs/') && targets.some((t) => t.startsWith('orgs/'))).map(([file]) => file)).toEqual(['app.ts']);
  });

  it('the command line starts light: `gateway --help` and `gateway health` load no framework, client or pipeline', () => {
    const loaded = [...loadedAtStart('cli.ts')];
    const heavy = ['fastify', 'undici', 'ioredis', 'pg', 'jose', 'argon2', '@electric-sql/pglite'];
    expect(loaded.filter((m) => heavy.includes(m) || ((m.startsWith('pipeline/') || m.startsWith('auth/') || m === 'server.ts') && !LEAVES.has(m)))).toEqual([]);
    expect(loaded).toContain('cli/commands.ts');
  });

  it('leaves import nothing above them', () => {
    expect(refused(graph, (f) => LEAVES.has(f), (t) => LEAVES.has(t))).toEqual([]);
  });

  it('billing is entered by the composition root and the public listener only, and reaches neither the pipeline, the proxy nor auth', () => {
    expect([...graph].filter(([file, targets]) => !file.startsWith('billing/') && targets.some((t) => t.startsWith('billing/'))).map(([file]) => file).sort()).toEqual(['app.ts', 'instance.ts']);
    const allowed = (t: string) => ['billing/', 'storage/', 'config/', 'errors/'].some((room) => t.startsWith(room))
      || ['audit.ts', 'account/change.ts', 'openapi.ts', 'listener/requireUser.ts', 'orgActing.ts'].includes(t);
    expect(refused(graph, under('billing'), allowed)).toEqual([]);
  });

  it('storage knows no HTTP: no listener, client or framework, and nothing of the rooms above it', () => {
    const beneath = new Set(['config/schema.ts', ...ERRORS_ROOM, 'time.ts', 'telemetry/logThrottle.ts', 'telemetry/storeCalls.ts', 'credentials/digest.ts']);
    expect(refused(graph, under('storage'), (t) => t.startsWith('storage/') || beneath.has(t))).toEqual([]);
    expect(refused(packages, under('storage'), (p) => !speaksHttp(p))).toEqual([]);
  });
});

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
// The errors room, door and all: every room answers errors (through the door, below).
const ERRORS_ROOM = ['errors/index.ts', 'errors/catalog.ts', 'errors/messages.ts', 'errors/success.ts', 'errors/negotiation.ts', 'errors/listing.ts', 'errors/messageFiles.ts'];
const LEAVES = new Set([
  ...ERRORS_ROOM, 'time.ts', 'credentials/digest.ts', 'http.ts', 'telemetry/logger.ts', 'telemetry/metrics.ts', 'telemetry/logThrottle.ts', 'pipeline/plans.ts',
  'config/schema.ts', 'config/schema/values.ts', 'config/schema/routes.ts', 'config/schema/providers.ts', 'config/schema/billing.ts', 'config/schema/hooks.ts',
  'config/schema/redis.ts', 'config/schema/storage.ts', 'config/schema/portal.ts', 'config/schema/server.ts', 'config/schema/auth.ts', 'config/schema/apiKeys.ts',
  'config/schema/admin.ts', 'config/schema/telemetry.ts', 'config/schema/mail.ts', 'config/schema/sso.ts', 'credentials/emailAddress.ts',
  'routing/paths.ts', 'routing/methodOverrides.ts', 'orgActing.ts',
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

/**
 * Every room with a door (an index.ts, STYLE 24): nothing outside the room imports a file of it
 * but the door, and the few files named beside it, each with its reason.
 */
const DOORS: Record<string, { door: string; alsoOpen?: Record<string, string> }> = {
  auth: { door: 'auth/index.ts' },
  errors: { door: 'errors/index.ts' },
  import: { door: 'import/index.ts' },
  keys: { door: 'keys/index.ts' },
  mail: { door: 'mail/index.ts' },
  domains: { door: 'domains/index.ts' },
  orgs: { door: 'orgs/index.ts' },
  pipeline: { door: 'pipeline/index.ts', alsoOpen: { 'pipeline/plans.ts': 'a leaf: the CLI reads the plans without loading the pipeline' } },
  portal: { door: 'portal/index.ts' },
  scim: { door: 'scim/index.ts' },
  stripeFake: {
    door: 'stripeFake/index.ts',
    alsoOpen: {
      'stripeFake/dataDir.ts': 'the CLI reads the default data directory without loading the double (and stripe)',
      'stripeFake/triggers.ts': 'the CLI reads the trigger names without loading the double (and stripe)',
    },
  },
  verify: { door: 'verify/index.ts' },
};

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
  'config/schema/portal.ts → credentials/emailAddress.ts', // the portal's support address is one mailbox by the accounts' rules
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
    expect(readers).toEqual(['admin/app.ts', 'app.ts', 'decisions/app.ts', 'metrics/app.ts', 'server.ts']);
  });

  it('routing reads neither the proxy, the pipeline, the guards nor storage: both callers use it, it uses neither', () => {
    expect(refused(graph, under('routing'), (t) => t.startsWith('routing/') || t === 'config/schema.ts' || LEAVES.has(t))).toEqual([]);
  });

  it('the pipeline imports nothing from the proxy, a listener or fastify: it decides, the proxy forwards', () => {
    expect(refused(graph, under('pipeline'), (t) => !t.startsWith('proxy/') && !t.startsWith('listener/') && t !== 'app.ts')).toEqual([]);
    expect(refused(packages, under('pipeline'), (p) => !speaksHttp(p))).toEqual([]);
  });

  it('the proxy and telemetry import no listener: the listeners are built on them, not they on the listeners', () => {
    // The method list is the proxy's (proxy/methods.ts), request spans telemetry's (telemetry/requestSpans.ts).
    expect(refused(graph, (f) => f.startsWith('proxy/') || f.startsWith('telemetry/'), (t) => !t.startsWith('listener/'))).toEqual([]);
  });

  it('guards are pipeline stages: they never import the pipeline that runs them', () => {
    expect(refused(graph, under('pipeline/guards'), (t) => t !== 'pipeline/pipeline.ts' && t !== 'pipeline/index.ts')).toEqual([]);
  });

  it('the daily limiter is a folder with one door: nothing outside pipeline/guards/dailyLimit/ imports past its index.ts', () => {
    // Its gate, blocks, reactions and outcomes are the DailyLimiter's parts (issue 73), not the pipeline's.
    const inside = under('pipeline/guards/dailyLimit');
    expect(refused(graph, (f) => !inside(f), (t) => !inside(t) || t === 'pipeline/guards/dailyLimit/index.ts')).toEqual([]);
  });

  it('every room with an index.ts is in the list of doors', () => {
    const withDoor = readdirSync(SRC, { withFileTypes: true }).filter((e) => e.isDirectory() && graph.has(`${e.name}/index.ts`)).map((e) => e.name);
    expect(Object.keys(DOORS).sort()).toEqual(withDoor.sort());
  });

  it.each(Object.entries(DOORS))('%s has one door: nothing outside it imports past it', (room, { door, alsoOpen = {} }) => {
    const open = (t: string) => roomOf(t) !== room || t === door || t in alsoOpen;
    expect(refused(graph, (f) => roomOf(f) !== room, open)).toEqual([]);
  });

  it('API keys are one room: their tables are read by keys/ alone (and storage\'s own key cache), and the routes reach keys/ through its door', () => {
    // STYLE 28: the rules of a key live in one room; a route that read the tables itself would be a second place to keep them.
    // Outside storage/, the key tables' floor (storage/keys/) is opened by keys/ alone; inside, by the floor itself and the feed's identity cache.
    const keyTables = under('storage/keys');
    expect(refused(graph, (f) => !f.startsWith('keys/') && !f.startsWith('storage/'), (t) => !keyTables(t))).toEqual([]);
    expect(refused(graph, (f) => f.startsWith('storage/') && !keyTables(f) && f !== 'storage/feed/identityCache.ts', (t) => !keyTables(t))).toEqual([]);
    // Nor does one room's route file lean on another's: organizations' keys took keyRequest from user/apiToken.ts (issue 73).
    expect(refused(graph, (f) => f === 'orgs/apiKeys.ts' || f === 'admin/orgKeys.ts', (t) => !t.startsWith('user/'))).toEqual([]);
    // The room speaks no HTTP: the guards and the proxy read its format through the same door.
    expect(refused(packages, under('keys'), (p) => !speaksHttp(p))).toEqual([]);
  });

  it('organizations have one door: nothing outside orgs/ imports past orgs/index.ts, and below it nothing imports orgs/', () => {
    expect(refused(graph, (f) => !f.startsWith('orgs/'), (t) => !t.startsWith('orgs/') || t === 'orgs/index.ts')).toEqual([]);
    // A feature is a folder with one door (docs/architecture.md, 24): only the public listener's builder opens it.
    // And SCIM's managed.ts: the managed accounts SAML and SCIM share (CONTRACT §31, "Whose account") are the organizations' own, taken through the door.
    expect([...graph].filter(([file, targets]) => !file.startsWith('orgs/') && targets.some((t) => t.startsWith('orgs/'))).map(([file]) => file).sort())
      .toEqual(['app.ts', 'scim/managed.ts']);
  });

  it('the portal is entered by the public listener\'s builder alone, and nothing in the proxy\'s path reaches it (STYLE 32)', () => {
    const entering = [...graph].filter(([file, targets]) => !file.startsWith('portal/') && targets.some((t) => t.startsWith('portal/'))).map(([file]) => file);
    expect(entering).toEqual(['app.ts']);
    // What a proxied request runs: the forwarder, the pipeline, the context, the decisions listener, and all they load.
    const proxyPath = ['proxy/forwarder.ts', 'proxy/websocket.ts', 'pipeline/index.ts', 'live/requestContext.ts', 'decisions/app.ts'].flatMap((entry) => [...loadedAtStart(entry)]);
    expect(proxyPath.filter((file) => file.startsWith('portal/'))).toEqual([]);
    // And the portal serves pages and sessions: it never forwards, decides a route, or reads the pipeline.
    expect(refused(graph, under('portal'), (t) => !t.startsWith('proxy/') && !t.startsWith('pipeline/') && !t.startsWith('decisions/'))).toEqual([]);
  });

  it('the command line starts light: `gateway --help` and `gateway health` load no framework, client or pipeline', () => {
    const loaded = [...loadedAtStart('cli.ts')];
    const heavy = ['fastify', 'undici', 'ioredis', 'pg', 'jose', 'argon2', '@electric-sql/pglite', 'stripe'];
    expect(loaded.filter((m) => heavy.includes(m) || ((m.startsWith('pipeline/') || m.startsWith('auth/') || m === 'server.ts') && !LEAVES.has(m)))).toEqual([]);
    expect(loaded).toContain('cli/commands.ts');
  });

  it('leaves import nothing above them', () => {
    expect(refused(graph, (f) => LEAVES.has(f), (t) => LEAVES.has(t))).toEqual([]);
  });

  it('billing is entered by the composition root and the public listener only (operators by billing/operator.ts), and reaches neither the pipeline, the proxy nor auth', () => {
    const entering = [...graph].filter(([file, targets]) => !file.startsWith('billing/') && targets.some((t) => t.startsWith('billing/')));
    expect(entering.filter(([, targets]) => targets.some((t) => t.startsWith('billing/') && t !== 'billing/operator.ts')).map(([file]) => file).sort()).toEqual(['app.ts', 'instance.ts']);
    // What operators see of billing and may do against it (CONTRACT §29): the admin API and the CLI, through its one door.
    expect(entering.filter(([, targets]) => targets.includes('billing/operator.ts')).every(([file]) => file.startsWith('admin/') || file.startsWith('cli/'))).toBe(true);
    const allowed = (t: string) => ['billing/', 'storage/', 'config/', 'errors/'].some((room) => t.startsWith(room))
      || ['audit.ts', 'account/change.ts', 'openapi.ts', 'listener/requireUser.ts', 'orgActing.ts'].includes(t);
    expect(refused(graph, under('billing'), allowed)).toEqual([]);
  });

  it('storage is in floors, each behind its door: nothing outside storage/ imports past a floor\'s index.ts, and the floors form no cycle', () => {
    // Issue 73: the connection and migrations, the change feed and its caches, the repositories by aggregate.
    const FLOORS = ['accounts', 'database', 'events', 'feed', 'keys', 'operators', 'orgs', 'redis', 'usage'];
    const ALSO_OPEN: Record<string, string> = {
      'storage/database/dirLock.ts': 'cli.ts recognizes its error without loading pg (the command line starts light)',
      'storage/database/migrations.ts': 'the same, for PendingMigrationsError',
      'storage/database/startWait.ts': 'the same, for PostgresStartError',
    };
    const entries = readdirSync(path.join(SRC, 'storage'), { withFileTypes: true });
    expect(entries.filter((e) => e.isDirectory()).map((e) => e.name).sort()).toEqual(FLOORS);
    expect(entries.filter((e) => !e.isDirectory()).map((e) => e.name)).toEqual([]);
    expect(FLOORS.filter((floor) => !graph.has(`storage/${floor}/index.ts`))).toEqual([]);
    const open = (t: string) => !t.startsWith('storage/') || /^storage\/\w+\/index\.ts$/.test(t) || t in ALSO_OPEN;
    expect(refused(graph, (f) => !f.startsWith('storage/'), open)).toEqual([]);
    // Inside storage/, a floor reads another's files directly (no door in between, no cycle through one), downward only.
    const floorOf = (file: string) => file.split('/')[1]!;
    const floors = new Map<string, string[]>();
    for (const [file, targets] of graph) {
      if (!file.startsWith('storage/')) continue;
      const across = targets.filter((t) => t.startsWith('storage/') && floorOf(t) !== floorOf(file)).map(floorOf);
      floors.set(floorOf(file), [...new Set([...(floors.get(floorOf(file)) ?? []), ...across])]);
    }
    expect(cycles(floors).map((cycle) => cycle.join(' → '))).toEqual([]);
    expect(floors.get('database')).toEqual([]);
    expect(refused(graph, (f) => f.startsWith('storage/') && !f.endsWith('/index.ts'), (t) => !/^storage\/\w+\/index\.ts$/.test(t))).toEqual([]);
  });

  it('storage knows no HTTP: no listener, client or framework, and nothing of the rooms above it', () => {
    const beneath = new Set(['config/schema.ts', ...ERRORS_ROOM, 'time.ts', 'telemetry/logThrottle.ts', 'telemetry/storeCalls.ts', 'credentials/digest.ts']);
    expect(refused(graph, under('storage'), (t) => t.startsWith('storage/') || beneath.has(t))).toEqual([]);
    expect(refused(packages, under('storage'), (p) => !speaksHttp(p))).toEqual([]);
  });
});

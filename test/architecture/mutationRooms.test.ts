// StrykerJS's rooms (stryker.config.mjs's `mutate`, issue 69) name code that exists, and each has
// its own tests (vitest.stryker.config.ts's ROOM_TESTS): an entry whose file was moved, whose line
// range ran past its file or whose glob matches nothing is mutated by no run, and a room without
// tests cannot be measured alone (`MUTATION_ROOM=<entry>` refuses it). Line ranges are refused:
// last round, two of admin/access.ts drifted ~19 lines after they were scored, still inside the file.
import { existsSync, globSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Instrumenter } from '@stryker-mutator/instrumenter';
import { beforeAll, describe, expect, it } from 'vitest';
import { SYSTEM_TESTS } from '../../vitest.config.js';
import { MUTATION_TESTS, ROOM_TESTS } from '../../vitest.stryker.config.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
/** Stryker's ranges: `file:12-30`, or `file:12:5-30:8` (line:column). */
const RANGE = /^(.+?):(\d+)(?::\d+)?-(\d+)(?::\d+)?$/;

interface Entry { entry: string; files: string[]; lines?: [number, number] }

/** What one entry of `mutate` names: its files (a glob's matches), and its line range if it has one. */
function resolve(entry: string): Entry {
  const range = RANGE.exec(entry);
  if (range) {
    const file = range[1]!;
    return { entry, files: existsSync(path.join(ROOT, file)) ? [file] : [], lines: [Number(range[2]), Number(range[3])] };
  }
  if (/[*?[{]/.test(entry)) return { entry, files: globSync(entry, { cwd: ROOT }).map((file) => file.split(path.sep).join('/')).sort() };
  return { entry, files: existsSync(path.join(ROOT, entry)) ? [entry] : [] };
}

describe("StrykerJS's mutate list", () => {
  let entries: Entry[];
  beforeAll(async () => {
    const config = (await import(pathToFileURL(path.join(ROOT, 'stryker.config.mjs')).href)) as { default: { mutate: string[] } };
    entries = config.default.mutate.map(resolve);
  });

  it('names only files that exist and globs that match some, never line ranges', () => {
    expect(entries.length).toBeGreaterThan(0);
    const nothing = entries.filter(({ files }) => files.length === 0).map(({ entry }) => entry);
    // A range stays inside its file while the code it meant moves: whole files only (or the code
    // moved to a file of its own), so that a score always measures the code it names.
    const ranges = entries.filter(({ lines }) => lines !== undefined).map(({ entry }) => entry);
    expect({ nothing, ranges }).toEqual({ nothing: [], ranges: [] });
  });

  it('gives every room, and every file a glob names, its own tests in ROOM_TESTS', () => {
    // A range or a single file is a room by its entry; a glob's files are rooms one by one (MUTATION_ROOM=<file>).
    const rooms = entries.flatMap(({ entry, files, lines }) => (lines !== undefined || !/[*?[{]/.test(entry) ? [entry] : files));
    const untested = rooms.filter((room) => (ROOM_TESTS[room] ?? []).length === 0);
    const stale = Object.keys(ROOM_TESTS).filter((room) => !rooms.includes(room));
    expect({ untested, stale }).toEqual({ untested: [], stale: [] });
  });

  it("runs, for each room, test files that exist, are in the full run's list and in the fast tier", () => {
    const listed = new Set(MUTATION_TESTS);
    const roomTests = [...new Set(Object.values(ROOM_TESTS).flat())];
    const missing = [...listed, ...roomTests].filter((file) => !existsSync(path.join(ROOT, file)));
    const unlisted = roomTests.filter((file) => !listed.has(file));
    // The system tier's files start whole systems (containers, browsers, built CLIs): no mutant reaches them.
    const system = [...listed].filter((file) => SYSTEM_TESTS.some((glob) => path.matchesGlob(file, glob)));
    expect({ missing, unlisted, system }).toEqual({ missing: [], unlisted: [], system: [] });
  });

  it("names only files StrykerJS's instrumenter can read", async () => {
    // Its Babel parser and transformer refuse some TypeScript that tsc takes (an arrow annotated with
    // its return type inside a conditional, `a?.b[0]!.c`): such a room ends before its first mutant.
    const never = () => false;
    const quiet = {
      isTraceEnabled: never, isDebugEnabled: never, isInfoEnabled: never, isWarnEnabled: never, isErrorEnabled: never, isFatalEnabled: never,
      trace() {}, debug() {}, info() {}, warn() {}, error() {}, fatal() {},
    };
    const files = [...new Set(entries.flatMap(({ files }) => files))];
    const unreadable: string[] = [];
    for (const name of files) {
      const file = { name, content: readFileSync(path.join(ROOT, name), 'utf8'), mutate: true as const };
      await new Instrumenter(quiet).instrument([file], { plugins: null, excludedMutations: [], ignorers: [] }).catch((err: Error) => unreadable.push(`${name}: ${err.message.split('\n')[0]}`));
    }
    expect(unreadable).toEqual([]);
  }, 60_000);
});

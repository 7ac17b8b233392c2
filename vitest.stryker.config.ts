// The vitest configuration of `npm run mutation` (stryker.config.mjs): the project's, with the test
// files run in the order stryker.config.mjs lists them. A mutant of code that runs while a file
// starts its gateways (a beforeAll) is "static" to Stryker, which then runs every listed file for
// it, stopping at the first failure: listed first, the unit tests kill most of those in seconds,
// where vitest's own order (slowest file first) would spend minutes before reaching them.
//
// And the test filter fixed for vitest 5. Stryker runs a mutant against the tests that covered it
// by setting testNamePattern to their names, suite and test joined by a space; vitest 5 matches the
// pattern against names joined by ' > ' (vitest-dev/vitest#10686), so no test inside a describe
// ran and every such mutant "survived" (stryker-mutator/stryker-js#6210). @stryker-mutator/
// vitest-runner 10.1 fixes it, but Stryker 10 needs Node 22.18 and CI installs on 22.13.0
// (package.json engines). Each space of the pattern also matches ' > ': at worst a test whose name
// reads the same with a suite boundary elsewhere runs too, which costs time, never a wrong result.
import path from 'node:path';
import { defineConfig, mergeConfig, type Plugin } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';
import base from './vitest.config.js';

// A plain .mjs without type declarations: its one field used here, typed at the import.
const stryker = (await import('./stryker.config.mjs' as string)) as { default: { testFiles: string[] } };
const listed = stryker.default.testFiles;

function rank(spec: TestSpecification): number {
  const file = path.relative(spec.project.config.root, spec.moduleId);
  const index = listed.findIndex((pattern) => path.matchesGlob(file, pattern));
  return index === -1 ? listed.length : index;
}

const SPACE_OR_SEPARATOR = '(?: | > )';

function vitest5TestNames(): Plugin {
  return {
    name: 'stryker-vitest5-test-names',
    configureVitest({ project }) {
      let pattern: RegExp | string | undefined;
      Object.defineProperty(project.config, 'testNamePattern', {
        configurable: true,
        enumerable: true,
        get: () => pattern,
        set: (value: RegExp | string | undefined) => {
          pattern = value instanceof RegExp ? new RegExp(value.source.replaceAll(' ', SPACE_OR_SEPARATOR), value.flags) : value;
        },
      });
    },
  };
}

class ListedOrder extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    return [...files].sort((a, b) => rank(a) - rank(b));
  }
}

export default mergeConfig(base, defineConfig({ plugins: [vitest5TestNames()], test: { sequence: { sequencer: ListedOrder } } }));

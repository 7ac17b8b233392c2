// The vitest configuration of `npm run mutation` (stryker.config.mjs): the project's, restricted to
// the tests that drive the mutated rooms in this process, run in the order listed here, with the
// test-name filter fixed for vitest 5.
//
// Only in-process tests: one that spawns dist/cli.js runs a build of the unmutated code in a child
// process and cannot see a mutant. Left out for time (40 s each, which every static mutant pays):
// assertion/keys.test.ts (rotation under load) and guards/planQuotas.test.ts (quotas over two
// instances); test/mutation-survivors.md names the mutants only they would kill.
//
// The order: a mutant of code that runs while a module loads or a file starts its gateways (a
// beforeAll) is static to Stryker, which runs every file for it until the first failure. Unit tests
// first kill most of those in seconds; vitest's own order (slowest file first) spent minutes.
//
// The filter: Stryker runs a mutant against the tests that covered it by setting testNamePattern to
// their names, suite and test joined by a space; vitest 5 matches names joined by ' > '
// (vitest-dev/vitest#10686), so no test inside a describe ran and every such mutant "survived"
// (stryker-mutator/stryker-js#6210, fixed in vitest-runner 10.1, which needs Node 22.18 through
// Babel 8, above the engines floor CI installs on). Here each space of the pattern also matches
// ' > ': at worst a test whose name reads the same with a suite boundary elsewhere runs too.
import path from 'node:path';
import { defineConfig, mergeConfig, type Plugin } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';
import base from './vitest.config.js';

export const MUTATION_TESTS = [
  // Unit tests of the pure functions: milliseconds each.
  'test/auth/credentials.test.ts',
  'test/auth/signInProvider.test.ts',
  'test/auth/totp.test.ts',
  'test/guards/quota.test.ts',
  'test/pipeline/identityHeaders.test.ts',
  'test/routing/paths.test.ts',
  'test/routing/caseFolds.test.ts',
  'test/routing/routeTable.test.ts',
  'test/credentials/digest.test.ts',
  'test/credentials/keyShapes.test.ts',
  'test/credentials/tokenKeys.test.ts',
  'test/credentials/tokens.test.ts',
  'test/pipeline/assertionSigner.test.ts',
  // In this process on a database of their own (seconds: a throwaway database migrated in beforeAll).
  'test/credentials/storedSecrets.test.ts',
  'test/credentials/assertionKeys.test.ts',
  'test/user/apiKeyActions.test.ts',
  // End to end in this process, by the time their tests took in a first run (beforeAll aside).
  'test/pipeline/pipeline.test.ts',
  'test/guards/planList.security.test.ts',
  'test/proxy/caseFolds.security.test.ts',
  'test/admin/adminKey.security.test.ts',
  'test/auth/oidcReturnTo.test.ts',
  'test/auth/oidcCaches.test.ts',
  'test/assertion/assertion.security.test.ts',
  'test/auth/oidcNonce.security.test.ts',
  'test/auth/oidcAnswers.test.ts',
  'test/proxy/headers.test.ts',
  'test/auth/oidcBinding.test.ts',
  'test/proxy/separators.security.test.ts',
  'test/assertion/keySets.security.test.ts',
  'test/auth/totpWindow.security.test.ts',
  'test/assertion/assertion.happy.test.ts',
  'test/auth/factor.security.test.ts',
  'test/auth/factor.test.ts',
  'test/guards/mfaRoutes.test.ts',
  'test/proxy/spellings.security.test.ts',
  'test/proxy/routing.security.test.ts',
  'test/user/apiKeys.test.ts',
  'test/auth/oidcDomains.test.ts',
  'test/auth/login.test.ts',
  'test/guards/authenticate.test.ts',
  'test/auth/refresh.test.ts',
  'test/auth/github.test.ts',
  'test/auth/mfa.test.ts',
  'test/auth/oidc.test.ts',
  'test/guards/planAndDaily.test.ts',
  'test/auth/tokens.test.ts',
  'test/admin/admin.test.ts',
  'test/telemetry/tracing.test.ts',
];

const UNIT_TESTS = MUTATION_TESTS.slice(0, 9);

/**
 * The tests of one room, for `MUTATION_ROOM=<entry of mutate> npm run mutation` (stryker.config.mjs):
 * the files of MUTATION_TESTS that drive that room's code, so that a room is measured in minutes.
 * A room's score from these is a lower bound of its score in a full run, which runs them all.
 */
export const ROOM_TESTS: Record<string, string[]> = {
  'src/routing/paths.ts': ['test/routing/paths.test.ts'],
  'src/auth/mfa/totp.ts': ['test/auth/totp.test.ts'],
  'src/auth/credentials.ts': ['test/auth/credentials.test.ts'],
  'src/pipeline/identityHeaders.ts': ['test/pipeline/identityHeaders.test.ts'],
  'src/pipeline/plans.ts': UNIT_TESTS,
  'src/pipeline/guards/quota.ts': ['test/guards/quota.test.ts'],
  'src/auth/providers/signInProvider.ts': ['test/auth/signInProvider.test.ts'],
  'src/credentials/digest.ts': ['test/credentials/digest.test.ts'],
  'src/credentials/emailAddress.ts': ['test/auth/credentials.test.ts'],
  'src/pipeline/guards/plan.ts': ['test/guards/planList.security.test.ts'],
  'src/auth/mfa/factor.ts': ['test/auth/factor.test.ts', 'test/auth/factor.security.test.ts'],
  'src/admin/access.ts:58-60': ['test/admin/adminKey.security.test.ts'],
  'src/credentials/shapes.ts': ['test/credentials/keyShapes.test.ts'],
  'src/credentials/tokenKeys.ts': ['test/credentials/tokenKeys.test.ts'],
  'src/credentials/tokens.ts': ['test/credentials/tokens.test.ts'],
  'src/pipeline/assertionSigner.ts': ['test/pipeline/assertionSigner.test.ts'],
  'src/credentials/jwtSecrets.ts': ['test/credentials/storedSecrets.test.ts'],
  'src/credentials/tokenKeyring.ts': ['test/credentials/storedSecrets.test.ts'],
  'src/credentials/assertionKeys.ts': ['test/credentials/assertionKeys.test.ts'],
  'src/credentials/assertionKeyring.ts': ['test/credentials/assertionKeys.test.ts'],
  'src/auth/apiKeys.ts': ['test/user/apiKeyActions.test.ts'],
  // With the usage per key: the guard records each API key's request and denial (keyUsage.record), which only that file reads back.
  'src/pipeline/pipeline.ts': ['test/pipeline/pipeline.test.ts', 'test/user/keyUsage.test.ts'],
  // Its own end-to-end file too: the answers a client gets (401 bodies, upstream hits), on two instances.
  'src/pipeline/guards/authenticate.ts': ['test/pipeline/pipeline.test.ts', 'test/guards/authenticate.test.ts'],
  'src/admin/access.ts:70-90': ['test/admin/adminKey.security.test.ts'],
  // The files that drive each provider, end to end against local fakes.
  'src/auth/providers/github.ts': ['test/auth/github.test.ts'],
  'src/auth/providers/oidc.ts': [
    'test/auth/oidcReturnTo.test.ts', 'test/auth/oidcCaches.test.ts', 'test/auth/oidcNonce.security.test.ts', 'test/auth/oidcAnswers.test.ts', 'test/auth/oidcBinding.test.ts',
    'test/auth/oidcDomains.test.ts', 'test/auth/oidc.test.ts',
  ],
  'src/admin/console.ts:174-178': ['test/admin/adminKey.security.test.ts'],
  'src/admin/console.ts:200-204': ['test/admin/adminKey.security.test.ts'],
};

function roomTests(room: string): string[] {
  const tests = ROOM_TESTS[room];
  if (tests === undefined) throw new Error(`MUTATION_ROOM=${room}: no entry in vitest.stryker.config.ts's ROOM_TESTS`);
  return [...tests];
}

function rank(spec: TestSpecification): number {
  const index = MUTATION_TESTS.indexOf(path.relative(spec.project.config.root, spec.moduleId));
  return index === -1 ? MUTATION_TESTS.length : index;
}

class ListedOrder extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    return [...files].sort((a, b) => rank(a) - rank(b));
  }
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

// mergeConfig would append to the project's include ('test/**/*.test.ts'): replaced instead.
const merged = mergeConfig(base, defineConfig({ plugins: [vitest5TestNames()], test: { sequence: { sequencer: ListedOrder } } }));
const room = process.env.MUTATION_ROOM;
merged.test!.include = room === undefined ? [...MUTATION_TESTS] : roomTests(room);
export default merged;

// Mutation testing of the security-critical rooms (issue 46): `npm run mutation`. Stryker changes
// one expression at a time in the files of `mutate` and runs the tests that cover it; a change no
// test notices (a surviving mutant) is a hole in the tests, or an equivalent change listed with its
// reason in test/mutation-survivors.md. Nothing here disables a mutator or ignores a mutant.
//
// One room at a time (test/mutation-survivors.md's figures): `MUTATION_ROOM=src/routing/paths.ts npm
// run mutation` mutates that entry of `mutate` only, runs only the tests vitest.stryker.config.ts's
// ROOM_TESTS names for it, on one runner, and keeps its reports and incremental file apart
// (reports/mutation/rooms/), so that rerunning a room after a new test retests only its survivors.
import path from 'node:path';

const room = process.env.MUTATION_ROOM;
const roomName = room?.replace(/[^A-Za-z0-9]+/g, '-');

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
const config = {
  packageManager: 'npm',
  testRunner: 'vitest',
  checkers: ['typescript'],
  tsconfigFile: 'tsconfig.json',
  // Each mutant runs only the tests that executed its code in the first, unmutated run.
  coverageAnalysis: 'perTest',
  mutate: [
    // Credentials: access and refresh tokens, the shapes of keys and cookies, digests, the
    // assertion keys; what an email and a new password must be; API keys (keys/, issue 73): their
    // format, the rules of a new key, personal keys' actions.
    'src/credentials/*.ts',
    'src/auth/credentials.ts',
    'src/keys/format.ts',
    'src/keys/rules.ts',
    'src/keys/personal.ts',
    // The pipeline and its guards (the daily and per-minute limiters' Redis and SQL aside: their
    // exactness under races is tested end to end), the identity headers, plans, the assertion signer.
    'src/pipeline/pipeline.ts',
    'src/pipeline/identityHeaders.ts',
    'src/pipeline/plans.ts',
    'src/pipeline/assertionSigner.ts',
    'src/pipeline/guards/authenticate.ts',
    'src/pipeline/guards/plan.ts',
    'src/pipeline/guards/quota.ts',
    // The second factor.
    'src/auth/mfa/totp.ts',
    'src/auth/mfa/factor.ts',
    // Sign-in providers.
    'src/auth/providers/oidc.ts',
    'src/auth/providers/github.ts',
    'src/auth/providers/signInProvider.ts',
    // Path normalisation.
    'src/routing/paths.ts',
    // The admin key check: the key comparison and the admin API's hook (src/admin/access.ts), and the
    // console's two doors that take the key (sign-in form, sign-in links: src/admin/console.ts).
    // Whole files, never line ranges: the ranges these were drifted ~19 lines after they were scored
    // (issue 69), and test/architecture/mutationRooms.test.ts refuses an entry that names nothing.
    'src/admin/access.ts',
    'src/admin/console.ts',
    // Issue 69: the rooms added since issue 46, each with its own tests in vitest.stryker.config.ts's
    // ROOM_TESTS. Organizations (the account side, its keys' SQL, acting for one, the Gateway-Org
    // guard and the roles stage), whose plan and counter a request uses, billing, refunds, the UTC
    // day and month.
    'src/orgs/*.ts',
    'src/storage/keys/orgApiKeys.ts',
    'src/orgActing.ts',
    'src/pipeline/guards/org.ts',
    'src/pipeline/stages.ts',
    'src/pipeline/subject.ts',
    'src/billing/*.ts',
    'src/pipeline/guards/refunds.ts',
    'src/time.ts',
    // Hooks, webhooks and the SSRF check of their receivers; moving in (imports and imported hashes);
    // the errors every room answers.
    'src/hooks/*.ts',
    'src/webhooks/*.ts',
    'src/import/*.ts',
    'src/auth/password/importedHashes.ts',
    'src/errors/*.ts',
    // Operators: their routes, sign-in, passkeys and tokens (and the tokens' SQL), the admin API's
    // routes and what a role may do there.
    'src/admin/operator*.ts',
    'src/storage/operators/operators.ts',
    'src/admin/routes.ts',
    // Users' sign-in (the state machine every way in shares) and passkeys.
    'src/auth/signIn.ts',
    'src/auth/passkeys/*.ts',
    // API keys: the scope guard, the roll route and the keys' SQL.
    'src/pipeline/guards/scopes.ts',
    'src/user/apiKeyRoll.ts',
    'src/storage/keys/apiKeys.ts',
    // CONTRACT §31: whose domains, SAML's acceptance rules and enforcement, SCIM's directory.
    'src/domains/*.ts',
    'src/auth/providers/saml/*.ts',
    'src/scim/*.ts',
    // Issue 69 item 4, this round's other rooms: the customer portal's server side (its pages'
    // scripts run in Chromium, in the system tier, out of Stryker's reach), the Stripe double,
    // and which Postgres host a failover leaves the gateway talking to.
    'src/portal/*.ts',
    'src/stripeFake/*.ts',
    'src/storage/database/pgHosts.ts',
  ],
  // The tests it runs are vitest.stryker.config.ts's `include`, in their order: not Stryker's
  // `testFiles`, with which Stryker 9.6 runs a static mutant (one in code that runs while a module
  // loads) with the runtime switch, so that no test ever sees it and it "survives".
  // Exactly those files, not vitest's guess of the tests related to a mutated file.
  // Forks, not the runner's default threads: a worker thread's process.env.TZ does not move its
  // clock's zone, so the tests that prove the UTC day and month in other zones (test/helpers/timeZone.ts)
  // failed Stryker's first run.
  vitest: { configFile: 'vitest.stryker.config.ts', related: false, pool: 'forks' },
  // Two cores, shared: two test runners at most.
  concurrency: 2,
  // The first run starts gateways against Postgres and Redis for every file above.
  dryRunTimeoutMinutes: 30,
  // A loaded machine is slow, not broken: a mutant gets 3x the test's time plus 10 s before it
  // counts as a timeout (which counts as detected).
  timeoutFactor: 3,
  timeoutMS: 10_000,
  ignorePatterns: ['dist', 'reports', 'bench', 'coverage', 'test-artifacts', 'data'],
  // event-recorder: one file per tested mutant in reports/mutation/events, readable while a long run goes on.
  reporters: ['clear-text', 'progress', 'html', 'json', 'event-recorder'],
  eventReporter: { baseDir: 'reports/mutation/events' },
  htmlReporter: { fileName: 'reports/mutation/mutation.html' },
  jsonReporter: { fileName: 'reports/mutation/mutation.json' },
  incrementalFile: 'reports/stryker-incremental.json',
  thresholds: { high: 90, low: 85, break: null },
};

if (room !== undefined && !config.mutate.some((entry) => entry === room || path.matchesGlob(room, entry))) {
  throw new Error(`MUTATION_ROOM=${room}: not an entry of stryker.config.mjs's mutate`);
}

export default room === undefined
  ? config
  : {
      ...config,
      mutate: [room],
      concurrency: Number(process.env.MUTATION_CONCURRENCY ?? 1),
      // MUTATION_CHECK=0: no TypeScript checker. On a loaded machine it is the slow part (each
      // mutant's file and all that import it type-checked again, while the test runner waits);
      // without it a mutant the compiler would refuse runs anyway: killed, or a survivor to read.
      ...(process.env.MUTATION_CHECK === '0' ? { checkers: [] } : {}),
      incremental: true,
      incrementalFile: `reports/mutation/rooms/${roomName}.incremental.json`,
      htmlReporter: { fileName: `reports/mutation/rooms/${roomName}.html` },
      jsonReporter: { fileName: `reports/mutation/rooms/${roomName}.json` },
      eventReporter: { baseDir: `reports/mutation/rooms/${roomName}.events` },
    };

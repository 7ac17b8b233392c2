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

// The tests of issue 69's rooms, by room (ROOM_TESTS below): in-process files only, as above; a
// file that also runs the built CLI (import.test.ts's `gateway import`, hooks.test.ts's reload) is
// here for its in-process tests.
const ORG_TESTS = [
  'test/orgs/organizations.test.ts', 'test/orgs/refusals.test.ts', 'test/orgs/keys.test.ts', 'test/orgs/invitationMail.test.ts',
  'test/orgs/concurrency.test.ts', 'test/orgs/acting.test.ts', 'test/orgs/changesHereAtOnce.security.test.ts', 'test/docs/openapi.test.ts', 'test/orgs/invitations.test.ts',
  'test/orgs/orgRoutes.test.ts',
];
const ACTING_TESTS = ['test/orgs/acting.test.ts', 'test/orgs/decisions.test.ts', 'test/orgs/refusals.test.ts', 'test/orgs/sockets.test.ts', 'test/orgs/pooled.test.ts'];
const BILLING_TESTS = [
  'test/billing/stripeGateway.test.ts', 'test/billing/plan.test.ts', 'test/billing/config.test.ts', 'test/billing/billing.test.ts', 'test/billing/meter.test.ts',
  'test/billing/meterHandBack.test.ts', 'test/billing/wholeEvents.test.ts', 'test/billing/orgBilling.test.ts', 'test/billing/cancelOrgOnDelete.test.ts',
  'test/billing/override.test.ts', 'test/billing/support.test.ts', 'test/billing/billingEvents.test.ts',
];
const REFUND_TESTS = ['test/guards/refundable.test.ts', 'test/guards/useRefunds.test.ts', 'test/guards/refunds.test.ts', 'test/guards/refundsNever.test.ts'];
const HOOK_TESTS = [
  'test/webhooks/planHooks.test.ts', 'test/webhooks/auditHooks.test.ts',
  'test/webhooks/hookWriter.test.ts', 'test/webhooks/hooks.test.ts', 'test/webhooks/hooks.delivery.test.ts', 'test/webhooks/hooks.cascade.test.ts', 'test/webhooks/hooks.billing.test.ts',
];
const WEBHOOK_TESTS = [
  'test/webhooks/message.test.ts', 'test/webhooks/emitter.test.ts', 'test/webhooks/ssrf.test.ts', 'test/webhooks/deliveries.happy.test.ts', 'test/webhooks/deliveries.error.test.ts',
  'test/webhooks/deliveries.security.test.ts', 'test/webhooks/webhooks.test.ts', 'test/webhooks/hooks.delivery.test.ts',
  // The worker's outages and stops in this process (deliveries.durability's instances are processes of their own, out of reach).
  'test/webhooks/deliveries.outages.test.ts',
];
const IMPORT_TESTS = [
  'test/import/csv.test.ts', 'test/import/formats.test.ts', 'test/import/keys.test.ts', 'test/import/importUsers.test.ts', 'test/import/import.test.ts',
  'test/auth/importedHashes.test.ts',
  'test/auth/importedHashes.http.test.ts',
];
const ERROR_TESTS = [
  'test/errors/negotiation.test.ts', 'test/errors/messages.test.ts', 'test/errors/listing.test.ts', 'test/errors/catalog.test.ts',
  'test/errors/messageFiles.test.ts', 'test/docs/errors.test.ts', 'test/errors/shapes.test.ts', 'test/errors/locale.test.ts', 'test/errors/door.test.ts',
];
const OPERATOR_TESTS = [
  'test/admin/operators.test.ts', 'test/admin/operatorsSignIn.test.ts', 'test/admin/operatorPasskeys.test.ts', 'test/admin/operatorsKeyRotation.test.ts',
  'test/admin/adminKey.security.test.ts',
];
const ADMIN_TESTS = [
  'test/admin/admin.test.ts', 'test/admin/adminKey.security.test.ts', 'test/admin/operators.test.ts', 'test/admin/users.test.ts',
  'test/admin/createUser.test.ts', 'test/admin/usage.test.ts', 'test/admin/overview.test.ts',
];
const CONSOLE_TESTS = ['test/admin/adminKey.security.test.ts', 'test/admin/console.test.ts', 'test/admin/consoleKeys.test.ts'];
const SIGN_IN_TESTS = ['test/auth/login.test.ts', 'test/auth/mfa.test.ts', 'test/auth/passkeys.test.ts', 'test/auth/passwordless.test.ts', 'test/auth/magicLink.test.ts'];
const PASSKEY_TESTS = ['test/auth/passkeys.test.ts', 'test/admin/operatorPasskeys.test.ts'];
const KEY_TESTS = [
  'test/user/apiKeyActions.test.ts', 'test/user/apiKeys.test.ts', 'test/user/namedApiKeys.test.ts', 'test/user/keyRoll.test.ts',
  'test/user/keyIdentity.test.ts',
];

/** Every file a glob entry of stryker.config.mjs's `mutate` names gets the same tests (ROOM_TESTS). */
const each = (files: string[], tests: string[]) => Object.fromEntries(files.map((file) => [file, tests]));
// CONTRACT §31's rooms: SAML against a scripted IdP (the SimpleSAMLphp run is the system tier's), SCIM's directory.
const SAML_TESTS = ['test/sso/saml.test.ts', 'test/sso/samlRefusals.test.ts', 'test/sso/samlRules.test.ts', 'test/sso/samlOwnRules.test.ts', 'test/sso/samlSubject.test.ts'];
const SCIM_TESTS = [
  'test/scim/values.test.ts', 'test/scim/resources.test.ts', 'test/scim/groupModel.test.ts', 'test/scim/userModel.test.ts',
  'test/scim/tokens.test.ts', 'test/scim/provisioning.test.ts', 'test/scim/users.test.ts', 'test/scim/groups.test.ts', 'test/scim/faults.test.ts',
  'test/scim/deprovisioning.test.ts', 'test/scim/filter.test.ts',
  'test/scim/discovery.test.ts', 'test/orgs/changesHereAtOnce.security.test.ts', 'test/docs/openapi.test.ts',
];
// The portal's server side: its config, files, origin guard and sessions (its pages run in Chromium, in the system
// tier; the vendored scripts' test reads no server code and, in Stryker's sandbox, finds uplot.js changed).
const PORTAL_TESTS = [
  'test/portal/files.test.ts', 'test/config/portal.test.ts', 'test/portal/rules.test.ts', 'test/portal/origin.test.ts', 'test/portal/sessions.test.ts',
  'test/billing/portalApi.test.ts',
];
const STRIPE_FAKE_TESTS = [
  'test/stripeFake/objects.test.ts', 'test/stripeFake/api.test.ts', 'test/stripeFake/triggers.test.ts', 'test/stripeFake/checkoutPage.test.ts', 'test/stripeFake/server.test.ts',
  'test/stripeFake/shapes.test.ts', 'test/stripeFake/fake.test.ts',
];

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
  'test/time.test.ts',
  'test/guards/scopes.test.ts',
  'test/orgs/orgActing.test.ts',
  'test/errors/listing.test.ts',
  'test/import/csv.test.ts',
  'test/webhooks/message.test.ts',
  'test/webhooks/sender.test.ts',
  'test/webhooks/outbox.test.ts', 'test/webhooks/outboxRetries.test.ts',
  'test/admin/operatorRoutes.test.ts',
  'test/sso/samlRequests.test.ts',
  'test/domains/names.test.ts',
  'test/errors/negotiation.test.ts',
  'test/errors/messages.test.ts',
  'test/errors/messageFiles.test.ts',
  'test/scim/values.test.ts',
  'test/scim/filter.test.ts',
  'test/sso/spKeys.test.ts', 'test/sso/idpMetadata.test.ts', 'test/sso/samlSettings.test.ts',
  // In this process on a database of their own (seconds: a throwaway database migrated in beforeAll).
  'test/credentials/storedSecrets.test.ts',
  'test/credentials/assertionKeys.test.ts',
  'test/user/apiKeyActions.test.ts',
  'test/storage/operators.test.ts',
  'test/admin/operatorTokens.test.ts',
  'test/webhooks/hookWriter.test.ts',
  'test/webhooks/emitter.test.ts',
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
  'test/user/keyUsage.test.ts',
  // Issue 69's rooms: the unit tests first, then end to end.
  'test/guards/refundable.test.ts',
  'test/webhooks/ssrf.test.ts',
  'test/import/formats.test.ts',
  'test/billing/plan.test.ts',
  'test/billing/config.test.ts',
  'test/billing/stripeGateway.test.ts',
  'test/errors/catalog.test.ts',
  'test/docs/errors.test.ts',
  'test/auth/importedHashes.test.ts',
  'test/billing/cancelOnDelete.test.ts',
  // Early: a room's static mutants (its schemas, built when a file loads) run every test of the room
  // until one fails, and this one fails at once for a schema changed.
  'test/docs/openapi.test.ts',
  ...new Set([
    ...ORG_TESTS, ...ACTING_TESTS, ...BILLING_TESTS, ...REFUND_TESTS, ...HOOK_TESTS, ...WEBHOOK_TESTS, ...IMPORT_TESTS, ...ERROR_TESTS,
    'test/admin/consoleMarks.security.test.ts', ...OPERATOR_TESTS, ...ADMIN_TESTS, ...SIGN_IN_TESTS, ...PASSKEY_TESTS, ...KEY_TESTS, ...CONSOLE_TESTS,
    'test/admin/consoleOperators.test.ts', 'test/admin/consoleServing.test.ts', 'test/billing/stripeDouble.test.ts', 'test/admin/adminTls.test.ts', 'test/admin/apiKeys.test.ts',
    'test/admin/userRoutes.test.ts', 'test/guards/monthlyQuota.test.ts', 'test/user/keyScopes.test.ts', 'test/orgs/usage.test.ts', 'test/billing/portalApi.test.ts',
    'test/orgs/config.test.ts', 'test/orgs/orgNames.security.test.ts',
    'test/orgs/managedAccounts.test.ts', 'test/orgs/domains.test.ts', ...SAML_TESTS, 'test/sso/enforce.test.ts', 'test/sso/enforceProviders.test.ts', ...SCIM_TESTS, 'test/docs/openapi.test.ts',
    ...PORTAL_TESTS, ...STRIPE_FAKE_TESTS, 'test/storage/postgresHosts.test.ts',
  ]),
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
  // With the console's: the headers it relays an operator's session with, and what a client's forgery of them gets.
  'src/admin/access.ts': [
    'test/admin/consoleMarks.security.test.ts', 'test/admin/adminKey.security.test.ts', 'test/admin/operators.test.ts', 'test/admin/operatorsSignIn.test.ts',
    'test/admin/console.test.ts', 'test/admin/consoleOperators.test.ts',
  ],
  'src/credentials/shapes.ts': ['test/credentials/keyShapes.test.ts'],
  'src/credentials/tokenKeys.ts': ['test/credentials/tokenKeys.test.ts'],
  'src/credentials/tokens.ts': ['test/credentials/tokens.test.ts'],
  'src/pipeline/assertionSigner.ts': ['test/pipeline/assertionSigner.test.ts'],
  'src/credentials/jwtSecrets.ts': ['test/credentials/storedSecrets.test.ts'],
  'src/credentials/tokenKeyring.ts': ['test/credentials/storedSecrets.test.ts'],
  'src/credentials/assertionKeys.ts': ['test/credentials/assertionKeys.test.ts'],
  'src/credentials/assertionKeyring.ts': ['test/credentials/assertionKeys.test.ts'],
  'src/keys/format.ts': ['test/credentials/keyShapes.test.ts'],
  // What a new key may be: named keys' bodies and scopes, roll graces, the plans that may hold keys.
  'src/keys/rules.ts': ['test/user/namedApiKeys.test.ts', 'test/user/keyRoll.test.ts', 'test/user/apiKeys.test.ts'],
  // The actions, and the requests for a named key or a roll that lead to them.
  'src/keys/personal.ts': ['test/user/apiKeyActions.test.ts', 'test/user/namedApiKeys.test.ts', 'test/user/keyRoll.test.ts'],
  // With the usage per key: the guard records each API key's request and denial (keyUsage.record), which only that file reads back.
  'src/pipeline/pipeline.ts': ['test/pipeline/pipeline.test.ts', 'test/user/keyUsage.test.ts'],
  // Its own end-to-end file too: the answers a client gets (401 bodies, upstream hits), on two instances.
  'src/pipeline/guards/authenticate.ts': ['test/pipeline/pipeline.test.ts', 'test/guards/authenticate.test.ts'],
  // The files that drive each provider, end to end against local fakes.
  'src/auth/providers/github.ts': ['test/auth/github.test.ts'],
  'src/auth/providers/oidc.ts': [
    'test/auth/oidcReturnTo.test.ts', 'test/auth/oidcCaches.test.ts', 'test/auth/oidcNonce.security.test.ts', 'test/auth/oidcAnswers.test.ts', 'test/auth/oidcBinding.test.ts',
    'test/auth/oidcDomains.test.ts', 'test/auth/oidc.test.ts',
  ],
  // Its serving, read back exactly, first; then the key's sessions and links, an operator's, the key
  // rotated (a key's sessions end, an operator's stay), the console's own calls as the admin API sees
  // them, the health summary of a gateway billing against a Stripe double, its cookies over TLS, and an
  // operator's changes of their own made with the session (passkeys, personal tokens after a recent second factor).
  'src/admin/console.ts': [
    'test/admin/consoleServing.test.ts', ...CONSOLE_TESTS, 'test/admin/consoleOperators.test.ts', 'test/admin/operatorsKeyRotation.test.ts',
    'test/admin/consoleMarks.security.test.ts', 'test/billing/stripeDouble.test.ts', 'test/admin/adminTls.test.ts',
    'test/admin/operatorPasskeys.test.ts', 'test/admin/operatorsSignIn.test.ts',
  ],
  // Issue 69's rooms.
  ...each(['src/orgs/apiKeys.ts', 'src/orgs/change.ts', 'src/orgs/common.ts', 'src/orgs/invitations.ts', 'src/orgs/members.ts'], ORG_TESTS),
  // The door: whether it serves (organizations' config), which bodies it reads itself (names, an
  // IdP's metadata), the usage routes' and SAML connections' deps (their return_to check).
  'src/orgs/index.ts': [...ORG_TESTS, 'test/orgs/config.test.ts', 'test/orgs/orgNames.security.test.ts', 'test/orgs/usage.test.ts', 'test/sso/saml.test.ts', 'test/sso/samlRefusals.test.ts'],
  // A paying organization's deletion cancels its subscriptions first: billing's test of it.
  'src/orgs/orgs.ts': [...ORG_TESTS, 'test/billing/cancelOrgOnDelete.test.ts'],
  'src/orgs/usage.ts': ['test/orgs/usage.test.ts', 'test/docs/openapi.test.ts'],
  // SAML's sign-in and SCIM's provisioning are the managed accounts' two callers: their tests drive them.
  ...each(['src/orgs/claimAccount.ts', 'src/orgs/managedAccounts.ts', 'src/orgs/managingActor.ts'], [
    'test/orgs/managedAccounts.test.ts', 'test/orgs/changesHereAtOnce.security.test.ts', ...SAML_TESTS, 'test/scim/provisioning.test.ts',
  ]),
  'src/orgs/domains.ts': ['test/orgs/domains.test.ts', 'test/docs/openapi.test.ts'],
  // With enforcement's (turned on, it ends sessions) and the OpenAPI document (its three schemas).
  'src/orgs/saml.ts': ['test/sso/saml.test.ts', 'test/sso/enforce.test.ts', 'test/docs/openapi.test.ts'],
  'src/storage/keys/orgApiKeys.ts': ['test/orgs/keys.test.ts', 'test/orgs/refusals.test.ts'],
  'src/orgActing.ts': ['test/orgs/orgActing.test.ts', ...ACTING_TESTS],
  // And organization keys': the key-org stage is theirs.
  'src/pipeline/guards/org.ts': [...ACTING_TESTS, 'test/orgs/keys.test.ts'],
  // Every guard's stage: the ones the roles, org and scopes stages are tested by, the pipeline's own,
  // and the traces', which name each stage's span and its outcome.
  'src/pipeline/stages.ts': [
    'test/pipeline/pipeline.test.ts', ...ACTING_TESTS, 'test/user/keyScopes.test.ts', 'test/guards/planAndDaily.test.ts', 'test/guards/mfaRoutes.test.ts', 'test/telemetry/tracing.test.ts',
  ],
  'src/pipeline/subject.ts': ['test/orgs/pooled.test.ts', 'test/orgs/acting.test.ts', 'test/billing/orgBilling.test.ts', 'test/guards/monthlyQuota.test.ts'],
  ...each(['src/billing/meterReporter.ts', 'src/billing/plan.ts', 'src/billing/stripe.ts'], BILLING_TESTS),
  // And a deletion's (cancelAtPeriodEnd is billing's, its answers and log lines read there), and the portal's GET /subscription.
  'src/billing/billing.ts': [...BILLING_TESTS, 'test/billing/cancelOnDelete.test.ts', 'test/billing/portalApi.test.ts'],
  // With the OpenAPI document, which their schemas are part of (operator.ts's: the admin API's billing view and plan body).
  'src/billing/operator.ts': [...BILLING_TESTS, 'test/docs/openapi.test.ts'],
  // And the portal's uses of them: `"return": "portal"`, GET /subscription, Gateway-Org's refusals.
  'src/billing/routes.ts': [...BILLING_TESTS, 'test/billing/portalApi.test.ts', 'test/docs/openapi.test.ts'],
  // Every way an owner goes: a user's deletion and erasure, an organization's.
  'src/billing/cancel.ts': ['test/billing/cancelOnDelete.test.ts', 'test/billing/cancelOrgOnDelete.test.ts'],
  'src/pipeline/guards/refunds.ts': REFUND_TESTS,
  'src/time.ts': ['test/time.test.ts', 'test/guards/quota.test.ts', 'test/guards/monthlyQuota.test.ts', 'test/guards/planAndDaily.test.ts'],
  ...each(['src/hooks/fromAudit.ts', 'src/hooks/hooks.ts'], HOOK_TESTS),
  ...each(['src/webhooks/emitter.ts', 'src/webhooks/message.ts'], WEBHOOK_TESTS),
  // The worker driven directly first (settled, close, a claim a close overtakes, purges), then the deliveries end to end.
  'src/webhooks/outbox.ts': ['test/webhooks/outbox.test.ts', 'test/webhooks/outboxRetries.test.ts', ...WEBHOOK_TESTS],
  // One attempt against receivers of its own first (seconds, no database), then the deliveries end to end.
  'src/webhooks/sender.ts': ['test/webhooks/sender.test.ts', ...WEBHOOK_TESTS],
  'src/webhooks/ssrf.ts': ['test/webhooks/ssrf.test.ts', 'test/webhooks/deliveries.security.test.ts', 'test/webhooks/deliveries.error.test.ts'],
  ...each(['src/import/csv.ts', 'src/import/firebaseHash.ts', 'src/import/formats.ts', 'src/import/index.ts', 'src/import/keys.ts', 'src/import/rows.ts', 'src/import/users.ts'], IMPORT_TESTS),
  'src/auth/password/importedHashes.ts': ['test/auth/importedHashes.test.ts', 'test/auth/importedHashes.http.test.ts', 'test/import/formats.test.ts'],
  ...each([
    'src/errors/catalog.ts', 'src/errors/index.ts', 'src/errors/listing.ts', 'src/errors/messageFiles.ts', 'src/errors/messages.ts',
    'src/errors/negotiation.ts', 'src/errors/success.ts',
  ], ERROR_TESTS),
  ...each(['src/admin/operatorPasskeys.ts', 'src/admin/operatorSignIn.ts'], OPERATOR_TESTS),
  'src/admin/operatorRoutes.ts': ['test/admin/operatorRoutes.test.ts', ...OPERATOR_TESTS, 'test/docs/openapi.test.ts'],
  'src/admin/operatorTokens.ts': ['test/admin/operatorTokens.test.ts', ...OPERATOR_TESTS],
  // The operators' SQL: its own test on a database of its own first, then the API's and sign-in's.
  'src/storage/operators/operators.ts': ['test/storage/operators.test.ts', ...OPERATOR_TESTS],
  // Its own test first; then the admin files, and those that drive a branch of it the admin files do not: a key
  // revoked by id and leaked keys (apiKeys), Stripe told before an erasure (cancelOnDelete), a billed user's billing
  // shown and overridden (support), the plan hooks' previous_plan (hooks).
  'src/admin/routes.ts': [
    'test/admin/userRoutes.test.ts', ...ADMIN_TESTS, 'test/admin/apiKeys.test.ts', 'test/billing/cancelOnDelete.test.ts', 'test/billing/support.test.ts',
    'test/webhooks/hooks.test.ts', 'test/docs/openapi.test.ts',
  ],
  // And SAML's: the one way in whose login.succeeded names its method and whose session keeps its connection.
  'src/auth/signIn.ts': [...SIGN_IN_TESTS, 'test/sso/saml.test.ts'],
  'src/auth/passkeys/ceremony.ts': PASSKEY_TESTS,
  // With the enforcement's tests: a passkey of an enforced domain, once it verified, gets sso_required.
  'src/auth/passkeys/routes.ts': [...PASSKEY_TESTS, 'test/sso/enforce.test.ts', 'test/docs/openapi.test.ts'],
  'src/pipeline/guards/scopes.ts': ['test/guards/scopes.test.ts', 'test/user/keyScopes.test.ts'],
  // With the OpenAPI document, which its route's schema is part of (docs/openapi.json, committed).
  'src/user/apiKeyRoll.ts': ['test/user/keyRoll.test.ts', 'test/docs/openapi.test.ts'],
  // With the usage per key (its counts' SQL) and the operators' acts on keys (a user's list, by id, leaked).
  // Organization keys too: insertKey and revokeMemberOrgKeys make and revoke them here.
  'src/storage/keys/apiKeys.ts': [...KEY_TESTS, 'test/user/keyUsage.test.ts', 'test/admin/apiKeys.test.ts', 'test/orgs/keys.test.ts'],
  // CONTRACT §31.
  ...each(['src/domains/dns.ts', 'src/domains/index.ts', 'src/domains/recheck.ts'], ['test/orgs/domains.test.ts']),
  ...each(['src/domains/names.ts', 'src/domains/publicMail.ts'], ['test/domains/names.test.ts', 'test/orgs/domains.test.ts']),
  ...each(['src/auth/providers/saml/account.ts', 'src/auth/providers/saml/response.ts'], SAML_TESTS),
  // The requests a Response answers and the routes' own refusals first, then the sign-ins end to end.
  'src/auth/providers/saml/routes.ts': ['test/sso/samlRequests.test.ts', ...SAML_TESTS, 'test/docs/openapi.test.ts'],
  'src/auth/providers/saml/spKeys.ts': ['test/sso/spKeys.test.ts', ...SAML_TESTS],
  'src/auth/providers/saml/connection.ts': ['test/sso/samlSettings.test.ts', ...SAML_TESTS],
  ...each(['src/auth/providers/saml/idpMetadata.ts', 'src/auth/providers/saml/xml.ts'], ['test/sso/idpMetadata.test.ts', ...SAML_TESTS]),
  'src/auth/providers/saml/enforce.ts': ['test/sso/enforce.test.ts', 'test/sso/enforceProviders.test.ts'],
  ...each([
    'src/scim/access.ts', 'src/scim/discovery.ts', 'src/scim/discoveryRoutes.ts', 'src/scim/errors.ts', 'src/scim/filter.ts', 'src/scim/groupModel.ts',
    'src/scim/groups.ts', 'src/scim/index.ts', 'src/scim/managed.ts', 'src/scim/provisioning.ts', 'src/scim/resources.ts', 'src/scim/roles.ts',
    'src/scim/tokens.ts', 'src/scim/userModel.ts', 'src/scim/users.ts', 'src/scim/values.ts',
  ], SCIM_TESTS),
  ...each(['src/portal/files.ts', 'src/portal/guard.ts', 'src/portal/index.ts'], PORTAL_TESTS),
  // With the OpenAPI document, where their endpoints' schemas are (the pages' routes, hidden from it).
  ...each(['src/portal/config.ts', 'src/portal/pages.ts', 'src/portal/sessions.ts'], [...PORTAL_TESTS, 'test/docs/openapi.test.ts']),
  ...each([
    'src/stripeFake/checkoutPage.ts', 'src/stripeFake/dataDir.ts', 'src/stripeFake/fake.ts', 'src/stripeFake/holder.ts', 'src/stripeFake/index.ts',
    'src/stripeFake/invoices.ts', 'src/stripeFake/objects.ts', 'src/stripeFake/server.ts', 'src/stripeFake/triggers.ts', 'src/stripeFake/webhook.ts',
  ], STRIPE_FAKE_TESTS),
  'src/storage/database/pgHosts.ts': ['test/storage/postgresHosts.test.ts'],
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

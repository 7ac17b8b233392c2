// Every `gateway` subcommand, with its own help: the one list the parser, the help and the docs
// test read (docs/commands.md).
import { check, openapi, schema } from './check.js';
import { errorsCommand } from './errors.js';
import type { Command } from './command.js';
import { health, HEALTH_TIMEOUT_MS } from './health.js';
import { initCommand } from './init.js';
import { importKeysCommand, importUsersCommand } from './import.js';
import { SHUTDOWN_GRACE_MS, start } from './start.js';
import { backupCommand, migrateCommand, restoreCommand, revokeKeyCommand, rotateJwtKey, rotateKeys } from './storage.js';
import { listOperatorsCommand, operatorsCommand } from './operators.js';
import { auditCommand, listUsersCommand, users } from './users.js';
import { listOrgsCommand, setOrgPlanCommand, showOrgCommand } from './orgs.js';
import { DEFAULT_DATA_DIR, DEFAULT_PORT, stripeFakeCommand, stripeFakeTriggerCommand } from './stripeFake.js';

export const COMMANDS: Command[] = [
  {
    name: 'start', config: true, run: start,
    summary: 'start the gateway (migrations first, unless storage.migrate is false)',
    help: `Applies pending migrations (unless storage.migrate is false: then a database that lacks
one stops the start), then serves on server.host:server.port, and on admin.host:admin.port
unless admin.port is 0.

Output: JSON log lines (pino) on stdout and nothing else, at LOG_LEVEL (default info). The line
with msg "gateway listening" carries the URLs (url, admin). Whatever stops the start (an invalid
configuration or file it names, an unknown LOG_LEVEL, a port in use, a database not migrated or
not reachable) is one line at level 60 (fatal) with msg, hint and the details, then exit status
1; \`gateway check\` prints the same configuration problems as text. A Postgres that does not
answer yet (refused, unreachable, starting up) is waited for up to storage.startTimeout (default
60 s), with a warn line "waiting for Postgres at host:port (code)" at each attempt.

Signals: SIGHUP reloads routes, upstreams, cors, limits, admin.apiKey, hooks and the token keys (auth.jwt.secret,
privateKeyFile, previous) from the file, and reads certificate and key files again (other changes
are logged as needing a restart). SIGTERM first drains for
server.shutdownDelay (default 5 s: /readyz answers 503, every response closes its connection, so
a load balancer moves away), then closes open WebSockets (1001), stops accepting, lets the
requests in flight finish (up to ${SHUTDOWN_GRACE_MS / 1000} s more) and exits; SIGINT (Ctrl-C)
skips the drain.`,
  },
  {
    name: 'init', config: true, run: initCommand,
    options: { profile: { type: 'string' } },
    summary: 'write a commented gateway.yaml to start from (--profile spec|public-api)',
    help: `Writes gateway.yaml (or the --config FILE) and never overwrites one: exit status 1 when it
exists. --profile spec (the default) is the spec's behaviour: French errors without codes, keys for
pro users. --profile public-api: errors with codes in the client's language (errors.codes,
language negotiate), API keys for every plan, daily, monthly and per-minute quotas on the free
plan, and the organizations, mail, billing and hooks blocks commented out with what each needs.
Both pass \`gateway check\` with no environment variables set; edit the upstream and routes.`,
  },
  {
    name: 'migrate', config: true, run: migrateCommand,
    summary: 'apply pending database migrations',
    help: `Applies the files of migrations/ that the configured database lacks, in name order, in
one transaction, and prints their names (or "nothing to apply"). Safe when several instances
run it at once: an advisory lock makes the others wait. A Postgres that does not answer yet is
waited for as by \`start\` (storage.startTimeout), each attempt said on stderr. Needed before
\`start\` when storage.migrate is false.`,
  },
  {
    name: 'check', config: true, run: check,
    summary: 'validate the configuration and the files it names; print the route table',
    help: `Validates what \`start\` reads, without touching the network: the YAML, every key
(unknown keys are errors), the \${VAR} references, PORT, HOST and LOG_LEVEL, and every file the
configuration names (keys, CA and certificate files), which must exist and parse as what they
are. Prints "FILE: valid" and the route table, exit status 0, with on stderr a "FILE: warning:"
line for what a valid file leaves off (the console, with its reason); or, on stderr, the file and
one line per problem (key path, what is wrong), exit status 1.`,
  },
  {
    name: 'health', config: true, run: health,
    summary: "ask the running gateway's /healthz (container health checks)",
    help: `Reads the configuration as \`start\` does (so PORT and HOST apply), then asks
GET http://HOST:PORT/healthz, with 127.0.0.1 for a host of 0.0.0.0 (::1 for ::) and a
${HEALTH_TIMEOUT_MS / 1000} s timeout. Exit status 0 when it answers 200, else 1. The Docker
image's HEALTHCHECK runs it.`,
  },
  {
    name: 'schema', config: false, run: schema,
    summary: 'print the JSON Schema of gateway.yaml',
    help: `Prints the JSON Schema (draft-07) of gateway.yaml, generated from the validator that
\`check\` and \`start\` use. The repository keeps it as gateway.schema.json; editors with the YAML
language server complete and check a file whose first line is
  # yaml-language-server: $schema=./gateway.schema.json`,
  },
  {
    name: 'openapi', config: false, run: openapi,
    summary: 'print the OpenAPI 3.1 document of the public and admin HTTP APIs',
    help: `Prints the OpenAPI 3.1 document of the gateway's own endpoints (public and admin
listeners), as the admin listener serves it at /openapi.json. It builds both listeners on a
throwaway embedded database, so it needs no configuration and no network. The repository keeps
it as docs/openapi.json.`,
  },
  {
    name: 'backup', config: true, run: backupCommand,
    options: { out: { type: 'string' } },
    summary: 'write embedded storage to one file (--out FILE); on Postgres, use pg_dump',
    help: `Writes the embedded database (storage.embeddedDir) to FILE as one gzipped tarball: users,
keys, usage, sessions, audit, everything. Run it with the gateway stopped: it takes the
directory's lock, and refuses while a gateway holds it. The file is written whole, then renamed,
so it is complete or absent. With storage.postgres it refuses and names pg_dump
(docs/operating.md#backups). \`gateway restore FILE\` reads it back.`,
  },
  {
    name: 'restore', operands: ['FILE'], config: true, run: restoreCommand,
    summary: 'make storage.embeddedDir from a backup file (an empty or new directory only)',
    help: `Makes the embedded database of storage.embeddedDir from FILE (written by \`gateway backup\`).
The directory must be empty or absent: a restore never overwrites a database; move the old one
away first. A file that is not a backup is refused and leaves nothing behind. Tokens signed
before the backup stay valid after it when the signing key is the same (auth.jwt, or the key
kept in the database). With storage.postgres it refuses and names pg_restore.`,
  },
  {
    name: 'errors', config: false, run: errorsCommand,
    options: { json: { type: 'boolean' }, markdown: { type: 'boolean' } },
    summary: 'list every error the gateway answers: code, status, messages (--json, --markdown)',
    help: `Lists the error catalog (docs/errors.md): each error's code (the stable id clients read with
errors.codes or problem details), its name in metrics, traces and logs, its status and its
messages. With --json, the list GET /api/v1/errors serves, [{code, name, status, messages: {fr,
en}, fields}], texts with their {placeholders}; with --markdown, the table of docs/errors.md.
The built-in texts only: a running gateway's GET /api/v1/errors adds those of errors.messages.`,
  },
  {
    name: 'users set-plan', operands: ['EMAIL', 'PLAN'], config: true, admin: true, run: (args) => users('set-plan', args),
    options: { override: { type: 'boolean' } },
    summary: 'set a user\'s plan (free, premium, pro, or any plan gateway.yaml names; --override against billing)',
    help: `Sets the user's plan and their subscription record. EMAIL is matched without regard to
case. Running instances apply the change within a second. While a subscription (active,
trialing, or past_due within its grace) gives the user its plan, another plan exits 1 unless
--override: the override holds until billing computes another plan (docs/billing.md).`,
  },
  {
    name: 'users deactivate', operands: ['EMAIL'], config: true, admin: true, run: (args) => users('deactivate', args),
    summary: 'deactivate a user',
    help: `Deactivates the user: every running instance refuses their tokens and API keys within a
second. Nothing is deleted; \`users activate\` undoes it.`,
  },
  {
    name: 'users activate', operands: ['EMAIL'], config: true, admin: true, run: (args) => users('activate', args),
    summary: 'activate a user',
    help: 'Activates the user again; running instances accept them within a second.',
  },
  {
    name: 'users list', config: true, run: listUsersCommand,
    options: { query: { type: 'string' }, plan: { type: 'string' }, limit: { type: 'string' }, json: { type: 'boolean' } },
    summary: 'list users, newest first (--query Q, --plan P, --limit N, --json)',
    help: `Lists users, newest first, as GET /admin/v1/users does: --query matches the email (a
substring, any case), an exact external_id (an imported user's former id) or an exact id; --plan keeps one plan; --limit caps the count (default 50,
at most 200). Prints a table, or with --json one JSON object {"users": [...]}.`,
  },
  {
    name: 'audit', config: true, run: auditCommand,
    options: { user: { type: 'string' }, type: { type: 'string' }, since: { type: 'string' }, limit: { type: 'string' }, json: { type: 'boolean' } },
    summary: 'list audit events, newest first (--user ID, --type T, --since TIME, --limit N, --json)',
    help: `Lists the audit log (docs/audit.md), newest first, as GET /admin/v1/audit does: --user keeps
one account's events (its id), --type one event type (login.failed, admin.plan_changed, ...),
--since those at or after a time (ISO 8601, e.g. 2026-11-25T08:00:00Z); --limit caps the count
(default 50, at most 200). Prints a table, or with --json one JSON object {"events": [...]}.
Reads the database: on embedded storage, with the gateway stopped (or ask its admin API).`,
  },
  {
    name: 'users reset-link', operands: ['EMAIL'], config: true, admin: true, run: (args) => users('reset-link', args),
    summary: 'print a password reset link for a user (no SMTP needed)',
    help: `Makes a password reset link, as POST /api/v1/auth/password/forgot would mail it, and prints
it: for a deployment without mail.smtp, or a user whose mail does not arrive. It needs
mail.resetUrl (the application's reset page, with {token}). The link works once, within 30
minutes; using it sets the password and ends every session of the user. Give it only to the
owner of the address.`,
  },
  {
    name: 'users delete', operands: ['EMAIL'], config: true, admin: true, run: (args) => users('delete', args),
    summary: 'delete a user and everything of theirs',
    help: `Deletes the account (GDPR erasure): the user, its subscription record, refresh tokens and
sessions, API keys, webhook and links. The email can register again. Running instances refuse
the user's tokens and API keys within a second. It cannot be undone; \`users deactivate\` can.`,
  },
  {
    name: 'orgs list', config: true, run: listOrgsCommand,
    options: { query: { type: 'string' }, plan: { type: 'string' }, limit: { type: 'string' }, json: { type: 'boolean' } },
    summary: 'list organizations, newest first (--query Q, --plan P, --limit N, --json)',
    help: `Lists organizations, newest first, as GET /admin/v1/orgs does: --query matches the name (a
substring, any case) or an exact id; --plan keeps one plan; --limit caps the count (default 50,
at most 200). Prints a table (names JSON-quoted), or with --json one JSON object {"orgs": [...]}.
Reads the database: on embedded storage, with the gateway stopped (or ask its admin API).`,
  },
  {
    name: 'orgs show', operands: ['ID'], config: true, run: showOrgCommand,
    options: { json: { type: 'boolean' } },
    summary: 'show an organization: plan, usage, members (--json)',
    help: `Shows organization ID as GET /admin/v1/orgs/{id} does: its plan, the usage of its pooled
counter (- on free, where members count on their own), and its members with their roles. An
unknown id exits 1.`,
  },
  {
    name: 'orgs set-plan', operands: ['ID', 'PLAN'], config: true, admin: true, run: setOrgPlanCommand,
    options: { override: { type: 'boolean' } },
    summary: 'set an organization\'s plan (a plan gateway.yaml knows; --override against billing)',
    help: `Sets organization ID's plan, with an audit event (admin.org_plan_changed, actor cli), as
PUT /admin/v1/orgs/{id}/plan does. Running instances apply it within a second. An unknown plan
or id exits 1. While a subscription gives the organization its plan, another plan exits 1 unless
--override: the override holds until billing computes another plan (docs/billing.md). On
embedded storage, run it with the gateway stopped (or use --admin).`,
  },
  {
    name: 'import users', operands: ['FILE'], config: true, admin: true, run: importUsersCommand,
    options: {
      format: { type: 'string' }, 'dry-run': { type: 'boolean' },
      'hash-key': { type: 'string' }, 'salt-separator': { type: 'string' }, rounds: { type: 'string' }, 'mem-cost': { type: 'string' },
    },
    summary: 'import accounts from a file (--format csv|json|auth0|supabase|firebase, --dry-run)',
    help: `Creates the accounts of FILE (docs/migrating.md) with their email, verified flag, plan,
active flag, created date, external id and password hash, stored as it is (bcrypt, argon2,
scrypt, PBKDF2, Django's, Firebase's scrypt: docs/password-hashes.md), in batches of 1000. An
email already present is skipped, never overwritten: a second run changes nothing. A line that
is malformed, has an email the gateway refuses, an unknown plan or an unknown hash format is
refused with its reason. Prints each refused line, then created, skipped_existing and refused
with their counts; exit status 1 when a line was refused. --dry-run writes nothing and prints
the same. --format (default csv): csv (a header row) and json (JSON lines) with the fields
email, password_hash, email_verified, plan, is_active, created_at, external_id; auth0 and
supabase read their exports; firebase reads \`firebase auth:export\`'s JSON and needs the
project's --hash-key, --salt-separator, --rounds and --mem-cost. With --admin URL, the file is
read here and sent to POST /admin/v1/import/users. Only a storage failure stops an import.`,
  },
  {
    name: 'import keys', operands: ['FILE'], config: true, admin: true, run: importKeysCommand,
    options: { 'dry-run': { type: 'boolean' } },
    summary: 'import API keys by their SHA-256 (JSON lines {email, name, sha256, scopes, expires_at})',
    help: `Stores the API keys of FILE, one JSON object a line {email, name, sha256, scopes,
expires_at}: sha256 is the hex SHA-256 of the raw key, which the gateway looks keys up by, so
the keys customers hold keep working and the raw keys are never needed. The owner is the user
with that email. A hash already stored is skipped; a line with an unknown owner, a malformed
hash, a scope no route declares or an expiry past is refused with its reason. Prints the same
report as \`import users\`; exit status 1 when a line was refused; --dry-run writes nothing.
Audited api_key.imported per batch, with counts, never a hash. With --admin URL, the file is read
here and sent to POST /admin/v1/import/keys.`,
  },
  {
    name: 'keys revoke', operands: ['ID'], config: true, admin: true, run: revokeKeyCommand,
    summary: 'revoke one API key by its id, whoever holds it',
    help: `Revokes the API key with id ID (GET /admin/v1/users/{id}/api-keys and the console list
them), as DELETE /admin/v1/api-keys/{id} does, with an audit event; running gateways refuse it
within a second. For keys found in the open, POST /admin/v1/api-keys/leaked takes the raw keys.
An unknown or already revoked id exits 1.`,
  },
  {
    name: 'keys rotate', config: true, admin: true, run: rotateKeys,
    summary: 'make a new upstream assertion key current',
    help: `Makes the next upstream assertion key current and publishes a new next one. The previous
key stays published (/.well-known/gateway-assertion-keys.json) until every assertion it signed
has expired, so upstreams verifying with a cached key set keep working. Running instances
switch at once (NOTIFY), or at their next periodic reload.`,
  },
  {
    name: 'keys rotate-jwt', config: true, admin: true, run: rotateJwtKey,
    options: { 'drop-previous': { type: 'boolean' } },
    summary: 'make a new access and refresh token key current (--drop-previous)',
    help: `Rotates the HS256 secret the database keeps when auth.jwt.secret is empty: a new secret
signs from now on; the one it replaces only verifies, so every session goes on, until
auth.refreshTokenTtl (default 30 days) after the rotation, when every token it signed has
expired. Running instances switch at once (NOTIFY), or within 30 s. Refused while an earlier
previous key still verifies sessions (rotating again would end them). With --drop-previous, it
rotates nothing and drops the previous key at once: every session it signed ends (after a leak,
rotate, then drop). A key in gateway.yaml (auth.jwt.secret, privateKeyFile) rotates by editing
the file and SIGHUP instead: docs/operating.md, "Rotating the signing key". On embedded storage,
run it with the gateway stopped.`,
  },
  {
    name: 'operators add', operands: ['EMAIL'], config: true, admin: true, run: (args) => operatorsCommand('add', args),
    options: { role: { type: 'string' } },
    summary: 'create an operator (--role viewer|support|admin) and print its enrolment link',
    help: `Creates an operator of the admin listener (docs/operators.md) with the role given by --role:
viewer (reads everything), support (also ends sessions and API keys, resets MFA, (de)activates
users, sends alerts, mints console links) or admin (everything). Prints a one-time enrolment link,
built from the console's origin (admin.publicUrl, or the admin listener's address): it works once,
within 24 hours, and sets the operator's password and second factor. Give it only to that person.
With --admin URL, through POST /admin/v1/operators (an admin's credential: admin.apiKey, or an
admin operator's token in GATEWAY_OPERATOR_TOKEN, then named in the audit log).`,
  },
  {
    name: 'operators list', config: true, admin: true, run: listOperatorsCommand,
    options: { json: { type: 'boolean' } },
    summary: 'list operators, their role, enrolment and second factor (--json)',
    help: 'Lists the operators: id, email, role, whether they enrolled and have a second factor. With --json, one JSON object {"operators": [...]}.',
  },
  {
    name: 'operators set-role', operands: ['EMAIL', 'ROLE'], config: true, admin: true, run: (args) => operatorsCommand('set-role', args),
    summary: 'change an operator\'s role (viewer, support, admin)',
    help: `Changes the operator's role. Their tokens and console session act with the new role from
their next request. The last admin cannot be demoted while admin.apiKey is empty.`,
  },
  {
    name: 'operators remove', operands: ['EMAIL'], config: true, admin: true, run: (args) => operatorsCommand('remove', args),
    summary: 'remove an operator, with its tokens and second factor',
    help: `Removes the operator: their tokens stop working at once. The last admin cannot be removed
while admin.apiKey is empty.`,
  },
  {
    name: 'operators reset-mfa', operands: ['EMAIL'], config: true, admin: true, run: (args) => operatorsCommand('reset-mfa', args),
    summary: 'remove an operator\'s second factor (a lost authenticator) and print a new enrolment link',
    help: `Removes the operator's TOTP factor and prints a new enrolment link (single use, 24 hours),
with which they set a password and a second factor again. With --admin URL, through
DELETE /admin/v1/operators/{id}/mfa (an admin operator cannot reset their own).`,
  },
  {
    name: 'operators token', operands: ['EMAIL'], config: true, run: (args) => operatorsCommand('token', args),
    options: { name: { type: 'string' }, days: { type: 'string' } },
    summary: 'print a personal admin token for an operator (--name N, --days D)',
    help: `Mints a personal admin token (gwop_…) for the operator, named --name, valid --days days
(default 90, at most 365), and prints it once: it is stored as SHA-256. It is sent as
Authorization: Bearer to the admin API and acts with the operator's role as it is at each request;
it dies with the operator. It works on the admin listener only. Direct storage only: no admin API
credential mints a token (an operator mints their own in the console).`,
  },
  {
    // Before `stripe-fake`: the parser takes the first command whose name the words start with.
    name: 'stripe-fake trigger', operands: ['EVENT'], config: false, run: stripeFakeTriggerCommand,
    options: { customer: { type: 'string' }, price: { type: 'string' }, status: { type: 'string' }, subscription: { type: 'string' }, session: { type: 'string' }, data: { type: 'string' } },
    summary: 'make a change on the running stripe-fake and send its events (invoice.payment_failed, …)',
    help: `Asks the stripe-fake running on --data DIR (default ${DEFAULT_DATA_DIR}: it wrote its address
there) to change its objects as EVENT reports, then to send the events a real Stripe account
sends for that change, in Stripe's order, signed, to its --forward-to. The gateway reads the
subscription back from the fake, so the change is what it acts on. EVENT is one of:
  checkout.session.completed     pay --session ID (a session the gateway made: its URL ends with
                                 it), as the checkout page's Pay button does; without --session, a
                                 session of the fake's own for --customer and --price (linked to no one)
  customer.subscription.created  a new subscription of --customer to --price (--status, default active)
  customer.subscription.updated  the subscription's --price and --status changed
  customer.subscription.deleted  the subscription canceled (Stripe's last retry gave up, or the
                                 customer canceled): the gateway sets free
  invoice.payment_failed         a renewal's payment failed: past_due (or --status unpaid)
  invoice.paid                   a payment succeeded: active again, or a new period
The subscription is --subscription ID, else --customer's latest one still running. Prints the
subscription, then each event with the status the gateway answered. Exit status 1 when a change
cannot be made or an event was not answered 2xx. A test double: stable commands, not for production.`,
  },
  {
    name: 'stripe-fake', config: false, run: stripeFakeCommand,
    options: { host: { type: 'string' }, port: { type: 'string' }, data: { type: 'string' }, 'forward-to': { type: 'string' } },
    summary: 'run a test double of Stripe to try billing without a Stripe account (not for production)',
    help: `Serves the part of Stripe's API the gateway calls (Checkout Sessions, Billing Portal sessions,
Customers, Subscriptions, Billing meter events) at http://127.0.0.1:${DEFAULT_PORT} (--host, --port;
HOST is never read), with a checkout page (Pay, Cancel) where the gateway's Checkout URLs lead,
and sends the events of each payment to --forward-to (the gateway's
/api/v1/billing/stripe/webhook), signed by the stripe library with a secret made once per --data
DIR (default ${DEFAULT_DATA_DIR}, which also keeps the fake's objects) and printed at start
(whsec_…; STRIPE_WEBHOOK_SECRET is never read). Point billing.stripe.apiBase at it, with a test
key (sk_test_… or rk_test_…): a live key gets 401, and it never sends livemode: true.
\`gateway stripe-fake trigger\` sends the other events. Runs until SIGINT or SIGTERM. A test
double (docs/billing.md, "Try it without a Stripe account"): stable commands, not for production.`,
  },
];

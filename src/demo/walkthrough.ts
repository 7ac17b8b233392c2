// What `npm run demo` prints once everything listens: curl commands to paste, one per guard and
// feature, with the addresses of this run.
import path from 'node:path';
import { DEMO_GITHUB_LOGIN } from './githubFake.js';
import { DEMO_IDP_USER } from './localProvider.js';

/** Where this run of the demo listens, and where it keeps the tokens its mail catcher saw. */
export interface DemoAddresses {
  url: string;
  decisionsUrl: string | undefined;
  adminUrl: string | undefined;
  adminKey: string;
  tokensDir: string;
  /** The browser page, on the echo server's origin. */
  page: string;
  /** A one-time console sign-in link. */
  consoleUrl?: string;
  /** The id step 1's account gets: the ten accounts imported at start (step 19) took the first ones. */
  firstUserId: number;
}

// Pieces of the curl commands every step spells the same way.
const json = "-H 'content-type: application/json'";
const show = `-w '  (HTTP %{http_code})\\n'`;
const field = (name: string) => `sed -E 's/.*"${name}":"([^"]+)".*/\\1/'`;

export function walkthrough(at: DemoAddresses): string {
  const lines = [
    ...introduction(at),
    ...guardSteps(at),
    ...(at.decisionsUrl ? decisionSteps(at.decisionsUrl) : []),
    ...(at.adminUrl ? adminSteps(at.url, at.adminUrl, at.adminKey, at.firstUserId) : []),
    ...accountSteps(at),
    ...factorSteps(at),
    ...providerSteps(),
    ...(at.adminUrl ? importSteps(at.url, at.adminUrl, at.adminKey) : []),
    ...billingSteps(at.url),
    ...(at.adminUrl ? organizationSteps(at) : []),
    ...(at.adminUrl ? consoleLines(at.adminUrl, at.adminKey, at.consoleUrl) : []),
    '', 'Press Ctrl-C to stop the demo (its data is deleted).', '',
  ];
  return lines.join('\n');
}

function introduction({ url, page }: DemoAddresses): string[] {
  return [
    '',
    `The gateway is listening on ${url}, in front of an echo server that answers with the headers it received.`,
    'Routes (demo/gateway.demo.yaml): /api/v1/public (no guard), /api/v1/profile (token required),',
    '/api/v1/reports (plans premium and pro), /api/v1/races (free: one use a day; premium: 5 a day, 60 a minute),',
    '/api/v1/signed (token required; its upstream also gets the identity signed in x-gateway-assertion),',
    '/api/v1/live (a WebSocket for signed-in users), /api/v1/billing (a second factor required),',
    '/api/v1/exports (plan pro, bought through Stripe Checkout at step 20),',
    '/api/v1/team (for a user or an organization: the team plan\'s pooled 3 a day), /api/v1/team-admin (owners and admins).',
    '',
    `In a browser, open ${page} : a page on another origin (the echo server's) that registers,`,
    'logs in and calls these routes through CORS, opens a WebSocket with ?access_token=, and',
    'registers a passkey and signs in with it.',
    '',
    'Every request is traced (OpenTelemetry, docs/tracing.md): the demo\'s terminal prints each trace within',
    'a second, as a [demo traces] line with the route, status, decision and the time of each stage.',
    '',
    'In another terminal, paste these one by one:',
    '',
  ];
}

/** Steps 1–7: an account, and each guard in front of the routes. */
function guardSteps({ url }: DemoAddresses): string[] {
  return [
    '# 1. Register: every new account is on the free plan (a verification link is mailed: see the demo\'s terminal)',
    `curl -s ${show} -X POST ${url}/api/v1/auth/register ${json} -d '{"email":"ada@example.com","password":"correct-horse-battery"}'`,
    '',
    '# 2. Log in, and keep the access token in a shell variable',
    `TOKEN=$(curl -s -X POST ${url}/api/v1/auth/login ${json} -d '{"email":"ada@example.com","password":"correct-horse-battery"}' | sed -E 's/.*"access_token":"([^"]+)".*/\\1/'); echo "$TOKEN"`,
    '',
    '# 3. No token: 401, the upstream never sees the request',
    `curl -s ${show} ${url}/api/v1/profile`,
    '',
    '# 3b. The same refusal in words any client can read (docs/errors.md): in English (Accept-Language), then',
    '#     as problem details (RFC 9457) with its stable code, which errors.codes: true adds to every body; the',
    '#     catalog of every code is served too',
    `curl -s ${show} ${url}/api/v1/profile -H 'Accept-Language: en'`,
    `curl -s ${show} ${url}/api/v1/profile -H 'Accept: application/problem+json' -H 'Accept-Language: en'`,
    `curl -s ${show} ${url}/api/v1/errors -o /dev/null`,
    '',
    '# 4. With the token: the upstream receives x-user-id, x-user-plan, x-user-email, x-auth-method and',
    '#    x-request-id, set by the gateway (the forged X-User-Plan sent here is removed, and the token is not forwarded)',
    `curl -s ${show} ${url}/api/v1/profile -H "Authorization: Bearer $TOKEN" -H 'X-User-Plan: pro'`,
    '',
    '# 5. A premium/pro route on the free plan: 403, with the plans needed and where to upgrade',
    `curl -s ${show} ${url}/api/v1/reports -H "Authorization: Bearer $TOKEN"`,
    '',
    '# 6. The free plan\'s daily quota: the first call goes through, the second one is refused with 429',
    `curl -s ${show} ${url}/api/v1/races -H "Authorization: Bearer $TOKEN"`,
    `curl -s ${show} ${url}/api/v1/races -H "Authorization: Bearer $TOKEN"`,
    '',
    '# 7. An upstream that wants proof gets x-gateway-assertion too: a JWT signed by the gateway\'s assertion',
    '#    key, published (apart from the access-token key) at /.well-known/gateway-assertion-keys.json',
    `curl -s ${show} ${url}/api/v1/signed -H "Authorization: Bearer $TOKEN"`,
    `curl -s ${show} ${url}/.well-known/gateway-assertion-keys.json`,
  ];
}

/** Step 8: the decisions listener, for a proxy already in place. */
function decisionSteps(decisionsUrl: string): string[] {
  return [
    '',
    '# 8. The same decisions for a proxy you already run (nginx auth_request, Caddy forward_auth: docs/decisions.md):',
    '#    200 with the identity headers for the proxy to copy, or the denial for it to pass on, and nothing forwarded.',
    '#    A request carrying its own x-user-*, x-org-* or x-auth-method is refused (400): only the gateway says who it is.',
    `curl -s -D - ${decisionsUrl}/decisions/api/v1/profile -H "Authorization: Bearer $TOKEN"`,
    `curl -s ${show} ${decisionsUrl}/decisions -H 'X-Forwarded-Uri: /api/v1/reports' -H "Authorization: Bearer $TOKEN"`,
  ];
}

/** Steps 9–10: an operator changes the plan; the same token passes at once. */
function adminSteps(url: string, adminUrl: string, adminKey: string, userId: number): string[] {
  return [
    '',
    `# 9. Upgrade the user (id ${userId}, from step 1) to premium with the admin API: the same token now passes the`,
    '#    plan guard, because the gateway reads the plan from the database, not from the token',
    `curl -s ${show} -X PUT ${adminUrl}/admin/v1/users/${userId}/plan -H 'Authorization: Bearer ${adminKey}' ${json} -d '{"plan":"premium"}'`,
    `curl -s ${show} ${url}/api/v1/reports -H "Authorization: Bearer $TOKEN"`,
    '',
    '# 10. Premium\'s quota (5 a day, 60 a minute): the daily route admits again, and says what is left',
    `curl -s -D - -o /dev/null ${url}/api/v1/races -H "Authorization: Bearer $TOKEN" | grep -i '^ratelimit'`,
  ];
}

/** Steps 11–13: sessions, and a forgotten password. */
function accountSteps({ url, tokensDir }: DemoAddresses): string[] {
  const resetToken = path.join(tokensDir, 'reset-password.token');
  return [
    '',
    '# 11. The sessions of the account: one per login, the one of this token marked current',
    `curl -s ${show} ${url}/api/v1/user/sessions -H "Authorization: Bearer $TOKEN"`,
    '',
    '# 12. A forgotten password: the answer is the same whether the account exists or not. The reset link is',
    '#     mailed; the demo\'s mail catcher prints it in the demo\'s terminal (as it printed the verification link',
    '#     at step 1), and keeps its token in a file, which the next command waits for. Then a new password:',
    `curl -s ${show} -X POST ${url}/api/v1/auth/password/forgot ${json} -d '{"email":"ada@example.com"}'`,
    `RESET_TOKEN=$(until [ -s ${resetToken} ]; do sleep 0.2; done; cat ${resetToken}); echo "$RESET_TOKEN"`,
    `curl -s ${show} -X POST ${url}/api/v1/auth/password/reset ${json} -d "{\\"token\\":\\"$RESET_TOKEN\\",\\"new_password\\":\\"a-brand-new-password\\"}"`,
    '',
    '# 13. The old password no longer works, the new one does; every session ended with the reset',
    `curl -s ${show} -X POST ${url}/api/v1/auth/login ${json} -d '{"email":"ada@example.com","password":"correct-horse-battery"}'`,
    `curl -s ${show} -X POST ${url}/api/v1/auth/login ${json} -d '{"email":"ada@example.com","password":"a-brand-new-password"}'`,
    '',
  ];
}

/** Steps 14–17: a second factor, and a sign-in link that still asks for it. */
function factorSteps({ url, page, tokensDir }: DemoAddresses): string[] {
  const magicToken = path.join(tokensDir, 'magic.token');
  // The demo's stand-in for an authenticator app, on the echo server (curl needs no name lookup).
  const totp = `${page.replace('localhost', '127.0.0.1')}demo/totp`;
  const login = `-X POST ${url}/api/v1/auth/login ${json} -d '{"email":"ada@example.com","password":"a-brand-new-password"}'`;
  return [
    '# 14. A route that needs a second factor (mfa: required): a password sign-in is refused with 403',
    `TOKEN=$(curl -s ${login} | ${field('access_token')}); echo "$TOKEN"`,
    `curl -s ${show} ${url}/api/v1/billing -H "Authorization: Bearer $TOKEN"`,
    '',
    '# 15. Enrol TOTP (from a sign-in at most 5 minutes old; the reset of step 12 verified the email). Scan the',
    '#     otpauth URL with an authenticator app, or ask the demo\'s stand-in for one, then confirm with the code:',
    `SECRET=$(curl -s -X POST ${url}/api/v1/auth/mfa/totp/enroll -H "Authorization: Bearer $TOKEN" | ${field('secret')}); echo "$SECRET"`,
    `CODE=$(curl -s ${totp}/$SECRET); echo "$CODE"`,
    `curl -s ${show} -X POST ${url}/api/v1/auth/mfa/totp/confirm -H "Authorization: Bearer $TOKEN" ${json} -d "{\\"code\\":\\"$CODE\\"}"`,
    '',
    '# 16. The password now gets no tokens: a 403 with an mfa_token, which a code turns into a pair at aal2',
    '#     (each code is accepted once: this one is the code the app shows next, accepted already)',
    `MFA_TOKEN=$(curl -s ${login} | ${field('mfa_token')}); echo "$MFA_TOKEN"`,
    `TOKEN=$(curl -s -X POST ${url}/api/v1/auth/mfa/verify ${json} `
      + `-d "{\\"mfa_token\\":\\"$MFA_TOKEN\\",\\"code\\":\\"$(curl -s "${totp}/$SECRET?next")\\"}" | ${field('access_token')}); echo "$TOKEN"`,
    `curl -s ${show} ${url}/api/v1/billing -H "Authorization: Bearer $TOKEN"`,
    '',
    '# 17. Without a password: a sign-in link by email (the mail catcher prints it and keeps its token). This',
    '#     user has TOTP, so the link too gets the 403 with an mfa_token: a link is one factor, as a password is',
    `curl -s ${show} -X POST ${url}/api/v1/auth/magic-link ${json} -d '{"email":"ada@example.com"}'`,
    `MAGIC_TOKEN=$(until [ -s ${magicToken} ]; do sleep 0.2; done; cat ${magicToken}); echo "$MAGIC_TOKEN"`,
    `curl -s ${show} -X POST ${url}/api/v1/auth/magic-link/verify ${json} -d "{\\"token\\":\\"$MAGIC_TOKEN\\"}"`,
    '',
  ];
}

/** Step 18: identity providers, on the browser page. */
function providerSteps(): string[] {
  return [
    `# 18. With an identity provider (OpenID Connect): on the browser page, "Sign in with Demo IdP" goes to the`,
    `#     demo's own provider (sign in as ${DEMO_IDP_USER.login}, any password) and back with a login_code the page exchanges`,
    '#     for a pair with amr ["fed"] (docs/identity-providers.md); "Sign in with GitHub (demo)" does the same',
    `#     with a fake of GitHub's endpoints on this machine, where ${DEMO_GITHUB_LOGIN} approves at once (kind: github)`,
  ];
}

/** Step 19: the users the demo imported at start from demo/users.csv (docs/migrating.md). */
function importSteps(url: string, adminUrl: string, adminKey: string): string[] {
  return [
    '',
    '# 19. Moving in: at start, the demo imported ten accounts from demo/users.csv, as `gateway import users` does',
    '#     (docs/migrating.md): their hashes stored as they were (hedy@example.com\'s is bcrypt), each with the id it',
    '#     had before as external_id, which the admin API and the console search by',
    `curl -s ${show} '${adminUrl}/admin/v1/users?query=legacy-101' -H 'Authorization: Bearer ${adminKey}'`,
    '#     hedy signs in with the password she had before: her bcrypt hash is checked, then replaced by argon2id',
    `curl -s ${show} ${json} -d '{"email":"hedy@example.com","password":"correct horse battery"}' ${url}/api/v1/auth/login`,
  ];
}

/** Step 20: a plan bought through Stripe Checkout (docs/billing.md), against the demo's fake of Stripe. */
function billingSteps(url: string): string[] {
  return [
    '',
    '# 20. Paying for a plan (docs/billing.md): /api/v1/exports is for pro, which premium (step 9) is not: 403. The',
    '#     gateway makes a Stripe Checkout Session and answers its URL, a page with Pay and Cancel; Pay posts to it (here',
    '#     the Stripe double, which then sends the gateway Stripe\'s signed checkout.session.completed); the gateway asks Stripe',
    '#     for the subscription and sets the plan on every instance within a second: the same token passes',
    `curl -s ${show} ${url}/api/v1/exports -H "Authorization: Bearer $TOKEN"`,
    `CHECKOUT_URL=$(curl -s -X POST ${url}/api/v1/billing/checkout -H "Authorization: Bearer $TOKEN" ${json} -d '{"price":"price_pro_monthly"}' | ${field('url')}); echo "$CHECKOUT_URL"`,
    `curl -s ${show} -X POST "$CHECKOUT_URL"`,
    `curl -s ${show} ${url}/api/v1/exports -H "Authorization: Bearer $TOKEN"`,
  ];
}

/** Steps 21–25: an organization, a second user invited by mail, the pooled quota and a role-guarded route. */
function organizationSteps({ url, adminUrl, adminKey, page, tokensDir }: DemoAddresses): string[] {
  const joinToken = path.join(tokensDir, 'join.token');
  // Grace's own inbox on the echo server: the verification link of her address, not Ada's.
  const graceVerify = `${page.replace('localhost', '127.0.0.1')}demo/mail/verify-email?to=grace@example.com`;
  const admin = `-H 'Authorization: Bearer ${adminKey}'`;
  const grace = '-H "Authorization: Bearer $GRACE"';
  const ada = '-H "Authorization: Bearer $TOKEN"';
  const asOrg = '-H "Gateway-Org: $ORG"';
  return [
    '',
    '# 21. Organizations (docs/organizations.md): Ada (her email verified at step 12) creates one and owns it; an',
    '#     operator puts it on the team plan: one pooled quota of 3 a day for all its members and keys',
    `ORG=$(curl -s -X POST ${url}/api/v1/orgs ${ada} ${json} -d '{"name":"Analytical Engines"}' | sed -E 's/.*"id":([0-9]+).*/\\1/'); echo "$ORG"`,
    `curl -s ${show} -X PUT ${adminUrl}/admin/v1/orgs/$ORG/plan ${admin} ${json} -d '{"plan":"team"}'`,
    '',
    '# 22. A second user, Grace, registers, verifies her address with the link mailed to her, and signs in',
    `curl -s ${show} -X POST ${url}/api/v1/auth/register ${json} -d '{"email":"grace@example.com","password":"another-horse-battery"}'`,
    `GRACE_LINK=$(until curl -sf '${graceVerify}'; do sleep 0.2; done); echo "$GRACE_LINK"`,
    `curl -s ${show} -X POST ${url}/api/v1/auth/email/verify ${json} -d "{\\"token\\":\\"$GRACE_LINK\\"}"`,
    `GRACE=$(curl -s -X POST ${url}/api/v1/auth/login ${json} -d '{"email":"grace@example.com","password":"another-horse-battery"}' | ${field('access_token')}); echo "$GRACE"`,
    '',
    '# 23. Ada invites Grace: a single-use link is mailed (the mail catcher prints it, and keeps its token);',
    '#     Grace accepts it, signed in as the invited address',
    `curl -s ${show} -X POST ${url}/api/v1/orgs/$ORG/invitations ${ada} ${json} -d '{"email":"grace@example.com","role":"member"}'`,
    `INVITATION=$(until [ -s ${joinToken} ]; do sleep 0.2; done; cat ${joinToken}); echo "$INVITATION"`,
    `curl -s ${show} -X POST ${url}/api/v1/orgs/invitations/accept ${grace} ${json} -d "{\\"token\\":\\"$INVITATION\\"}"`,
    '',
    '# 24. The pooled quota: acting for the organization (Gateway-Org), Ada uses one of its 3 and Grace two;',
    '#     the fourth is refused with 429, whoever sends it. The operator sees the pool\'s count',
    `curl -s ${show} -o /dev/null ${url}/api/v1/team ${ada} ${asOrg}`,
    `curl -s ${show} -o /dev/null ${url}/api/v1/team ${grace} ${asOrg}`,
    `curl -s ${show} -o /dev/null ${url}/api/v1/team ${grace} ${asOrg}`,
    `curl -s ${show} ${url}/api/v1/team ${ada} ${asOrg}`,
    `curl -s ${show} ${adminUrl}/admin/v1/orgs/$ORG ${admin}`,
    '',
    '# 25. A route for the organization\'s owners and admins (roles: [owner, admin]): Grace, a member, gets 403;',
    '#     Ada, its owner, passes, and the upstream learns the organization, her role and its plan',
    `curl -s ${show} ${url}/api/v1/team-admin ${grace} ${asOrg}`,
    `curl -s ${show} ${url}/api/v1/team-admin ${ada} ${asOrg}`,
  ];
}

function consoleLines(adminUrl: string, adminKey: string, consoleUrl: string | undefined): string[] {
  return ['', ...(consoleUrl ? ['# The console, for operators: this link signs you in, once, within 10 minutes:', `#    ${consoleUrl}`] : []),
    `# ${consoleUrl ? 'After that, ' : 'The console, for operators: '}open ${adminUrl}/console/ and sign in with the admin key ${adminKey}`];
}

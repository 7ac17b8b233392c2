// `npm run demo` as a newcomer meets it: the built demo starts, prints its walkthrough, and every
// command it prints does what its comment says when pasted into a shell, in order.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt } from '../helpers/cli.js';

const DEMO = new URL('../../dist/demo/demo.js', import.meta.url).pathname;

describe('npm run demo', () => {
  let demo: ChildProcess;
  let walkthrough = '';

  beforeAll(async () => {
    ensureBuilt();
    // PORT=0: any free port (the demo otherwise prefers 8080, which a developer's gateway may hold).
    demo = spawn(process.execPath, [DEMO], { env: { ...process.env, PORT: '0', LOG_LEVEL: 'warn' }, stdio: ['ignore', 'pipe', 'pipe'] });
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the demo did not print its walkthrough:\n${walkthrough}`)), 60_000);
      demo.stdout!.on('data', (chunk: Buffer) => {
        walkthrough += chunk.toString();
        if (walkthrough.includes('Press Ctrl-C')) {
          clearTimeout(timer);
          resolve();
        }
      });
      demo.once('exit', (code) => reject(new Error(`the demo exited (${code}):\n${walkthrough}`)));
    });
  }, 90_000);

  afterAll(async () => {
    if (!demo || demo.exitCode !== null) return;
    const exited = new Promise((resolve) => demo.once('exit', resolve));
    demo.kill('SIGINT');
    await exited;
  });

  it('prints a link that signs in to the console once, and the key that signs in to it', async () => {
    const [, link] = /this link signs you in, once, within 10 minutes:\n# {4}(http:\/\/\S+\/console\/#ticket=[\w-]{43})\n/.exec(walkthrough) ?? [];
    const [, url, key] = /open (http:\/\/\S+\/console\/) and sign in with the admin key (\S+)/.exec(walkthrough) ?? [];
    expect(link!.startsWith(`${url}#ticket=`)).toBe(true);
    expect((await fetch(url!)).status).toBe(200);
    // As the console's page POSTs, with its Origin: a ticket needs it (CONTRACT §26).
    const signIn = (body: object) => fetch(new URL('session', url), { method: 'POST', headers: { 'content-type': 'application/json', origin: new URL(url!).origin }, body: JSON.stringify(body) });
    const ticket = new URL(link!).hash.slice('#ticket='.length);
    expect((await signIn({ ticket })).status).toBe(200);
    expect((await signIn({ ticket })).status).toBe(401);
    expect((await signIn({ key })).status).toBe(200);
  });

  it('runs every printed command with the outcome its comment announces', async () => {
    const commands = walkthrough.split('\n').filter((line) => /^(curl|[A-Z_]+=)/.test(line));
    expect(commands.length).toBe(56);
    const script = commands.map((command, i) => `echo "### ${i}"\n${command}\necho`).join('\n');
    const run = spawnSync('bash', ['-c', script], { encoding: 'utf8', timeout: 60_000 });
    expect(run.status, run.stderr).toBe(0);
    const outputs = run.stdout.split(/^### \d+\n/m).slice(1).map((o) => o.trim());
    // Commands on the public listener, unless the pattern names the decisions listener.
    const on = (pattern: RegExp, c: string) => pattern.test(c) && (pattern.source.includes('decisions') || !c.includes('/decisions'));
    const step = (pattern: RegExp) => outputs[commands.findIndex((c) => on(pattern, c))]!;
    const all = (pattern: RegExp) => commands.flatMap((c, i) => (on(pattern, c) ? [outputs[i]!] : []));

    // Step 1's account comes after the ten the demo imported at start (demo/users.csv).
    expect(step(/auth\/register/)).toMatch(/"user_id":11\b.*\(HTTP 201\)/);
    expect(outputs[1]).toMatch(/^[\w-]+\.[\w-]+\.[\w-]+$/); // the token
    const [anonymous, english, problem, withToken] = all(/api\/v1\/profile/);
    expect(anonymous).toMatch(/^\{"error":"Token invalide ou expiré"\}\s*\(HTTP 401\)/);
    expect(english).toMatch(/^\{"error":"No token was sent"\}\s*\(HTTP 401\)/);
    expect(problem).toMatch(/^\{"type":"urn:gateway:error:token_missing","title":"Missing token","status":401,"code":"token_missing","detail":"No token was sent","error":"No token was sent"\}/);
    expect(step(/api\/v1\/errors/)).toMatch(/\(HTTP 200\)/);
    expect(withToken).toMatch(/"x-user-id": "11"/);
    expect(withToken).toMatch(/"x-user-plan": "free"/);
    expect(withToken).not.toMatch(/authorization/i);
    const [refused, upgraded] = all(/api\/v1\/reports/);
    expect(refused).toMatch(/Plan insuffisant.*\(HTTP 403\)/s);
    expect(upgraded).toMatch(/\(HTTP 200\)/);
    const [first, second, premium] = all(/api\/v1\/races/);
    expect(first).toMatch(/\(HTTP 200\)/);
    expect(second).toMatch(/plan free: 1 course\/jour.*\(HTTP 429\)/);
    expect(premium).toMatch(/^ratelimit-policy: "minute";q=60;w=60, "daily";q=5;w=86400/im);
    expect(premium).toMatch(/^ratelimit: "minute";r=59;t=\d+, "daily";r=3;t=\d+/im);
    expect(step(/api\/v1\/signed/)).toMatch(/"x-gateway-assertion": "[\w-]+\.[\w-]+\.[\w-]+"/);
    expect(step(/gateway-assertion-keys\.json/)).toMatch(/"keys":\[\{.*"crv":"Ed25519".*\(HTTP 200\)/);
    const [decided, denied] = all(/\/decisions/);
    expect(decided).toMatch(/^HTTP\/1\.1 200 /);
    expect(decided).toMatch(/^x-user-id: 11$/im);
    expect(denied).toMatch(/Plan insuffisant.*\(HTTP 403\)/s);
    expect(step(/admin\/v1\/users\/11\/plan/)).toMatch(/"plan":"premium".*\(HTTP 200\)/);

    // Accounts (docs/accounts.md): the sessions, then a forgotten password reset with the link the
    // demo's mail catcher received and printed in the demo's own terminal.
    expect(step(/user\/sessions/)).toMatch(/"sessions":\[\{"id":\d+,.*"current":true\}\].*\(HTTP 200\)/);
    expect(step(/password\/forgot/)).toMatch(/Si un compte existe.*\(HTTP 202\)/);
    const token = step(/^RESET_TOKEN=/);
    expect(token).toMatch(/^[\w-]{43}$/);
    // The demo's terminal (read on, now that the event loop runs again) shows both links.
    await expect.poll(() => walkthrough).toContain(`[demo mail catcher] a mail to ada@example.com:\n  https://app.example.com/reset-password?token=${token}`);
    expect(walkthrough).toMatch(/\[demo mail catcher\] a mail to ada@example\.com:\n {2}https:\/\/app\.example\.com\/verify-email\?token=[\w-]{43}/);
    expect(step(/password\/reset/)).toMatch(/Mot de passe réinitialisé.*\(HTTP 200\)/);
    const [oldPassword, newPassword] = all(/^curl .*auth\/login/);
    expect(oldPassword).toMatch(/Identifiants invalides.*\(HTTP 401\)/);
    expect(newPassword).toMatch(/"access_token".*\(HTTP 200\)/);
    // Moving in (docs/migrating.md): an account imported from demo/users.csv signs in with its bcrypt hash.
    expect(step(/hedy@example\.com/)).toMatch(/"access_token".*\(HTTP 200\)/);

    // A second factor (docs/second-factor.md): billing refused to the password, TOTP enrolled with
    // the code of the demo's stand-in for an app, the login's mfa_token and a code, billing allowed.
    const [passwordOnly, secondFactor] = all(/api\/v1\/billing/);
    expect(passwordOnly).toMatch(/Authentification à deux facteurs requise.*\(HTTP 403\)/);
    expect(secondFactor).toMatch(/"x-user-id": "11".*\(HTTP 200\)/s);
    expect(step(/mfa\/totp\/enroll/)).toMatch(/^[A-Z2-7]{16,}$/);
    expect(step(/^CODE=/)).toMatch(/^\d{6}$/);
    expect(step(/mfa\/totp\/confirm/)).toMatch(/"recovery_codes":\[("[0-9a-f-]+",?){10}\].*\(HTTP 200\)/);
    expect(step(/^MFA_TOKEN=/)).toMatch(/^[\w-]{43}$/);
    expect(step(/mfa\/verify/)).toMatch(/^[\w-]+\.[\w-]+\.[\w-]+$/);
    // A sign-in link, mailed and printed; a user with TOTP still owes a code.
    expect(step(/auth\/magic-link -H/)).toMatch(/Si un compte existe.*\(HTTP 202\)/);
    const magic = step(/^MAGIC_TOKEN=/);
    expect(magic).toMatch(/^[\w-]{43}$/);
    await expect.poll(() => walkthrough).toContain(`https://app.example.com/magic?token=${magic}`);
    expect(step(/magic-link\/verify/)).toMatch(/"error":"Code à deux facteurs requis","mfa_token":"[\w-]{43}".*\(HTTP 403\)/);

    // Paying for a plan (docs/billing.md), against the demo's fake of Stripe: the pro route refused, the
    // Checkout URL the gateway answers, paying at it sends the signed webhook (200), and the same token
    // passes the plan guard at once, as pro.
    const [beforePaying, afterPaying] = all(/api\/v1\/exports/);
    expect(beforePaying).toMatch(/Plan insuffisant.*\(HTTP 403\)/s);
    expect(step(/^CHECKOUT_URL=/)).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/c\/pay\/cs_test_[0-9a-f]+$/);
    // The page's Pay button, posted: the double answers a script with JSON, after the gateway answered its events.
    expect(step(/^curl .*"\$CHECKOUT_URL"/)).toMatch(/^\{"paid":true,"subscription":"sub_[0-9a-f]+","customer":"cus_[0-9a-f]+","webhookStatus":200,.*\}\s*\(HTTP 200\)$/s);
    expect(afterPaying).toMatch(/"x-user-plan": "pro".*\(HTTP 200\)/s);

    // Organizations (docs/organizations.md): Ada's organization on team, Grace invited through the
    // mail catcher, the pool of 3 shared by both, and the route for owners and admins.
    expect(step(/^ORG=/)).toMatch(/^\d+$/);
    expect(step(/admin\/v1\/orgs\/\$ORG\/plan/)).toMatch(/"plan":"team".*\(HTTP 200\)/);
    expect(step(/^GRACE_LINK=/)).toMatch(/^[\w-]{43}$/);
    expect(step(/auth\/email\/verify/)).toMatch(/\(HTTP 200\)/);
    expect(step(/orgs\/\$ORG\/invitations/)).toMatch(/"email":"grace@example\.com","role":"member".*\(HTTP 201\)/);
    const invitation = step(/^INVITATION=/);
    expect(invitation).toMatch(/^[\w-]{43}$/);
    await expect.poll(() => walkthrough).toContain(`[demo mail catcher] a mail to grace@example.com:\n  https://app.example.com/join?token=${invitation}`);
    expect(step(/invitations\/accept/)).toMatch(/"role":"member".*\(HTTP 200\)/);
    const pooled = all(/api\/v1\/team -H/);
    expect(pooled.slice(0, 3)).toEqual(['(HTTP 200)', '(HTTP 200)', '(HTTP 200)']);
    expect(pooled[3]).toMatch(/^\{"error":"Limite quotidienne atteinte \(plan team: 3 courses\/jour\)".*\(HTTP 429\)/);
    expect(step(/admin\/v1\/orgs\/\$ORG -H/)).toMatch(/"plan":"team".*"daily_usage":3,"monthly_usage":0.*\(HTTP 200\)/);
    const [member, owner] = all(/api\/v1\/team-admin/);
    expect(member).toMatch(/^\{"error":"Rôle insuffisant","required_roles":\["owner","admin"\],"current_role":"member"\}\s*\(HTTP 403\)/);
    expect(owner).toMatch(/"x-org-role": "owner".*"x-org-plan": "team".*\(HTTP 200\)/s);

    // Traces (docs/tracing.md): the demo's terminal prints each request's, its stages in order.
    expect(walkthrough).toContain('as a [demo traces] line with the route');
    await expect.poll(() => walkthrough, { timeout: 5000 }).toMatch(/^\[demo traces\] GET \/api\/v1\/reports 403 planInsufficient, [\d.]+ ms: gateway\.authenticate [\d.]+ ms › gateway\.plan [\d.]+ ms$/m);
    await expect.poll(() => walkthrough, { timeout: 5000 }).toMatch(/^\[demo traces\] GET \/api\/v1\/profile 200 allow, [\d.]+ ms: gateway\.authenticate [\d.]+ ms( \([^)]*\))? › upstream [\d.]+ ms$/m);
    expect(walkthrough).toMatch(/^\[demo traces\] POST \/api\/v1\/auth\/login 200, [\d.]+ ms$/m);
  });
});

// SAML enforcement (CONTRACT §31): with `enforce` on, an address of the organization's verified
// domains signs in through the connection only. Login and register answer the same 403 with
// sso_url whatever the account and the password, the link mails are not sent, turning it on ends
// the domain's sessions but the changer's and those begun through the connection, and an
// operator's break-glass turns it off.
import type { FastifyInstance } from 'fastify';
import { execFile } from 'node:child_process';
import { domainToASCII } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NO_SSO_GATE } from '../../src/auth/providers/saml/enforce.js';
import { buildAdminApp } from '../../src/admin/app.js';
import { ADMIN_KEY, bearer, closeSql, describeWithServices, makeUser, newEmail, newPassword, sql, startTestGateway, testConfig, type TestGateway } from '../helpers/gateway.js';
import { docsBlock } from '../helpers/docs.js';
import { request } from '../helpers/http.js';
import { authenticate, register } from '../helpers/softAuthenticator.js';
import { mailSettings, startSmtpCatcher, type SmtpCatcher } from '../helpers/smtp.js';
import { authenticator } from '../helpers/totp.js';
import { connect, fragmentOf, PUBLIC_URL, RETURN_TO, signIn, type Connected, verifyDomain } from './samlHelpers.js';

describe('without organizations.sso', () => {
  it('enforces nothing: every way in asks, and no address is sent to an organization', async () => {
    expect(await NO_SSO_GATE.requiredFor('ada@corp.example')).toBeUndefined();
    expect(await NO_SSO_GATE.requiredFor(undefined)).toBeUndefined();
  });
});

describeWithServices('SAML enforcement', () => {
  let gw: TestGateway;
  let smtp: SmtpCatcher;
  let admin: FastifyInstance;
  let adminUrl: string;
  beforeAll(async () => {
    smtp = await startSmtpCatcher();
    gw = await startTestGateway(testConfig({
      auth: {
        oidc: { publicUrl: PUBLIC_URL, returnTo: [RETURN_TO], providers: {} },
        magicLink: { url: 'https://app.example.test/sign-in?token={token}' },
        passkeys: { rpId: 'app.example.test', rpName: 'Example', origins: ['https://app.example.test'] },
      },
      mail: { ...mailSettings(smtp), invitationUrl: 'https://app.example.test/join?token={token}' },
      organizations: { enabled: true, sso: {} },
    }));
    admin = await buildAdminApp(gw.services);
    adminUrl = await admin.listen({ host: '127.0.0.1', port: 0 });
  });
  afterAll(async () => {
    await admin?.close();
    await gw?.close();
    await smtp?.close();
    await closeSql();
  });

  /** The link mails to `email` so far, once every queued mail went out and a control mail came after them. */
  async function mailsTo(email: string): Promise<number> {
    await gw.services.mailer.idle();
    const control = newEmail('control');
    expect((await gw.post('/api/v1/auth/register', { email: control, password: newPassword() })).status).toBe(201);
    await smtp.waitFor(control);
    return smtp.to(email).length;
  }

  /** A connected organization whose connection object carries the metadata as stored (a PUT of it again keeps it). */
  async function connectedWithMetadata(): Promise<Awaited<ReturnType<typeof connect>>> {
    const c = await connect(gw);
    const [stored] = await sql<{ metadata_xml: string }>('SELECT metadata_xml FROM saml_connections WHERE org_id = $1', [c.orgId]);
    c.connection.metadata_xml = stored!.metadata_xml;
    return c;
  }

  /** `name@domain` registered with a password and its email verified (so a SAML sign-in links the account). */
  async function verifiedMember(name: string, domain: string): Promise<{ email: string; password: string }> {
    const member = { email: `${name}@${domain}`, password: newPassword() };
    await sql('UPDATE users SET email_verified_at = now() WHERE id = $1', [(await gw.post('/api/v1/auth/register', member)).json.user_id]);
    return member;
  }

  /** One link mail a minute per account: the last one made an hour ago. */
  const allowAnotherMail = (userId: number) => sql("UPDATE email_tokens SET created_at = created_at - interval '1 hour' WHERE user_id = $1", [userId]);

  /** A curl block of docs/enterprise-sso.md, run as written; its output. */
  const runDocs = (block: string, env: Record<string, string>) => new Promise<string>((resolve, reject) => {
    execFile('bash', ['-e', '-c', docsBlock('enterprise-sso', block)], { env: { PATH: process.env.PATH ?? '', ...env }, timeout: 30_000 },
      (err, stdout, stderr) => (err ? reject(new Error(stderr)) : resolve(stdout)));
  });

  const enforce = (c: Connected, on: boolean) =>
    gw.request('PUT', `/api/v1/orgs/${c.orgId}/sso/saml`, { headers: bearer(c.owner.access), json: { metadata_xml: c.connection.metadata_xml, enforce: on } });

  it('an internationalized domain is one domain in either spelling: its Unicode addresses are refused as its A-label ones', async () => {
    const c = await connectedWithMetadata();
    const unicode = `bücher-${c.orgId}.test`;
    const aLabel = domainToASCII(unicode);
    expect(aLabel).toMatch(/^xn--/);
    await verifyDomain(c.orgId, aLabel);
    expect((await enforce(c, true)).status).toBe(200);
    const required = { error: 'Connexion par l\'organisation requise', sso_url: `${PUBLIC_URL}/api/v1/auth/sso?org=${c.orgId}` };
    for (const email of [`new@${unicode}`, `new@${unicode.toUpperCase()}`, `new@${aLabel}`]) {
      const answer = await gw.post('/api/v1/auth/register', { email, password: newPassword() });
      expect([answer.status, answer.json], email).toEqual([403, required]);
      const login = await gw.post('/api/v1/auth/login', { email, password: newPassword() });
      expect([login.status, login.json], email).toEqual([403, required]);
    }
    expect(await sql('SELECT id FROM users WHERE email LIKE $1', [`new@%${c.orgId}.test`])).toEqual([]);
    // A link that is none has no address to ask about: the link's own refusal, not a crash.
    const madeUp = await gw.post('/api/v1/auth/magic-link/verify', { token: 'made-up-token' });
    expect([madeUp.status, madeUp.json]).toEqual([400, { error: 'Lien invalide ou expiré' }]);
  });

  it('turned on: login, register and links refuse every address of the domain with one 403 and sso_url, before any password; other domains and SAML still sign in; break-glass ends it', async () => {
    const c = await connectedWithMetadata();
    // The owner's address is of the domain too: their own session survives their change.
    await sql('UPDATE users SET email = $2 WHERE id = $1', [c.owner.id, `owner@${c.domain}`]);
    const alice = { email: `alice@${c.domain}`, password: newPassword() };
    const reg = await gw.post('/api/v1/auth/register', alice);
    expect(reg.status).toBe(201);
    const aliceId = reg.json.user_id as number;
    const session = await gw.post('/api/v1/auth/login', alice);
    expect(session.status).toBe(200);
    // A sign-in link mailed before enforcement.
    await allowAnotherMail(aliceId);
    expect((await gw.post('/api/v1/auth/magic-link', { email: alice.email })).status).toBe(202);
    const link = await smtp.waitFor(alice.email, 2);

    const on = await enforce(c, true);
    expect([on.status, on.json.enforce], on.text).toEqual([200, true]);
    // Alice's session ended; the owner's (the changer's) goes on.
    expect((await gw.post('/api/v1/auth/refresh', { refresh_token: session.json.refresh_token })).status).toBe(401);
    expect((await gw.post('/api/v1/auth/refresh', { refresh_token: c.owner.refresh })).status).toBe(200);
    expect(await sql('SELECT DISTINCT revoked_reason FROM refresh_tokens WHERE user_id = $1', [aliceId])).toEqual([{ revoked_reason: 'sso_enforce' }]);
    const [changed] = await sql<{ data: Record<string, unknown> }>("SELECT data FROM audit_events WHERE type = 'sso.enforce_changed' AND data->>'org_id' = $1", [String(c.orgId)]);
    expect(changed!.data).toMatchObject({ enforce: true, revoked_sessions: 1 });

    const failedBefore = await sql("SELECT id FROM audit_events WHERE type = 'login.failed' AND user_id = $1", [aliceId]);
    const required = { error: 'Connexion par l\'organisation requise', sso_url: `${PUBLIC_URL}/api/v1/auth/sso?org=${c.orgId}` };
    const answers = [
      await gw.post('/api/v1/auth/login', alice),
      await gw.post('/api/v1/auth/login', { email: alice.email, password: 'wrong-password' }),
      await gw.post('/api/v1/auth/login', { email: `nobody@${c.domain.toUpperCase()}`, password: newPassword() }),
      await gw.post('/api/v1/auth/register', { email: `newcomer@${c.domain}`, password: newPassword() }),
      await gw.post('/api/v1/auth/magic-link/verify', { token: link.token }),
    ];
    for (const res of answers) expect([res.status, res.json]).toEqual([403, required]);
    // Byte for byte the same, known account or not, right password or not; the docs' curl shows it.
    expect(new Set(answers.map((res) => res.text)).size).toBe(1);
    expect(await runDocs('enforce-login', { GW: gw.url, EMAIL: alice.email })).toBe(answers[0]!.text);
    // Decided before the password: no failed login is recorded.
    expect(await sql("SELECT id FROM audit_events WHERE type = 'login.failed' AND user_id = $1", [aliceId])).toEqual(failedBefore);
    expect(await sql('SELECT id FROM users WHERE email = $1', [`newcomer@${c.domain}`])).toEqual([]);

    // The link mails keep their one answer and send nothing.
    await allowAnotherMail(aliceId);
    expect((await gw.post('/api/v1/auth/magic-link', { email: alice.email })).status).toBe(202);
    expect((await gw.post('/api/v1/auth/password/forgot', { email: alice.email })).status).toBe(202);
    expect(await mailsTo(alice.email)).toBe(2);

    // Another domain signs in as ever; SAML signs the domain's people in (a new one here: a SAML
    // sign-in to Alice's account would claim it for the organization, password and all).
    const other = await makeUser(gw);
    expect((await gw.post('/api/v1/auth/login', { email: other.email, password: other.password })).status).toBe(200);
    const { started, res } = await signIn(gw, c);
    expect(res.status, res.text).toBe(302);
    const pair = await gw.post('/api/v1/auth/oidc/exchange', { login_code: fragmentOf(res.headers.location).login_code, code_verifier: started.verifier });
    expect(pair.status, pair.text).toBe(200);

    // Break-glass: an operator turns it off; passwords and mails work again.
    const off = await runDocs('enforce-break-glass', { ADMIN_URL: adminUrl, ORG_ID: String(c.orgId), ADMIN_KEY });
    expect(JSON.parse(off)).toEqual({ org_id: c.orgId, connection_id: c.connection.id, enforce: false, revoked_sessions: 0 });
    expect((await gw.post('/api/v1/auth/login', alice)).status).toBe(200);
    await allowAnotherMail(aliceId);
    expect((await gw.post('/api/v1/auth/password/forgot', { email: alice.email })).status).toBe(202);
    await smtp.waitFor(alice.email, 3);
    const events = await sql<{ actor: string; data: Record<string, unknown> }>(
      "SELECT actor, data FROM audit_events WHERE type = 'sso.enforce_changed' AND data->>'org_id' = $1 ORDER BY id", [String(c.orgId)]);
    expect(events.map((e) => [e.actor, e.data.enforce])).toEqual([['user', true], ['admin', false]]);
  });

  it('turned on: a member\'s session begun through the connection goes on, their password session ends (by the owner and by an operator)', async () => {
    const c = await connectedWithMetadata();
    // Dave (email verified, so a SAML sign-in links his account) has a password session and a SAML one.
    const dave = await verifiedMember('dave', c.domain);
    const byPassword = (await gw.post('/api/v1/auth/login', dave)).json.refresh_token as string;
    const bySaml = await signIn(gw, c, { nameId: dave.email });
    const pair = await gw.post('/api/v1/auth/oidc/exchange', { login_code: fragmentOf(bySaml.res.headers.location).login_code, code_verifier: bySaml.started.verifier });
    expect(pair.status, pair.text).toBe(200);
    expect((await enforce(c, true)).status).toBe(200);
    expect((await gw.post('/api/v1/auth/refresh', { refresh_token: byPassword })).status).toBe(401);
    const kept = await gw.post('/api/v1/auth/refresh', { refresh_token: pair.json.refresh_token });
    expect(kept.status).toBe(200);
    // Off and on again by an operator: the SAML session still goes on.
    const operator = (enforce: boolean) => request(adminUrl, 'PUT', `/admin/v1/orgs/${c.orgId}/sso/saml`, { headers: bearer(ADMIN_KEY), json: { enforce } });
    expect((await operator(false)).status).toBe(200);
    expect((await operator(true)).json).toMatchObject({ enforce: true, revoked_sessions: 0 });
    expect((await gw.post('/api/v1/auth/refresh', { refresh_token: kept.json.refresh_token })).status).toBe(200);
    const events = await sql<{ data: Record<string, unknown> }>(
      "SELECT data FROM audit_events WHERE type = 'sso.enforce_changed' AND data->>'org_id' = $1 ORDER BY id", [String(c.orgId)]);
    expect(events.map((e) => [e.data.enforce, e.data.revoked_sessions])).toEqual([[true, 1], [false, 0], [true, 0]]);
  });

  it('turned on: an mfa_token a password login gave before is refused at /mfa/verify with the 403, its code unused', async () => {
    const c = await connectedWithMetadata();
    const erin = await verifiedMember('erin', c.domain);
    const access = (await gw.post('/api/v1/auth/login', erin)).json.access_token as string;
    const { secret } = (await gw.post('/api/v1/auth/mfa/totp/enroll', {}, { headers: bearer(access) })).json as { secret: string };
    expect((await gw.post('/api/v1/auth/mfa/totp/confirm', { code: authenticator.generate(secret) }, { headers: bearer(access) })).status).toBe(200);
    const pending = await gw.post('/api/v1/auth/login', erin);
    expect(pending.status).toBe(403);

    expect((await enforce(c, true)).status).toBe(200);
    const code = authenticator.clone({ epoch: Date.now() + 30_000 }).generate(secret);
    const verified = await gw.post('/api/v1/auth/mfa/verify', { mfa_token: pending.json.mfa_token, code });
    expect([verified.status, verified.json]).toEqual([403, { error: 'Connexion par l\'organisation requise', sso_url: `${PUBLIC_URL}/api/v1/auth/sso?org=${c.orgId}` }]);
    expect(await sql('SELECT used_at, failures FROM mfa_tokens WHERE user_id = (SELECT id FROM users WHERE email = $1)', [erin.email]))
      .toEqual([{ used_at: null, failures: 0 }]);
  });

  it('turned on: a passkey of the domain, once it verified, and a reset link mailed before (an invitation is one) get the 403 too', async () => {
    const c = await connect(gw);
    const bob = { email: `bob@${c.domain}`, password: newPassword() };
    const bobId = (await gw.post('/api/v1/auth/register', bob)).json.user_id as number;
    await sql('UPDATE users SET email_verified_at = now() WHERE id = $1', [bobId]);
    const access = (await gw.post('/api/v1/auth/login', bob)).json.access_token as string;
    const options = await gw.post('/api/v1/auth/passkeys/register/options', {}, { headers: bearer(access) });
    expect(options.status, options.text).toBe(200);
    const { response, credential } = register(options.json, { origin: 'https://app.example.test' });
    expect((await gw.post('/api/v1/auth/passkeys/register/verify', response, { headers: bearer(access) })).status).toBe(201);
    const passkeyLogin = async () => gw.post('/api/v1/auth/passkeys/login/verify',
      authenticate((await gw.post('/api/v1/auth/passkeys/login/options', {})).json, credential, { origin: 'https://app.example.test' }));
    expect((await passkeyLogin()).status).toBe(200);
    await allowAnotherMail(bobId);
    expect((await gw.post('/api/v1/auth/password/forgot', { email: bob.email })).status).toBe(202);
    const reset = await smtp.waitFor(bob.email, 2);

    const [stored] = await sql<{ metadata_xml: string }>('SELECT metadata_xml FROM saml_connections WHERE org_id = $1', [c.orgId]);
    c.connection.metadata_xml = stored!.metadata_xml;
    expect((await enforce(c, true)).status).toBe(200);
    const required = { error: 'Connexion par l\'organisation requise', sso_url: `${PUBLIC_URL}/api/v1/auth/sso?org=${c.orgId}` };
    const byPasskey = await passkeyLogin();
    expect([byPasskey.status, byPasskey.json]).toEqual([403, required]);
    const byReset = await gw.post('/api/v1/auth/password/reset', { token: reset.token, new_password: newPassword() });
    expect([byReset.status, byReset.json]).toEqual([403, required]);
    expect(await sql("SELECT type FROM audit_events WHERE user_id = $1 AND type = 'password.reset'", [bobId])).toEqual([]);
  });

  it('break-glass refuses a body other than {enforce: boolean}, a key other than the admin\'s, and an organization without a connection', async () => {
    const c = await connect(gw);
    const put = (json: unknown, key = ADMIN_KEY, id = c.orgId) => request(adminUrl, 'PUT', `/admin/v1/orgs/${id}/sso/saml`, { headers: bearer(key), json });
    expect((await put({ enforce: 'no' })).status).toBe(400);
    expect((await put({ enforce: false, allowJit: true })).status).toBe(400);
    expect((await put({ enforce: false }, 'not-the-admin-key-0123456789abcdef')).status).toBe(401);
    const none = await put({ enforce: false }, ADMIN_KEY, 987654321);
    expect([none.status, none.json.error]).toEqual([404, 'Aucune connexion d\'organisation']);
  });
});

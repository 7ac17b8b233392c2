// A JSON body is read the same whatever its framing and method (issue 27, CONTRACT §19):
// `Content-Length` or `Transfer-Encoding: chunked`, on every endpoint that reads one. Each endpoint
// is sent a body that reaches the branch depending on it (a right password, a live link), once per
// framing, and must give the same answer and the same change both times; the answer to an empty
// body is checked to differ, so an endpoint that dropped a chunked body could not pass.
import { randomBytes, randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { authenticator } from '../helpers/totp.js';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { buildAdminApp } from '../../src/admin/app.js';
import { s256 } from '../../src/auth/providers/oidc.js';
import {
  ADMIN_KEY, bearer, claims, closeSql, describeWithServices, makeUser, newEmail, newPassword, sql, startTestGateway, testConfig,
  type TestGateway, type TestUser,
} from '../helpers/gateway.js';
import { request, streamRequest, type HttpResponse } from '../helpers/http.js';
import { signInAtProvider, startTestProvider, type TestProvider } from '../helpers/oidcProvider.js';
import { mailSettings, startSmtpCatcher, type SmtpCatcher } from '../helpers/smtp.js';
import { authenticate, register, type SoftCredential } from '../helpers/softAuthenticator.js';
import { startReceiver, type Receiver } from '../helpers/webhookReceiver.js';

const AUTH = '/api/v1/auth';
const RP = { rpId: 'app.example.test', rpName: 'Example', origins: ['https://app.example.test'] };
const ORIGIN = { origin: 'https://app.example.test' };
const PUBLIC_URL = 'http://localhost:9';
const APP = 'https://app.example.test/app/';
const MAGIC_LINK = { url: 'https://app.example.test/magic?token={token}' };
const FRAMINGS = ['chunked', 'length'] as const;
type Framing = (typeof FRAMINGS)[number];
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- tests read arbitrary bodies
type Answer = { status: number; json: any };
/** A sign-in's answer: its tokens differ on every run, their shape does not. */
const PAIR = { access_token: expect.any(String), refresh_token: expect.any(String), token_type: 'Bearer', plan: 'free' };

/** What one request needs, made afresh for each framing (a link, a code, a challenge is used once). */
interface Prepared {
  body: Record<string, unknown>;
  headers?: Record<string, string>;
  /** When the path names what was just made (a user's id). */
  path?: string;
  /** The change the body asked for, seen after the answer. */
  effect?: (answer: Answer) => Promise<void>;
}

interface Case {
  /** `METHOD /path` as routed (`:id` where prepare gives the path). */
  route: string;
  listener: 'public' | 'mail' | 'admin';
  /** The answer of the body-dependent branch, for both framings. */
  answer: Answer;
  prepare: () => Promise<Prepared>;
  /** An empty body gets the same answer (logout is always 200): only the effect shows the field was read. */
  emptyAnswersAlike?: boolean;
}

/** The pair a credential change answers its session beside the contract's fields (CONTRACT §33). */
const NEW_PAIR = { access_token: expect.any(String), refresh_token: expect.any(String), token_type: 'Bearer', plan: 'free' };

describeWithServices('request bodies under both framings', () => {
  /** Passkeys, identity providers and TOTP; no mail, so adding a factor needs no verified address. */
  let gw: TestGateway;
  /** Mail and sign-in links. */
  let mailGw: TestGateway;
  let admin: FastifyInstance;
  let adminUrl: string;
  let smtp: SmtpCatcher;
  let idp: TestProvider;
  let receiver: Receiver;
  beforeAll(async () => {
    [smtp, idp, receiver] = await Promise.all([startSmtpCatcher(), startTestProvider([`${PUBLIC_URL}${AUTH}/oidc/testidp/callback`]), startReceiver()]);
    const oidc = { publicUrl: PUBLIC_URL, returnTo: [APP], providers: { testidp: { issuer: idp.issuer, clientId: idp.clientId, clientSecret: idp.clientSecret, scopes: ['openid', 'email'] } } };
    gw = await startTestGateway(testConfig({ auth: { passkeys: RP, oidc } }));
    mailGw = await startTestGateway(testConfig({ mail: mailSettings(smtp), auth: { magicLink: MAGIC_LINK } }));
    admin = await buildAdminApp(gw.services);
    adminUrl = await admin.listen({ host: '127.0.0.1', port: 0 });
  });
  afterAll(async () => {
    await admin?.close();
    await Promise.all([gw?.close(), mailGw?.close()]);
    await Promise.all([smtp?.close(), idp?.close(), receiver?.close()]);
    await closeSql();
  });

  // The body a byte per chunk, so that every multi-byte character is cut in two (`é` in a name, a
  // password), or in one piece with its length.
  async function send(base: string, method: string, path: string, json: unknown, framing: Framing, headers: Record<string, string> = {}): Promise<Answer> {
    const body = Buffer.from(JSON.stringify(json));
    const chunks = framing === 'chunked' ? [...body].map((byte) => Buffer.of(byte)) : [body];
    // Named explicitly: Node frames a DELETE body only when told to.
    const framingHeader: Record<string, string> = framing === 'length' ? { 'content-length': String(body.length) } : { 'transfer-encoding': 'chunked' };
    const res = await streamRequest(base, method, path, chunks, { 'content-type': 'application/json', ...framingHeader, ...headers });
    const text = res.body.toString('utf8');
    return { status: res.status, json: text ? JSON.parse(text) : undefined };
  }

  /** A step of a case's setup, which must succeed: its body. */
  function ok(res: HttpResponse, status: number) {
    expect(res.status, res.text).toBe(status);
    return res.json;
  }
  const login = (on: TestGateway, email: string, password: string) => on.post(`${AUTH}/login`, { email, password });
  /** The token of the link in the message with this subject to the address (sent off the request). */
  async function mailedToken(email: string, subject: string): Promise<string> {
    const find = () => smtp.to(email).find((m) => m.subject === subject);
    await expect.poll(() => find() !== undefined, { timeout: 10_000 }).toBe(true);
    return find()!.token!;
  }
  /** A user with a confirmed TOTP, and the recovery codes its confirmation showed. */
  async function userWithTotp(): Promise<{ user: TestUser; recovery: string[] }> {
    const user = await makeUser(gw);
    const { secret } = ok(await gw.post(`${AUTH}/mfa/totp/enroll`, {}, { headers: bearer(user.access) }), 200);
    const { recovery_codes } = ok(await gw.post(`${AUTH}/mfa/totp/confirm`, { code: authenticator.generate(secret) }, { headers: bearer(user.access) }), 200);
    return { user, recovery: recovery_codes };
  }
  /** The mfa_token a password login answers a user with TOTP. */
  const mfaToken = async (user: TestUser): Promise<string> => ok(await login(gw, user.email, user.password), 403).mfa_token;
  async function userWithPasskey(): Promise<SoftCredential> {
    const user = await makeUser(gw);
    const options = ok(await gw.post(`${AUTH}/passkeys/register/options`, {}, { headers: bearer(user.access) }), 200);
    const { response, credential } = register(options, ORIGIN);
    ok(await gw.post(`${AUTH}/passkeys/register/verify`, response, { headers: bearer(user.access) }), 201);
    return credential;
  }
  /** A sign-in at the identity provider, back with the login code an application exchanges. */
  async function loginCode(): Promise<{ login_code: string; code_verifier: string }> {
    const subject = `sub-${randomUUID()}`;
    idp.users.set(subject, { email: newEmail('idp'), email_verified: true });
    const verifier = randomBytes(32).toString('base64url');
    const started = await gw.get(`${AUTH}/oidc/testidp/start?return_to=${encodeURIComponent(APP)}&code_challenge=${s256(verifier)}`);
    expect(started.status, started.text).toBe(302);
    const cookie = String((started.headers['set-cookie'] as string[])[0]).split(';')[0]!;
    const back = await signInAtProvider(String(started.headers.location), subject);
    const returned = await gw.get(`${back.pathname}${back.search}`, { headers: { cookie } });
    expect(returned.status, returned.text).toBe(302);
    const fragment = new URLSearchParams(new URL(String(returned.headers.location)).hash.slice(1));
    return { login_code: fragment.get('login_code')!, code_verifier: verifier };
  }
  async function consoleSession(): Promise<Record<string, string>> {
    const res = await request(adminUrl, 'POST', '/console/session', { json: { key: ADMIN_KEY } });
    expect(res.status, res.text).toBe(200);
    return { cookie: String(res.headers['set-cookie']).split(';')[0]!, 'x-csrf-token': res.json.csrf };
  }
  const planOf = async (id: number) => (await sql<{ plan: string }>('SELECT plan FROM users WHERE id = $1', [id]))[0]?.plan;

  // Every endpoint that reads a JSON body (the routes.ts and accountRoutes.ts of src/auth/'s features, src/user/,
  // src/admin/routes.ts, src/admin/console.ts). POST /email/resend and the /options of passkeys
  // read none.
  const CASES: Case[] = [
    {
      route: `POST ${AUTH}/register`, listener: 'public',
      answer: { status: 201, json: { message: 'Utilisateur créé', user_id: expect.any(Number) } },
      async prepare() {
        const email = newEmail('framed');
        return { body: { email, password: newPassword() }, effect: async ({ json }) => expect(await sql('SELECT id FROM users WHERE email = $1', [email])).toEqual([{ id: json.user_id }]) };
      },
    },
    {
      route: `POST ${AUTH}/login`, listener: 'public', answer: { status: 200, json: PAIR },
      async prepare() {
        const user = await makeUser(gw);
        return { body: { email: user.email, password: user.password } };
      },
    },
    {
      route: `POST ${AUTH}/refresh`, listener: 'public', answer: { status: 200, json: PAIR },
      async prepare() {
        const user = await makeUser(gw);
        // Rotated: the token sent is spent.
        return { body: { refresh_token: user.refresh }, effect: async () => expect((await gw.post(`${AUTH}/refresh`, { refresh_token: user.refresh })).status).toBe(401) };
      },
    },
    {
      route: `POST ${AUTH}/logout`, listener: 'public', answer: { status: 200, json: { message: 'Déconnexion réussie' } }, emptyAnswersAlike: true,
      async prepare() {
        const user = await makeUser(gw);
        return { body: { refresh_token: user.refresh }, effect: async () => expect((await gw.post(`${AUTH}/refresh`, { refresh_token: user.refresh })).status).toBe(401) };
      },
    },
    {
      route: `POST ${AUTH}/password/change`, listener: 'public', answer: { status: 200, json: PAIR },
      async prepare() {
        const user = await makeUser(gw);
        const next = `${newPassword()}-é`;
        return { body: { current_password: user.password, new_password: next }, headers: bearer(user.access), effect: async () => expect((await login(gw, user.email, next)).status).toBe(200) };
      },
    },
    {
      route: `POST ${AUTH}/password/forgot`, listener: 'mail',
      answer: { status: 202, json: { message: 'Si un compte existe pour cet email, un lien de réinitialisation vient d’être envoyé' } },
      async prepare() {
        const user = await makeUser(mailGw);
        return { body: { email: user.email }, effect: async () => expect(await mailedToken(user.email, 'Réinitialisation de votre mot de passe')).toEqual(expect.any(String)) };
      },
    },
    {
      route: `POST ${AUTH}/password/reset`, listener: 'mail', answer: { status: 200, json: { message: 'Mot de passe réinitialisé' } },
      async prepare() {
        const user = await makeUser(mailGw);
        ok(await mailGw.post(`${AUTH}/password/forgot`, { email: user.email }), 202);
        const token = await mailedToken(user.email, 'Réinitialisation de votre mot de passe');
        const next = newPassword();
        return { body: { token, new_password: next }, effect: async () => expect((await login(mailGw, user.email, next)).status).toBe(200) };
      },
    },
    {
      route: `POST ${AUTH}/email/verify`, listener: 'mail', answer: { status: 200, json: { message: 'Email vérifié' } },
      async prepare() {
        const user = await makeUser(mailGw);
        const token = await mailedToken(user.email, 'Confirmez votre adresse email');
        return {
          body: { token },
          effect: async () => expect(await sql('SELECT email_verified_at IS NOT NULL AS verified FROM users WHERE id = $1', [user.id])).toEqual([{ verified: true }]),
        };
      },
    },
    {
      route: `POST ${AUTH}/magic-link`, listener: 'mail',
      answer: { status: 202, json: { message: 'Si un compte existe pour cet email, un lien de connexion vient d’être envoyé' } },
      async prepare() {
        const user = await makeUser(mailGw);
        return { body: { email: user.email }, effect: async () => expect(await mailedToken(user.email, 'Votre lien de connexion')).toEqual(expect.any(String)) };
      },
    },
    {
      route: `POST ${AUTH}/magic-link/verify`, listener: 'mail', answer: { status: 200, json: PAIR },
      async prepare() {
        const user = await makeUser(mailGw);
        ok(await mailGw.post(`${AUTH}/magic-link`, { email: user.email }), 202);
        return { body: { token: await mailedToken(user.email, 'Votre lien de connexion') } };
      },
    },
    {
      route: `POST ${AUTH}/mfa/totp/confirm`, listener: 'public', answer: { status: 200, json: { recovery_codes: expect.arrayContaining([expect.any(String)]), ...NEW_PAIR } },
      async prepare() {
        const user = await makeUser(gw);
        const { secret } = ok(await gw.post(`${AUTH}/mfa/totp/enroll`, {}, { headers: bearer(user.access) }), 200);
        return {
          body: { code: authenticator.generate(secret) }, headers: bearer(user.access),
          effect: async () => expect(await sql('SELECT confirmed_at IS NOT NULL AS confirmed FROM mfa_totp WHERE user_id = $1', [user.id])).toEqual([{ confirmed: true }]),
        };
      },
    },
    {
      route: `POST ${AUTH}/mfa/verify`, listener: 'public', answer: { status: 200, json: PAIR },
      async prepare() {
        const { user, recovery } = await userWithTotp();
        return { body: { mfa_token: await mfaToken(user), code: recovery[0] }, effect: async ({ json }) => expect(claims(json.access_token).acr).toBe('aal2') };
      },
    },
    {
      // A password in a DELETE body: the one the contract names.
      route: `DELETE ${AUTH}/mfa/totp`, listener: 'public', answer: { status: 200, json: { message: 'Second facteur supprimé', ...NEW_PAIR } },
      async prepare() {
        const { user, recovery } = await userWithTotp();
        // Removing a factor asks for a sign-in with it (aal2).
        const session = ok(await gw.post(`${AUTH}/mfa/verify`, { mfa_token: await mfaToken(user), code: recovery[0] }), 200);
        return { body: { password: user.password }, headers: bearer(session.access_token), effect: async () => expect(await sql('SELECT 1 FROM mfa_totp WHERE user_id = $1', [user.id])).toEqual([]) };
      },
    },
    {
      route: `POST ${AUTH}/passkeys/register/verify`, listener: 'public',
      // The name is the body's own.
      answer: { status: 201, json: { id: expect.any(Number), name: 'Téléphone', created_at: expect.any(String) } },
      async prepare() {
        const user = await makeUser(gw);
        const options = ok(await gw.post(`${AUTH}/passkeys/register/options`, {}, { headers: bearer(user.access) }), 200);
        return { body: { ...register(options, ORIGIN).response, name: 'Téléphone' }, headers: bearer(user.access) };
      },
    },
    {
      route: `POST ${AUTH}/passkeys/login/verify`, listener: 'public', answer: { status: 200, json: PAIR },
      async prepare() {
        const credential = await userWithPasskey();
        const options = ok(await gw.post(`${AUTH}/passkeys/login/options`, {}), 200);
        return { body: authenticate(options, credential, ORIGIN), effect: async ({ json }) => expect(claims(json.access_token).amr).toEqual(['hwk', 'user']) };
      },
    },
    {
      route: `POST ${AUTH}/oidc/exchange`, listener: 'public', answer: { status: 200, json: PAIR },
      prepare: async () => ({ body: await loginCode() }),
    },
    {
      route: 'DELETE /api/v1/user/me', listener: 'public', answer: { status: 200, json: { message: 'Compte supprimé' } },
      async prepare() {
        const user = await makeUser(gw);
        return { body: { password: user.password }, headers: bearer(user.access), effect: async () => expect(await sql('SELECT id FROM users WHERE id = $1', [user.id])).toEqual([]) };
      },
    },
    {
      route: 'POST /api/v1/user/webhook', listener: 'public',
      answer: { status: 201, json: { url: expect.stringMatching(/^https:\/\/127\.0\.0\.1:\d+\/hook$/), secret: expect.any(String) } },
      async prepare() {
        const user = await makeUser(gw, { plan: 'pro' });
        return {
          body: { url: receiver.url }, headers: bearer(user.access),
          effect: async () => expect(await sql('SELECT url FROM webhooks WHERE user_id = $1', [user.id])).toEqual([{ url: receiver.url }]),
        };
      },
    },
    {
      route: 'PUT /admin/v1/users/:id/plan', listener: 'admin', answer: { status: 200, json: expect.objectContaining({ plan: 'pro' }) },
      async prepare() {
        const user = await makeUser(gw);
        return { path: `/admin/v1/users/${user.id}/plan`, body: { plan: 'pro' }, headers: bearer(ADMIN_KEY), effect: async () => expect(await planOf(user.id)).toBe('pro') };
      },
    },
    {
      route: 'PUT /admin/v1/users/:id/active', listener: 'admin', answer: { status: 200, json: expect.objectContaining({ is_active: 0 }) },
      async prepare() {
        const user = await makeUser(gw);
        return {
          path: `/admin/v1/users/${user.id}/active`, body: { active: false }, headers: bearer(ADMIN_KEY),
          effect: async () => expect(await sql('SELECT is_active FROM users WHERE id = $1', [user.id])).toEqual([{ is_active: 0 }]),
        };
      },
    },
    {
      route: 'POST /admin/v1/alerts', listener: 'admin', answer: { status: 202, json: { message: 'Alerte acceptée' } },
      async prepare() {
        const user = await makeUser(gw);
        return {
          body: { user_id: user.id, type: 'framing.test', data: { n: 1 } }, headers: bearer(ADMIN_KEY),
          effect: async () => expect(await sql("SELECT type FROM webhook_deliveries WHERE user_id = $1 AND type = 'framing.test'", [user.id])).toEqual([{ type: 'framing.test' }]),
        };
      },
    },
    {
      route: 'POST /console/session', listener: 'admin', answer: { status: 200, json: { csrf: expect.any(String) } },
      prepare: async () => ({ body: { key: ADMIN_KEY } }),
    },
    {
      // The console passes the body it read on to the admin API.
      route: 'PUT /console/api/v1/users/:id/plan', listener: 'admin', answer: { status: 200, json: expect.objectContaining({ plan: 'pro' }) },
      async prepare() {
        const user = await makeUser(gw);
        return { path: `/console/api/v1/users/${user.id}/plan`, body: { plan: 'pro' }, headers: await consoleSession(), effect: async () => expect(await planOf(user.id)).toBe('pro') };
      },
    },
  ];

  it.each(CASES)('$route reads the same body chunked or with its length', async ({ route, listener, answer, prepare, emptyAnswersAlike }) => {
    const [method, routed] = route.split(' ') as [string, string];
    const base = { public: gw.url, mail: mailGw.url, admin: adminUrl }[listener];
    for (const framing of FRAMINGS) {
      const { path = routed, body, headers, effect } = await prepare();
      // The answer checked below is the body's: without the fields, another one.
      if (!emptyAnswersAlike) expect(await send(base, method, path, {}, 'length', headers), 'an empty body').not.toEqual(answer);
      const got = await send(base, method, path, body, framing, headers);
      expect(got, `${framing} body`).toEqual(answer);
      await effect?.(got);
    }
  });

  it('a DELETE body with no framing at all (no length, not chunked) is no body (RFC 9112 §6.3): the password is missing and the account stays', async () => {
    const user = await makeUser(gw);
    const res = await streamRequest(gw.url, 'DELETE', '/api/v1/user/me', [Buffer.from(JSON.stringify({ password: user.password }))], { 'content-type': 'application/json', ...bearer(user.access) });
    expect(res.status).toBe(401);
    expect(await sql('SELECT id FROM users WHERE id = $1', [user.id])).toEqual([{ id: user.id }]);
  });
});

// One mailbox per account (issue 27, CONTRACT §19): an email that a mail library or an upstream
// could read as several addresses, or as another one, is refused wherever it comes in to be
// stored or mailed; mail goes to exactly the stored address; an address stored before the rule
// gets no mail and is reported at start.
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { bearer, closeSql, describeWithServices, eventually, marker, newEmail, newPassword, sql, startTestGateway, testConfig, type TestGateway } from '../helpers/gateway.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import { headerSafeEmail } from '../../src/pipeline/identityHeaders.js';
import { mailSettings, startSmtpCatcher, type SmtpCatcher } from '../helpers/smtp.js';

const INVALID = { error: 'Email invalide' };

describeWithServices('one mailbox per account', () => {
  let smtp: SmtpCatcher;
  let upstream: EchoUpstream;
  let gw: TestGateway;

  beforeAll(async () => {
    smtp = await startSmtpCatcher();
    upstream = await startEchoUpstream();
    gw = await startTestGateway(testConfig({
      mail: mailSettings(smtp),
      auth: { magicLink: { url: 'https://app.example.test/magic?token={token}' } },
      upstreams: { app: { url: upstream.url }, signed: { url: upstream.url, assertion: true } },
      routes: [{ path: '/private', upstream: 'app' }, { path: '/signed', upstream: 'signed' }],
    }));
  });

  afterAll(async () => {
    await gw?.close();
    await upstream?.close();
    await smtp?.close();
    await closeSql();
  });

  it('refuses a display name that would send the verification link to another mailbox', async () => {
    const tag = marker();
    const res = await gw.post('/api/v1/auth/register', { email: `ceo.${tag}@bank.test <attacker.${tag}@evil.test>`, password: newPassword() });
    expect(res.status).toBe(400);
    expect(res.json).toEqual(INVALID);
    expect(await sql('SELECT id FROM users WHERE email LIKE $1', [`%${tag}%`])).toEqual([]);
    // Absence read after a positive signal: every mail queued so far has been handed to the SMTP
    // server, and a mail sent after them has been received.
    await gw.services.mailer.idle();
    const control = newEmail();
    expect((await gw.post('/api/v1/auth/register', { email: control, password: newPassword() })).status).toBe(201);
    await smtp.waitFor(control);
    expect(smtp.messages.filter((m) => m.raw.includes(tag))).toEqual([]);
  });

  it('refuses lists, groups, comments, spaces, separators and quoted parts that split addresses, on register, forgot and magic link', async () => {
    const t = marker();
    const sixteen = Array.from({ length: 16 }, (_, i) => `r${i}.${t}@x.test`).join(',');
    const refused = [
      `victim.${t}@x.test,attacker.${t}@y.test`, sixteen, `a.${t}@x.test;b.${t}@y.test`, `Name <a.${t}@x.test>`, `<a.${t}@x.test>`,
      `a.${t}@x.test (comment)`, `(c)a.${t}@x.test`, `group: a.${t}@x.test;`, `a ${t}@x.test`, `a.${t}\u2028@x.test`, `a.${t}@x.test\u2029b@y.test`,
      `"a,b.${t}"@x.test`, `"a<b.${t}"@x.test`, `"a b.${t}"@x.test`, `"a:b.${t}"@x.test`, `"a@b.${t}"@x.test`, `a.${t}@@x.test`, `a.${t}@x.test@y.test`,
      `.a.${t}@x.test`, `a..${t}@x.test`, `a.${t}@-x.test`, `a.${t}@x..test`, `a.${t}@[300.1.1.1]`, `${'l'.repeat(65)}@x.test`, `a\u200b.${t}@x.test`, `a.${t}\u3000@x.test`,
    ];
    for (const email of refused) {
      for (const path of ['/api/v1/auth/register', '/api/v1/auth/password/forgot', '/api/v1/auth/magic-link']) {
        const res = await gw.post(path, { email, password: newPassword() });
        expect(res.status, `${path} ${JSON.stringify(email)}`).toBe(400);
        expect(res.json).toEqual(INVALID);
      }
    }
    expect(await sql('SELECT email FROM users WHERE email LIKE $1', [`%${t}%`])).toEqual([]);
  });

  it('refuses a domain literal on register, forgot and magic link, stores nothing, and login knows no such account (CONTRACT §26)', async () => {
    // `eve@[127.0.0.1]` names a host, not a domain: mail to it goes wherever the literal points
    // (the gateway's own network), past every domain allow-list and MX policy.
    const t = marker();
    for (const email of [`eve.${t}@[127.0.0.1]`, `eve.${t}@[IPv6:::1]`, `eve.${t}@[ipv6:2001:db8::1]`, `eve.${t}@[10.0.0.1]`]) {
      const password = newPassword();
      for (const path of ['/api/v1/auth/register', '/api/v1/auth/password/forgot', '/api/v1/auth/magic-link']) {
        const res = await gw.post(path, { email, password });
        expect([res.status, res.json], `${path} ${email}`).toEqual([400, INVALID]);
      }
      const login = await gw.post('/api/v1/auth/login', { email, password });
      expect([login.status, login.json]).toEqual([401, { error: 'Identifiants invalides' }]);
    }
    // No account, so no link could be queued for one.
    expect(await sql('SELECT email FROM users WHERE email LIKE $1', [`%${t}%`])).toEqual([]);
  });

  it('accepts single mailboxes of every permitted shape, and the header and assertion carry exactly that address', async () => {
    const t = marker();
    for (const email of [`łukasz.${t}@x.pl`, `"john..doe.${t}"@x.test`, `a+b.${t}@x.test`, `o'brien.${t}@x.test`, `${t}@bücher.example`]) {
      const password = newPassword();
      const reg = await gw.post('/api/v1/auth/register', { email, password });
      expect(reg.status, JSON.stringify(email)).toBe(201);
      const login = await gw.post('/api/v1/auth/login', { email, password });
      expect(login.status).toBe(200);
      const s = marker();
      expect((await gw.get(`/signed/${s}`, { headers: bearer(login.json.access_token) })).status).toBe(200);
      expect(decodeJwt(String(upstream.last(s)!.headers['x-gateway-assertion'])).email).toBe(email);
      expect(upstream.last(s)!.headers['x-user-email']).toBe(headerSafeEmail(email));
      expect(decodeJwt(login.json.access_token).email).toBe(email);
    }
  });

  it('sends each link with an SMTP envelope naming exactly the stored address', async () => {
    const email = newEmail('env');
    const reg = await gw.post('/api/v1/auth/register', { email, password: newPassword() });
    expect(reg.status).toBe(201);
    expect((await smtp.waitFor(email, 1)).recipients).toEqual([email]);
    // The reset and sign-in links too (one link mail a minute per account: the last one made an hour ago).
    for (const [n, path] of [[2, '/api/v1/auth/password/forgot'], [3, '/api/v1/auth/magic-link']] as const) {
      await sql("UPDATE email_tokens SET created_at = created_at - interval '1 hour' WHERE user_id = $1", [reg.json.user_id]);
      expect((await gw.post(path, { email })).status).toBe(202);
      const mails = await smtp.waitFor(email, n);
      expect(mails.recipients, path).toEqual([email]);
    }
    expect(smtp.messages.filter((m) => m.recipients.includes(email)).length).toBe(3);
  });

  it('mails nothing to an address stored before the rule, and names the account at start', async () => {
    const email = newEmail('old');
    const password = newPassword();
    const reg = await gw.post('/api/v1/auth/register', { email, password });
    expect(reg.status).toBe(201);
    await smtp.waitFor(email);
    const attacker = `attacker-${marker()}@evil.test`;
    const listed = `${email},${attacker}`;
    await sql('UPDATE users SET email = $2 WHERE id = $1', [reg.json.user_id, listed]);
    await sql("UPDATE email_tokens SET created_at = created_at - interval '1 hour' WHERE user_id = $1", [reg.json.user_id]);
    expect((await gw.post('/api/v1/auth/password/forgot', { email: listed })).status).toBe(400);
    // Login still finds it (an unknown shape is only an unknown email), and a resend is answered as
    // usual, but the queue sends nothing to the list.
    const login = await gw.post('/api/v1/auth/login', { email: listed, password });
    expect(login.status).toBe(200);
    const sent = smtp.messages.length;
    expect((await gw.post('/api/v1/auth/email/resend', {}, { headers: bearer(login.json.access_token) })).status).toBe(202);
    await eventually(() => gw.logs.some((l) => l.includes('is not a single mailbox') && l.includes(`"userId":${reg.json.user_id}`)));
    expect(smtp.messages.length).toBe(sent);
    expect(smtp.to(attacker)).toEqual([]);
    // Nor does an upstream ever read it: no x-user-email, no email claim in the assertion; the id still says who.
    await eventually(async () => {
      const p = marker();
      const s = marker();
      await gw.get(`/private/${p}`, { headers: bearer(login.json.access_token) });
      await gw.get(`/signed/${s}`, { headers: bearer(login.json.access_token) });
      const plain = upstream.last(p)?.headers;
      const signed = upstream.last(s)?.headers;
      return plain?.['x-user-id'] === String(reg.json.user_id) && plain['x-user-email'] === undefined
        && signed !== undefined && !('email' in decodeJwt(String(signed['x-gateway-assertion'])));
    });
    expect(JSON.stringify(upstream.hits.filter((h) => h.headers['x-user-id'] === String(reg.json.user_id)).map((h) => h.headers))).not.toContain(attacker);

    const second = await startTestGateway(testConfig({ mail: mailSettings(smtp) }));
    try {
      await eventually(() => second.logs.some((l) => l.includes('get no mail until an operator fixes the address') && l.includes(String(reg.json.user_id))));
      expect(second.logs.join('')).not.toContain('evil.test');
    } finally {
      await second.close();
    }
  });
});

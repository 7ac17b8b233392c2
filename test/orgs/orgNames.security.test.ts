// Organization names are names (CONTRACT §33, issue 68): an organization named `Account locked:
// sign in at https://evil.example/x` was mailed, from the gateway's own address, to anyone its
// creator invited, and mail clients linked the URL. Creating or renaming with a name holding
// `://`, `www.`, an `@` (fullwidth look-alikes too), a control or bidi character, or longer than
// 64 characters is 400 `Nom invalide`; the invitation mail shows the name only in quotes after
// "the organization" (« l'organisation »), never at the start of a line, also for a name stored
// before the rule.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { bearer, closeSql, describeWithServices, sql, startTestGateway, type TestGateway, type TestUser } from '../helpers/gateway.js';
import { startSmtpCatcher, type SmtpCatcher } from '../helpers/smtp.js';
import { createOrg, organizationsConfig, verifiedUser } from './helpers.js';

const NAME_INVALID = { status: 400, json: { error: 'Nom invalide', code: 'org_name_invalid' } };
const BAD = { status: 400, json: { error: 'Requête invalide', code: 'bad_request' } };
const PHISHING = 'Account locked: sign in at https://evil.example/x';

const REFUSED = [
  PHISHING, 'hxxp://x', 'Go to www.evil.example', 'WWW.EVIL.EXAMPLE', 'support@evil.example', '@here',
  // Fullwidth look-alikes, which NFKC (and some mail clients) fold to `://` and `@`.
  'https\uff1a\uff0f\uff0fevil.example', 'help\uff20evil.example',
  'a\u0000b', 'a\ud800b', 'a\u0007b', 'a\u007fb', 'a\nb', 'a\r\nSign in: b', 'a\u202eb', 'a\u2066b', 'a\u200fb', 'a\u2028b', 'a\u0085b', 'x'.repeat(65), '',
];
const ACCEPTED = ['Acme: R&D (Paris)', 'x'.repeat(64), 'Café 東京 — 株式会社', 'example.com', 'A/B testing'];

describeWithServices('organization names (CONTRACT §33)', () => {
  let smtp: SmtpCatcher;
  let gw: TestGateway;
  let owner: TestUser;
  let orgId: number;
  const as = (user: TestUser, json?: unknown) => ({ headers: bearer(user.access), ...(json === undefined ? {} : { json }) });

  beforeAll(async () => {
    smtp = await startSmtpCatcher();
    gw = await startTestGateway(organizationsConfig(smtp));
    owner = await verifiedUser(gw, smtp);
    orgId = await createOrg(gw, owner);
  });
  afterAll(async () => {
    await gw?.close();
    await smtp?.close();
    await closeSql();
  });

  it('a name holding ://, www., @, a control or bidi character, or over 64 characters is 400 Nom invalide, at creation and renaming', async () => {
    for (const name of REFUSED) {
      expect(await gw.post('/api/v1/orgs', { name }, as(owner)), JSON.stringify(name)).toMatchObject(NAME_INVALID);
      expect(await gw.request('PATCH', `/api/v1/orgs/${orgId}`, as(owner, { name })), JSON.stringify(name)).toMatchObject(NAME_INVALID);
    }
    expect((await sql<{ name: string }>('SELECT name FROM organizations WHERE id = $1', [orgId]))[0]!.name).toBe('Acme');
    // No name at all is a body out of shape, as before.
    for (const body of [{ name: 42 }, {}]) {
      expect(await gw.post('/api/v1/orgs', body, as(owner)), JSON.stringify(body)).toMatchObject(BAD);
      expect(await gw.request('PATCH', `/api/v1/orgs/${orgId}`, as(owner, body)), JSON.stringify(body)).toMatchObject(BAD);
    }
    for (const name of ACCEPTED) {
      const renamed = await gw.request('PATCH', `/api/v1/orgs/${orgId}`, as(owner, { name }));
      expect(renamed.status, name).toBe(200);
      expect(renamed.json.name).toBe(name);
    }
  });

  it('only creating and renaming read their field past the unfit-text check: deleting with a NUL in its body is still 400 Requête invalide', async () => {
    const doomed = await createOrg(gw, owner, 'Doomed');
    expect(await gw.request('DELETE', `/api/v1/orgs/${doomed}`, as(owner, { password: 'a\u0000b' }))).toMatchObject(BAD);
    expect(await sql('SELECT 1 AS n FROM organizations WHERE id = $1', [doomed])).toEqual([{ n: 1 }]);
  });

  /** The text of the invitation mail `name` gets, the invited account's language `locale`. */
  const invitationText = async (name: string, locale: 'fr' | 'en') => {
    const guest = await verifiedUser(gw, smtp);
    await sql('UPDATE users SET locale = $2 WHERE id = $1', [guest.id, locale]);
    // Stored as an import or an earlier version could have: no rule between it and the mail.
    await sql('UPDATE organizations SET name = $2 WHERE id = $1', [orgId, name]);
    expect((await gw.post(`/api/v1/orgs/${orgId}/invitations`, { email: guest.email, role: 'member' }, as(owner))).status).toBe(201);
    return (await smtp.waitFor(guest.email, 2)).text;
  };

  it('the invitation mail shows the name in quotes after "the organization" / « l\'organisation », never at the start of a line, a name stored before the rule too', async () => {
    const en = await invitationText(PHISHING, 'en');
    expect(en).toContain(`invites you to join the organization “${PHISHING}” with the address`);
    const fr = await invitationText(PHISHING, 'fr');
    expect(fr).toContain(`vous invite à rejoindre l’organisation « ${PHISHING} » avec l’adresse`);
    for (const text of [en, fr]) {
      expect(text.split('\n').filter((line) => line.trimStart().startsWith('Account'))).toEqual([]);
      expect(text.split(PHISHING)).toHaveLength(2);
    }
    // A line break, a bidi override or another control character in a stored name would start a
    // line of the mail with the creator's words, or reorder it: each is a space in the mail.
    const broken = await invitationText('Acme\r\nAccount locked\u2028sign in: \u202ehttps://evil.example/x\u0007', 'en');
    expect(broken).toContain('the organization “Acme Account locked sign in:  https://evil.example/x ” with the address');
    expect(broken.split('\n').filter((line) => line.trimStart().startsWith('Account') || line.includes('\u202e'))).toEqual([]);
  });
});

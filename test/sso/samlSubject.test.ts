// Whose address a SAML assertion names (CONTRACT §31, "Whose account"): the connection's email
// attribute when it names one, else the NameID when its format is an email's (emailAddress,
// unspecified, or none given); a transient NameID identifies nobody and makes no link. An assertion
// that names no address signs nobody in: #error=account_not_allowed, rule no_email.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { closeSql, describeWithServices, sql, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { responseXml, signResponse, type ResponseSpec } from '../helpers/samlIdp.js';
import { connect, fragmentOf, goodSpec, postAcs, ssoConfig, startSignIn, type Connected } from './samlHelpers.js';

const FORMAT = 'urn:oasis:names:tc:SAML:1.1:nameid-format:';
const PERSISTENT = 'urn:oasis:names:tc:SAML:2.0:nameid-format:persistent';
const TRANSIENT = 'urn:oasis:names:tc:SAML:2.0:nameid-format:transient';

describeWithServices('SAML: the address and the link an assertion names', () => {
  let gw: TestGateway;
  let byNameId: Connected;
  let byAttribute: Connected;
  beforeAll(async () => {
    gw = await startTestGateway(ssoConfig());
    byNameId = await connect(gw, { allowJit: true });
    byAttribute = await connect(gw, { allowJit: true, attributes: { email: 'mail', groups: 'memberOf' }, roleMapping: { admins: 'admin' } });
  });
  afterAll(async () => {
    await gw?.close();
    await closeSql();
  });

  /** Signs in through `c` with the Response `spec` describes (`edit` changes its XML before signing): the login code, or the error with its audited rule. */
  async function signInWith(c: Connected, overrides: Partial<ResponseSpec>, edit = (xml: string) => xml) {
    const started = await startSignIn(gw, c);
    const res = await postAcs(gw, c, signResponse(edit(responseXml(goodSpec(c, started, overrides)).xml), c.keys), started.relayState);
    expect(res.status).toBe(302);
    const fragment = fragmentOf(res.headers.location);
    if (fragment.login_code) return { signedIn: true };
    const [event] = await sql<{ data: Record<string, unknown> }>(
      "SELECT data FROM audit_events WHERE type = 'sso.login_failed' AND data->>'connection_id' = $1 ORDER BY id DESC LIMIT 1", [c.connection.id]);
    return { error: fragment.error, rule: event?.data.rule };
  }
  const address = (c: Connected) => `u-${randomUUID().slice(0, 8)}@${c.domain}`;
  const accountOf = (email: string) => sql<{ id: string }>('SELECT id FROM users WHERE email = $1', [email]);
  const linksOf = (email: string) => sql<{ subject: string }>(
    'SELECT i.subject FROM user_identities i JOIN users u ON u.id = i.user_id WHERE u.email = $1 AND i.provider = $2', [email, 'saml']);

  it('a NameID of an email format (emailAddress, unspecified, none given) is the address, and the link\'s subject', async () => {
    for (const [format, edit] of [[`${FORMAT}emailAddress`, undefined], [`${FORMAT}unspecified`, undefined], ['none', (xml: string) => xml.replace(/<saml:NameID Format="[^"]*">/, '<saml:NameID>')]] as const) {
      const email = address(byNameId);
      expect(await signInWith(byNameId, { nameId: email, nameIdFormat: format }, edit), format).toEqual({ signedIn: true });
      expect(await accountOf(email), format).toHaveLength(1);
      expect(await linksOf(email), format).toEqual([{ subject: email }]);
    }
  });

  it('a NameID of another format names no address: nobody signed in, rule no_email', async () => {
    const email = address(byNameId);
    for (const format of [PERSISTENT, TRANSIENT, `${FORMAT}X509SubjectName`]) {
      expect(await signInWith(byNameId, { nameId: email, nameIdFormat: format }), format).toEqual({ error: 'account_not_allowed', rule: 'no_email' });
    }
    expect(await accountOf(email)).toEqual([]);
  });

  it('a connection naming an email attribute reads the address there: a persistent NameID is the link, a transient one links nothing', async () => {
    const email = address(byAttribute);
    const persistent = `p-${randomUUID()}`;
    expect(await signInWith(byAttribute, { nameId: persistent, nameIdFormat: PERSISTENT, attributes: { mail: [email.toUpperCase()] } })).toEqual({ signedIn: true });
    expect(await linksOf(email)).toEqual([{ subject: persistent }]);
    const other = address(byAttribute);
    expect(await signInWith(byAttribute, { nameId: `t-${randomUUID()}`, nameIdFormat: TRANSIENT, attributes: { mail: [other] } })).toEqual({ signedIn: true });
    expect(await accountOf(other)).toHaveLength(1);
    expect(await linksOf(other)).toEqual([]);
  });

  it('a connection naming an email attribute ignores an email NameID when the attribute is missing: rule no_email', async () => {
    const email = address(byAttribute);
    expect(await signInWith(byAttribute, { nameId: email, attributes: { memberOf: ['admins'] } })).toEqual({ error: 'account_not_allowed', rule: 'no_email' });
    expect(await accountOf(email)).toEqual([]);
  });

  it('the groups attribute, when present, sets the role; absent, the account is a member', async () => {
    const [admin, member] = [address(byAttribute), address(byAttribute)];
    expect(await signInWith(byAttribute, { nameId: `p-${randomUUID()}`, nameIdFormat: PERSISTENT, attributes: { mail: [admin], memberOf: ['admins'] } })).toEqual({ signedIn: true });
    expect(await signInWith(byAttribute, { nameId: `p-${randomUUID()}`, nameIdFormat: PERSISTENT, attributes: { mail: [member] } })).toEqual({ signedIn: true });
    const roles = await sql<{ email: string; role: string }>(
      'SELECT u.email, m.role FROM memberships m JOIN users u ON u.id = m.user_id WHERE m.org_id = $1 AND u.email = ANY($2) ORDER BY m.role', [byAttribute.orgId, [admin, member]]);
    expect(roles).toEqual([{ email: admin, role: 'admin' }, { email: member, role: 'member' }]);
  });
});

// What the organizations tests share (kept beside them: only they use it).
import { docsExample } from '../helpers/docs.js';
import { bearer, makeUser, testConfigFromYaml, type TestGateway, type TestUser } from '../helpers/gateway.js';
import type { SmtpCatcher } from '../helpers/smtp.js';
import type { Config } from '../../src/config/schema.js';

/** docs/organizations.md's example, as written, sending to the catcher; with codes in error bodies, so tests read them. */
export function organizationsConfig(smtp: Pick<SmtpCatcher, 'url'>): Config {
  const config = testConfigFromYaml(docsExample('organizations', 'organizations'), { SMTP_URL: smtp.url });
  return { ...config, errors: { ...config.errors, codes: true } };
}

/** A new user whose email is verified through the link mailed at registration. */
export async function verifiedUser(gw: TestGateway, smtp: SmtpCatcher): Promise<TestUser> {
  const user = await makeUser(gw);
  const link = await smtp.waitFor(user.email);
  const verified = await gw.post('/api/v1/auth/email/verify', { token: link.token });
  if (verified.status !== 200) throw new Error(`verify failed: ${verified.status} ${verified.text}`);
  return user;
}

/** Creates an organization owned by `owner`; its id. */
export async function createOrg(gw: TestGateway, owner: TestUser, name = 'Acme'): Promise<number> {
  const res = await gw.post('/api/v1/orgs', { name }, { headers: bearer(owner.access) });
  if (res.status !== 201) throw new Error(`create failed: ${res.status} ${res.text}`);
  return res.json.id as number;
}

/** `inviter` invites `who` to the organization with `role`; the token of the link mailed (the n-th mail to that address). */
export async function invite(gw: TestGateway, smtp: SmtpCatcher, orgId: number, inviter: TestUser, who: TestUser, role: string, nth = 2): Promise<string> {
  const res = await gw.post(`/api/v1/orgs/${orgId}/invitations`, { email: who.email, role }, { headers: bearer(inviter.access) });
  if (res.status !== 201) throw new Error(`invite failed: ${res.status} ${res.text}`);
  return (await smtp.waitFor(who.email, nth)).token!;
}

/** `who` joins with the invitation's token; the answer's status. */
export async function join(gw: TestGateway, who: TestUser, token: string): Promise<number> {
  return (await gw.post('/api/v1/orgs/invitations/accept', { token }, { headers: bearer(who.access) })).status;
}

/** docs/organizations.md's two examples, as written, with codes in error bodies and the routes' upstream (APP_URL) signing assertions. */
export function actingConfig(smtp: Pick<SmtpCatcher, 'url'>, appUrl: string, options: { sso?: boolean } = {}): Config {
  const organizations = docsExample('organizations', 'organizations');
  // organizations.sso (SAML, SCIM, domains) after the example's last line of the block.
  const withSso = options.sso ? organizations.replace(/( {2}maxOwnedPerUser:[^\n]*\n)/, '$1  sso: {}\n') : organizations;
  if (withSso === organizations && options.sso) throw new Error('docs/organizations.md\'s example has no maxOwnedPerUser line to put sso after');
  const yaml = `${withSso}${docsExample('organizations', 'organizations-routes')}`;
  const config = testConfigFromYaml(yaml, { SMTP_URL: smtp.url, APP_URL: appUrl });
  return { ...config, errors: { ...config.errors, codes: true }, upstreams: { app: { ...config.upstreams.app!, assertion: true } } };
}

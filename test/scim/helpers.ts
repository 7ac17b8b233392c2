// What the SCIM tests share (kept beside them: only they use it): a gateway with organizations, an
// owner and their organization, a domain verified by hand (as an operator would: migration 042's
// table), a SCIM token made through the API, and a client speaking SCIM to /scim/v2/orgs/{id}/;
// all of it on a gateway of its own (startScimOrganization), and a change's answer once the row it
// waited for went (answersOnceGone).
import { randomBytes } from 'node:crypto';
import { docsExample } from '../helpers/docs.js';
import { bearer, makeUser, testConfigFromYaml, type TestGateway, type TestUser } from '../helpers/gateway.js';
import { startHookSetup, type HookSetup } from '../helpers/hookReceiver.js';
import type { HttpResponse } from '../helpers/http.js';
import { holdRows } from '../helpers/rowLock.js';
import type { SmtpCatcher } from '../helpers/smtp.js';
import type { Config } from '../../src/config/schema.js';

/** docs/organizations.md's example with organizations.sso (SCIM's paths are the gateway's only then), sending to the catcher, with codes in error bodies. */
export function scimConfig(smtp: Pick<SmtpCatcher, 'url'>, extraYaml = ''): Config {
  const organizations = docsExample('organizations', 'organizations').replace(/( {2}maxOwnedPerUser:[^\n]*\n)/, '$1  sso: {}\n');
  if (!organizations.includes('  sso: {}')) throw new Error('docs/organizations.md\'s example has no maxOwnedPerUser line to put sso after');
  const config = testConfigFromYaml(`${organizations}${extraYaml}`, { SMTP_URL: smtp.url });
  return { ...config, errors: { ...config.errors, codes: true } };
}

/** SQL on the gateways' database: the run's (sql of helpers/gateway.ts) or a throwaway one's. */
export type Sql = <T = Record<string, unknown>>(text: string, params?: unknown[]) => Promise<T[]>;

/** A user whose email is verified (by SQL: the mail is not under test here). */
export async function verifiedUser(gw: TestGateway, q: Sql): Promise<TestUser> {
  const user = await makeUser(gw);
  await q('UPDATE users SET email_verified_at = now() WHERE id = $1', [user.id]);
  return user;
}

export async function createOrg(gw: TestGateway, owner: TestUser, name = 'Acme'): Promise<number> {
  const res = await gw.post('/api/v1/orgs', { name }, { headers: bearer(owner.access) });
  if (res.status !== 201) throw new Error(`create failed: ${res.status} ${res.text}`);
  return res.json.id as number;
}

/** A fresh domain, verified for the organization as an operator would (org_domains, migration 042). */
export async function verifiedDomain(q: Sql, orgId: number): Promise<string> {
  const domain = `corp-${randomBytes(5).toString('hex')}.example.com`;
  await q(
    "INSERT INTO org_domains (org_id, domain, status, txt_value, verified_by, verified_at, expires_at) VALUES ($1, $2, 'verified', 'gateway-verify=x', 'operator', now(), now() + interval '7 days')",
    [orgId, domain],
  );
  return domain;
}

export async function newScimToken(gw: TestGateway, owner: TestUser, orgId: number, name = 'Okta'): Promise<{ id: number; token: string }> {
  const res = await gw.post(`/api/v1/orgs/${orgId}/scim/tokens`, { name }, { headers: bearer(owner.access) });
  if (res.status !== 201) throw new Error(`token failed: ${res.status} ${res.text}`);
  return { id: res.json.id, token: res.json.token };
}

export interface ScimClient {
  get(path: string): Promise<HttpResponse>;
  post(path: string, body: unknown): Promise<HttpResponse>;
  put(path: string, body: unknown): Promise<HttpResponse>;
  patch(path: string, body: unknown): Promise<HttpResponse>;
  delete(path: string): Promise<HttpResponse>;
}

/** A SCIM client of the organization, as a directory sends: application/scim+json (or `contentType`). */
export function scimClient(gw: TestGateway, orgId: number, token: string, contentType = 'application/scim+json'): ScimClient {
  const base = `/scim/v2/orgs/${orgId}`;
  const headers = { ...bearer(token), accept: 'application/scim+json' };
  const send = (method: string, path: string, body?: unknown) => gw.request(method, `${base}${path}`, {
    headers: body === undefined ? headers : { ...headers, 'content-type': contentType },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return {
    get: (path) => send('GET', path),
    post: (path, body) => send('POST', path, body),
    put: (path, body) => send('PUT', path, body),
    patch: (path, body) => send('PATCH', path, body),
    delete: (path) => send('DELETE', path),
  };
}

export const SCIM_ERROR = 'urn:ietf:params:scim:api:messages:2.0:Error';
export const PATCH_OP = 'urn:ietf:params:scim:api:messages:2.0:PatchOp';
export const USER_SCHEMA = 'urn:ietf:params:scim:schemas:core:2.0:User';
export const GROUP_SCHEMA = 'urn:ietf:params:scim:schemas:core:2.0:Group';

/** A directory's organization on a gateway of its own (startHookSetup: organizations.sso, codes in errors): its owner, a verified domain, a SCIM token and client. */
export interface ScimOrganization {
  setup: HookSetup;
  gw: TestGateway;
  q: Sql;
  owner: TestUser;
  orgId: number;
  domain: string;
  token: string;
  scim: ScimClient;
}

export async function startScimOrganization(config: Record<string, unknown> = {}): Promise<ScimOrganization> {
  const setup = await startHookSetup({ organizations: 'sso', config: { errors: { codes: true }, ...config } });
  const gw = setup.gateways[0]!;
  const q: Sql = (text, params = []) => setup.db.sql(text, params);
  const owner = await verifiedUser(gw, q);
  const orgId = await createOrg(gw, owner);
  const domain = await verifiedDomain(q, orgId);
  const { token } = await newScimToken(gw, owner, orgId);
  return { setup, gw, q, owner, orgId, domain, token, scim: scimClient(gw, orgId, token) };
}

/**
 * The answers of `changes`, sent while a transaction of the test's own on `database` holds the row
 * `lock` (a SELECT … FOR UPDATE of `id`), in which `meanwhile` (a DELETE, with `meanwhileId`) runs
 * once they all wait for it: what a change meets when its row went while it waited.
 */
export async function answersOnceGone(
  database: string, lock: string, id: unknown, changes: Array<() => Promise<HttpResponse>>, meanwhile: string, meanwhileId: unknown = id,
): Promise<HttpResponse[]> {
  const row = await holdRows(lock, [id], database);
  const answers = changes.map((change) => change());
  try {
    await row.waiters(changes.length);
    await row.run(meanwhile, [meanwhileId]);
  } finally {
    await row.release();
  }
  return Promise.all(answers);
}

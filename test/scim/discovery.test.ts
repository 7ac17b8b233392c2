// What a directory reads before it provisions (RFC 7644 §4, CONTRACT §31 "SCIM resources"):
// ServiceProviderConfig, ResourceTypes and Schemas, each as a list and one by one, with locations
// under the organization's base; an unknown type, schema or path is SCIM's 404, never the proxy's.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { closeSql, describeWithServices, sql, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { startSmtpCatcher, type SmtpCatcher } from '../helpers/smtp.js';
import { createOrg, GROUP_SCHEMA, newScimToken, SCIM_ERROR, scimClient, scimConfig, USER_SCHEMA, verifiedUser, type ScimClient } from './helpers.js';

const LIST = 'urn:ietf:params:scim:api:messages:2.0:ListResponse';
const RESOURCE_TYPE = 'urn:ietf:params:scim:schemas:core:2.0:ResourceType';
const SCHEMA = 'urn:ietf:params:scim:schemas:core:2.0:Schema';

describeWithServices('SCIM discovery (RFC 7644 §4)', () => {
  let smtp: SmtpCatcher;
  let gw: TestGateway;
  let scim: ScimClient;
  let base: string;

  beforeAll(async () => {
    smtp = await startSmtpCatcher();
    gw = await startTestGateway(scimConfig(smtp));
    const owner = await verifiedUser(gw, sql);
    const orgId = await createOrg(gw, owner);
    scim = scimClient(gw, orgId, (await newScimToken(gw, owner, orgId)).token);
    base = `/scim/v2/orgs/${orgId}`;
  });
  afterAll(async () => {
    await gw?.close();
    await smtp?.close();
    await closeSql();
  });

  /** An attribute as RFC 7643 §7 describes it, with the defaults the gateway states for each. */
  const attribute = (name: string, differs: Record<string, unknown> = {}) => ({
    name, type: 'string', multiValued: false, required: false, caseExact: false, mutability: 'readWrite', returned: 'default', uniqueness: 'none', ...differs,
  });
  const strings = (...names: string[]) => names.map((n) => attribute(n));
  const notFound = (detail: string) => ({ schemas: [SCIM_ERROR], status: '404', detail });

  it('ServiceProviderConfig: patch and filter (at most 100 results); no bulk, sort, etag or password change; the token as the one scheme', async () => {
    const res = await scim.get('/ServiceProviderConfig');
    expect(res.headers['content-type']).toContain('application/scim+json');
    expect(res.json).toEqual({
      schemas: ['urn:ietf:params:scim:schemas:core:2.0:ServiceProviderConfig'],
      patch: { supported: true },
      bulk: { supported: false, maxOperations: 0, maxPayloadSize: 0 },
      filter: { supported: true, maxResults: 100 },
      changePassword: { supported: false },
      sort: { supported: false },
      etag: { supported: false },
      authenticationSchemes: [{ type: 'oauthbearertoken', name: 'OAuth Bearer Token', description: 'A SCIM token of the organization, sent as Authorization: Bearer', primary: true }],
      meta: { resourceType: 'ServiceProviderConfig', location: `${base}/ServiceProviderConfig` },
    });
  });

  it('ResourceTypes: User and Group, listed and one by one; an unknown one is 404', async () => {
    const user = { schemas: [RESOURCE_TYPE], id: 'User', name: 'User', endpoint: '/Users', schema: USER_SCHEMA, meta: { resourceType: 'ResourceType', location: `${base}/ResourceTypes/User` } };
    const group = { schemas: [RESOURCE_TYPE], id: 'Group', name: 'Group', endpoint: '/Groups', schema: GROUP_SCHEMA, meta: { resourceType: 'ResourceType', location: `${base}/ResourceTypes/Group` } };
    expect((await scim.get('/ResourceTypes')).json).toEqual({ schemas: [LIST], totalResults: 2, startIndex: 1, itemsPerPage: 2, Resources: [user, group] });
    expect((await scim.get('/ResourceTypes/User')).json).toEqual(user);
    expect((await scim.get('/ResourceTypes/Group')).json).toEqual(group);
    const unknown = await scim.get('/ResourceTypes/Device');
    expect([unknown.status, unknown.json]).toEqual([404, notFound('Resource type not found')]);
  });

  it('Schemas: the User and Group schemas with the attributes kept, listed and by id; an unknown one is 404', async () => {
    const listed = await scim.get('/Schemas');
    expect(listed.json).toMatchObject({ schemas: [LIST], totalResults: 2, startIndex: 1, itemsPerPage: 2 });
    const [user, group] = listed.json.Resources as Array<Record<string, unknown> & { attributes: Array<Record<string, unknown>> }>;
    expect(user).toMatchObject({ schemas: [SCHEMA], id: USER_SCHEMA, name: 'User', meta: { resourceType: 'Schema', location: `${base}/Schemas/${USER_SCHEMA}` } });
    expect(user!.description).toBe('An account of the organization');
    expect(user!.attributes).toEqual([
      attribute('userName', { required: true, uniqueness: 'server' }),
      attribute('externalId', { caseExact: true }),
      attribute('displayName'),
      attribute('name', { type: 'complex', subAttributes: strings('formatted', 'familyName', 'givenName', 'middleName', 'honorificPrefix', 'honorificSuffix') }),
      attribute('emails', { type: 'complex', multiValued: true, subAttributes: [...strings('value', 'type'), attribute('primary', { type: 'boolean' })] }),
      attribute('active', { type: 'boolean' }),
      attribute('groups', { type: 'complex', multiValued: true, mutability: 'readOnly', subAttributes: strings('value', 'display') }),
    ]);
    expect(group).toMatchObject({ schemas: [SCHEMA], id: GROUP_SCHEMA, name: 'Group', meta: { resourceType: 'Schema', location: `${base}/Schemas/${GROUP_SCHEMA}` } });
    expect(group!.description).toBe('A group of the directory; its name maps to a role through roleMapping');
    expect(group!.attributes).toEqual([
      attribute('displayName', { required: true, uniqueness: 'server' }),
      attribute('externalId', { caseExact: true }),
      attribute('members', { type: 'complex', multiValued: true, subAttributes: strings('value', 'display') }),
    ]);
    expect((await scim.get(`/Schemas/${USER_SCHEMA}`)).json).toEqual(user);
    expect((await scim.get(`/Schemas/${GROUP_SCHEMA}`)).json).toEqual(group);
    const unknown = await scim.get('/Schemas/urn:ietf:params:scim:schemas:extension:enterprise:2.0:User');
    expect([unknown.status, unknown.json]).toEqual([404, notFound('Schema not found')]);
  });

  it('any other path or method under the base: SCIM\'s 404 naming it, without the query', async () => {
    const other = await scim.get('/Devices?filter=x');
    expect([other.status, other.json]).toEqual([404, notFound(`No SCIM endpoint GET ${base}/Devices`)]);
    const posted = await scim.post('/ServiceProviderConfig', {});
    expect([posted.status, posted.json]).toEqual([404, notFound(`No SCIM endpoint POST ${base}/ServiceProviderConfig`)]);
  });
});

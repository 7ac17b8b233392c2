// What src/scim/index.ts decides (issue 69: its mutation room found none of it tested): SCIM's
// paths are the gateway's only with organizations.sso, and under /scim/v2 every fault is answered
// in SCIM's error shape (RFC 7644 §3.12), never the catalog's: a body too large (413), the
// database away (503, a warning) or a fault of the gateway's own (500, logged as an error); a body
// that is not JSON reads as {} (spec §4), a User without userName.
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { StorageUnavailableError } from '../../src/errors/index.js';
import { failingStatements } from '../helpers/failingDatabase.js';
import { bearer, describeWithServices, loggedLines, startTestGateway, testConfig, type TestGateway } from '../helpers/gateway.js';
import { startHookSetup, type HookSetup } from '../helpers/hookReceiver.js';
import { createOrg, SCIM_ERROR, startScimOrganization, USER_SCHEMA, verifiedUser, type ScimClient, type ScimOrganization } from './helpers.js';

const refusal = (status: number, detail: string, scimType?: string) => ({ status, json: { schemas: [SCIM_ERROR], status: String(status), ...(scimType ? { scimType } : {}), detail } });

describeWithServices('SCIM: where its paths are served, and its faults in SCIM\'s shape', () => {
  let org: ScimOrganization;
  let gw: TestGateway;
  let orgId: number;
  let token: string;
  let scim: ScimClient;
  let restore: (() => void) | undefined;

  beforeAll(async () => {
    org = await startScimOrganization();
    ({ gw, orgId, token, scim } = org);
  });
  afterEach(() => {
    restore?.();
    restore = undefined;
  });
  afterAll(async () => {
    await org?.setup.close();
  });

  it('a body that is not JSON reads as {} (a User without userName: 400 invalidValue); one over the body limit → 413; both in SCIM\'s shape', async () => {
    const headers = { ...bearer(token), 'content-type': 'application/scim+json' };
    expect(await gw.request('POST', `/scim/v2/orgs/${orgId}/Users`, { headers, body: '{"schemas": [' }))
      .toMatchObject(refusal(400, 'userName must be a string of at most 1024 characters', 'invalidValue'));
    const huge = JSON.stringify({ schemas: [USER_SCHEMA], userName: 'a@b.test', displayName: 'x'.repeat(2 * 1024 * 1024) });
    expect(await gw.request('POST', `/scim/v2/orgs/${orgId}/Users`, { headers, body: huge })).toMatchObject(refusal(413, 'Request body too large'));
  });

  it('the database away → 503 in SCIM\'s shape and a warning; a fault of the gateway\'s own → 500 in SCIM\'s shape, logged as an error', async () => {
    restore = failingStatements(gw.services.db, /scim_users/, () => new StorageUnavailableError(new Error('the test\'s outage')));
    expect(await scim.get('/Users')).toMatchObject(refusal(503, 'Service unavailable, retry later'));
    expect(loggedLines(gw, 'scim: storage unavailable').map((l) => [l.level, (l.err as { message: string }).message])).toEqual([[40, expect.stringContaining('the test\'s outage')]]);
    restore();
    restore = failingStatements(gw.services.db, /scim_users/, () => new Error('the test\'s bug'));
    expect(await scim.get('/Users')).toMatchObject(refusal(500, 'Internal error'));
    expect(loggedLines(gw, 'scim: unexpected error').map((l) => [l.level, (l.err as { message: string }).message])).toEqual([[50, 'the test\'s bug']]);
    restore();
    restore = undefined;
    expect((await scim.get('/Users')).status).toBe(200);
  });
});

describeWithServices('SCIM\'s paths without organizations.sso', () => {
  let setup: HookSetup;
  beforeAll(async () => {
    setup = await startHookSetup({ organizations: true, config: { errors: { codes: true } } });
  });
  afterAll(async () => {
    await setup?.close();
  });

  it('are not the gateway\'s: the directory API and the token endpoints answer the catalog\'s 404', async () => {
    const gw = setup.gateways[0]!;
    const owner = await verifiedUser(gw, (text, params = []) => setup.db.sql(text, params));
    const orgId = await createOrg(gw, owner);
    const directoryApi = await gw.get(`/scim/v2/orgs/${orgId}/Users`, { headers: bearer('scim_x') });
    const tokens = await gw.post(`/api/v1/orgs/${orgId}/scim/tokens`, { name: 'Okta' }, { headers: bearer(owner.access) });
    for (const res of [directoryApi, tokens]) {
      expect(res.status).toBe(404);
      expect(res.json.schemas).toBeUndefined();
    }
  });

  it('nor with organizations.sso while organizations are off, nor without an organizations section', async () => {
    for (const organizations of [{ enabled: false, sso: {} }, undefined]) {
      const off = await startTestGateway(testConfig({ storage: setup.db.storage, organizations }));
      try {
        const res = await off.get('/scim/v2/orgs/1/Users', { headers: bearer('scim_x') });
        expect([res.status, res.json.schemas]).toEqual([404, undefined]);
      } finally {
        await off.close();
      }
    }
  });
});

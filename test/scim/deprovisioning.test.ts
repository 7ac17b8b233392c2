// A SCIM deprovisioning ends access everywhere within a second (CONTRACT §31, §4, §22): the
// deprovisioned user's access token, refresh token, personal and organization keys and their
// WebSocket acting for the organization are refused on both instances within one second of the
// directory's PATCH. And a property over HTTP: whatever filter or PATCH a directory sends, the
// answer is never a 5xx and never shows another organization's users.
import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { bearer, describeWithServices, everywhereWithin, marker, type TestGateway, type TestUser } from '../helpers/gateway.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import { startHookSetup, type HookSetup } from '../helpers/hookReceiver.js';
import { closedWithin, opened, startWsUpstream, wsConnect, type WsUpstream } from '../helpers/wsUpstream.js';
import { createOrg, newScimToken, PATCH_OP, scimClient, USER_SCHEMA, verifiedDomain, verifiedUser, type ScimClient, type Sql } from './helpers.js';

describeWithServices('SCIM deprovisioning ends access everywhere within a second (CONTRACT §31)', () => {
  let setup: HookSetup;
  let gws: TestGateway[];
  let q: Sql;
  let upstream: EchoUpstream;
  let ws: WsUpstream;
  let owner: TestUser;
  let orgId: number;
  let domain: string;
  let scim: ScimClient;

  beforeAll(async () => {
    [upstream, ws] = await Promise.all([startEchoUpstream(), startWsUpstream()]);
    setup = await startHookSetup({
      organizations: 'sso', instances: 2,
      config: {
        errors: { codes: true },
        upstreams: { app: { url: upstream.url }, live: { url: ws.url } },
        routes: [{ path: '/data', upstream: 'app', org: 'optional' }, { path: '/live', upstream: 'live', websocket: true, org: 'optional' }],
      },
    });
    gws = setup.gateways;
    q = (text, params = []) => setup.db.sql(text, params);
    owner = await verifiedUser(gws[0]!, q);
    orgId = await createOrg(gws[0]!, owner);
    domain = await verifiedDomain(q, orgId);
    scim = scimClient(gws[0]!, orgId, (await newScimToken(gws[0]!, owner, orgId)).token);
    await q("UPDATE organizations SET plan = 'pro' WHERE id = $1", [orgId]);
  });
  afterAll(async () => {
    await setup?.close();
    await Promise.all([upstream?.close(), ws?.close()]);
  });

  /** A user the directory provisioned, who then set a password (as the reset link lets them) and signed in; with both kinds of keys. */
  async function provisionedAndSignedIn() {
    const email = `leaver-${randomUUID().slice(0, 8)}@${domain}`;
    const created = await scim.post('/Users', { schemas: [USER_SCHEMA], userName: email, active: true });
    expect(created.status, created.text).toBe(201);
    const [{ id }] = await q<{ id: number }>('SELECT id FROM users WHERE email = $1', [email]) as [{ id: number }];
    const password = `Pw-${randomUUID()}`;
    await q("UPDATE users SET password_hash = $2, plan = 'pro' WHERE id = $1", [id, await gws[0]!.services.passwords.hash(password)]);
    await q("UPDATE subscriptions SET plan = 'pro' WHERE user_id = $1", [id]);
    // An admin of the organization, so that they may make an organization key.
    await q("UPDATE memberships SET role = 'admin' WHERE org_id = $1 AND user_id = $2", [orgId, id]);
    const login = await gws[0]!.post('/api/v1/auth/login', { email, password });
    expect(login.status, login.text).toBe(200);
    const access = login.json.access_token as string;
    const personal = await gws[0]!.post('/api/v1/user/api-keys', { name: 'mine' }, { headers: bearer(access) });
    expect(personal.status, personal.text).toBe(201);
    const orgKey = await gws[0]!.post(`/api/v1/orgs/${orgId}/api-keys`, { name: 'ci' }, { headers: bearer(access) });
    expect(orgKey.status, orgKey.text).toBe(201);
    return { scimId: created.json.id as string, userId: id, access, refresh: login.json.refresh_token as string, personalKey: personal.json.key as string, orgKey: orgKey.json.key as string };
  }

  it('active false: access token, personal and organization keys refused on both instances within a second, the socket closed, the refresh token refused', async () => {
    const u = await provisionedAndSignedIn();
    const asUser = { ...bearer(u.access), 'gateway-org': String(orgId) };
    for (const gw of gws) {
      expect((await gw.get(`/data/${marker()}`, { headers: asUser })).status).toBe(200);
      expect((await gw.get(`/data/${marker()}`, { headers: { 'x-api-key': u.personalKey } })).status).toBe(200);
      expect((await gw.get(`/data/${marker()}`, { headers: { 'x-api-key': u.orgKey } })).status).toBe(200);
    }
    const socket = opened(await wsConnect(`${gws[1]!.url.replace(/^http/, 'ws')}/live/${marker()}`, { headers: asUser }));

    const off = await scim.patch(`/Users/${u.scimId}`, { schemas: [PATCH_OP], Operations: [{ op: 'replace', value: { active: false } }] });
    expect(off.status, off.text).toBe(200);
    const closing = closedWithin(socket, 1000);
    await everywhereWithin(gws, async (gw) => {
      const statuses = await Promise.all([
        gw.get(`/data/${marker()}`, { headers: bearer(u.access) }),
        gw.get(`/data/${marker()}`, { headers: { 'x-api-key': u.personalKey } }),
        gw.get(`/data/${marker()}`, { headers: { 'x-api-key': u.orgKey } }),
      ]);
      return statuses.every((r) => r.status === 401);
    }, 1000);
    expect((await closing).code).toBe(1008);
    for (const gw of gws) expect((await gw.post('/api/v1/auth/refresh', { refresh_token: u.refresh })).status).toBe(401);
    // Reactivated: the account and a membership come back, the revoked organization key does not.
    const on = await scim.patch(`/Users/${u.scimId}`, { schemas: [PATCH_OP], Operations: [{ op: 'replace', value: { active: true } }] });
    expect(on.json.active).toBe(true);
    await everywhereWithin(gws, async (gw) => (await gw.get(`/data/${marker()}`, { headers: { 'x-api-key': u.personalKey } })).status === 200, 1000);
    for (const gw of gws) expect((await gw.get(`/data/${marker()}`, { headers: { 'x-api-key': u.orgKey } })).status).toBe(401);
  });

  it('DELETE: the same within a second on both instances, and the SCIM user is gone', async () => {
    const u = await provisionedAndSignedIn();
    expect((await scim.delete(`/Users/${u.scimId}`)).status).toBe(204);
    await everywhereWithin(gws, async (gw) => {
      const [byToken, byKey, byOrgKey] = await Promise.all([
        gw.get(`/data/${marker()}`, { headers: bearer(u.access) }),
        gw.get(`/data/${marker()}`, { headers: { 'x-api-key': u.personalKey } }),
        gw.get(`/data/${marker()}`, { headers: { 'x-api-key': u.orgKey } }),
      ]);
      return [byToken, byKey, byOrgKey].every((r) => r.status === 401);
    }, 1000);
    expect((await scim.get(`/Users/${u.scimId}`)).status).toBe(404);
  });

  it('property: no filter, paging or PATCH a directory sends gets a 5xx, and no list shows another organization\'s users', async () => {
    const otherOwner = await verifiedUser(gws[0]!, q);
    const otherOrg = await createOrg(gws[0]!, otherOwner, 'Globex');
    const otherDomain = await verifiedDomain(q, otherOrg);
    const other = scimClient(gws[1]!, otherOrg, (await newScimToken(gws[0]!, otherOwner, otherOrg)).token);
    const theirs = await other.post('/Users', { schemas: [USER_SCHEMA], userName: `same@${otherDomain}`, externalId: 'shared-id' });
    expect(theirs.status).toBe(201);
    const mine = await scim.post('/Users', { schemas: [USER_SCHEMA], userName: `same@${domain}`, externalId: 'shared-id' });
    expect(mine.status).toBe(201);
    const ours = new Set<string>();
    const word = fc.constantFrom('userName', 'externalId', 'displayName', 'id', ' eq ', ' co ', ' or ', ' and ', '"', 'same@', otherDomain, domain, 'shared-id', '*', '%', '\\"', ' ', '(', ')');
    const filter = fc.oneof(fc.string({ maxLength: 40 }), fc.array(word, { maxLength: 8 }).map((w) => w.join('')), fc.constantFrom(`userName eq "same@${otherDomain}"`, 'externalId eq "shared-id"'));
    await fc.assert(fc.asyncProperty(filter, fc.integer({ min: -5, max: 500 }), async (f, start) => {
      const listed = await scim.get(`/Users?filter=${encodeURIComponent(f)}&startIndex=${start}&count=${start}`);
      expect(listed.status).toBeLessThan(500);
      for (const user of listed.json?.Resources ?? []) {
        expect(user.userName).not.toContain(otherDomain);
        ours.add(user.id);
      }
      expect((listed.json?.Resources ?? []).map((r: { id: string }) => r.id)).not.toContain(theirs.json.id);
    }), { numRuns: 60 });
    const path = fc.oneof(fc.string({ maxLength: 30 }), fc.constantFrom('active', 'userName', 'emails[type eq "work"].value', 'name.givenName', 'members', 'externalId'));
    const value = fc.oneof(fc.string({ maxLength: 30 }), fc.boolean(), fc.constantFrom('True', 'False', `x@${otherDomain}`, `y@${domain}`), fc.constant(null));
    await fc.assert(fc.asyncProperty(fc.constantFrom('add', 'Replace', 'remove', 'copy'), path, value, async (op, p, v) => {
      const res = await scim.patch(`/Users/${mine.json.id}`, { schemas: [PATCH_OP], Operations: [{ op, path: p, value: v }] });
      expect(res.status).toBeLessThan(500);
    }), { numRuns: 40 });
    // The other organization's user is as it was.
    expect((await other.get(`/Users/${theirs.json.id}`)).json).toMatchObject({ userName: `same@${otherDomain}`, active: true });
  });
});

// WebSockets acting for an organization (CONTRACT §22): upgrades take Gateway-Org and organization
// keys as requests do, and a socket acting for an organization is closed (1008) within one second,
// on another instance too, when its membership ends or its role no longer passes the route's roles;
// removing a member revokes their organization keys and closes their sockets.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { bearer, closeSql, describeWithServices, everywhereWithin, makeUser, marker, sql, startTwoGateways, testConfigFromYaml, type TestGateway, type TestUser } from '../helpers/gateway.js';
import { docsExample } from '../helpers/docs.js';
import { closedWithin, opened, refused, startWsUpstream, wsConnect, type WsUpstream } from '../helpers/wsUpstream.js';
import { startSmtpCatcher, type SmtpCatcher } from '../helpers/smtp.js';
import { createOrg, verifiedUser } from './helpers.js';

const ROUTES = (url: string) => `upstreams:
  live:
    url: ${url}
routes:
  - path: /live
    upstream: live
    websocket: true
    roles: [owner, admin]
  - path: /chat
    upstream: live
    websocket: true
`;

describeWithServices('WebSockets acting for an organization (CONTRACT §22)', () => {
  let smtp: SmtpCatcher;
  let ws: WsUpstream;
  let gws: [TestGateway, TestGateway];
  let owner: TestUser;
  let orgId: number;

  const wsUrl = (gw: TestGateway, path: string) => `${gw.url.replace(/^http/, 'ws')}${path}/${marker()}`;
  const addMember = (user: TestUser, role: string) => sql('INSERT INTO memberships (org_id, user_id, role) VALUES ($1, $2, $3)', [orgId, user.id, role]);

  beforeAll(async () => {
    [smtp, ws] = await Promise.all([startSmtpCatcher(), startWsUpstream()]);
    const config = testConfigFromYaml(`${docsExample('organizations', 'organizations')}${ROUTES(ws.url)}`, { SMTP_URL: smtp.url });
    gws = await startTwoGateways({ ...config, errors: { ...config.errors, codes: true } });
    owner = await verifiedUser(gws[0], smtp);
    orgId = await createOrg(gws[0], owner);
    await sql("UPDATE organizations SET plan = 'pro' WHERE id = $1", [orgId]);
  });
  afterAll(async () => {
    await Promise.all((gws ?? []).map((g) => g.close()));
    await Promise.all([smtp?.close(), ws?.close()]);
    await closeSql();
  });

  it('an upgrade takes Gateway-Org as a request does: refused on a route without org:, and where the role does not pass', async () => {
    const member = await makeUser(gws[0]);
    await addMember(member, 'member');
    expect(refused(await wsConnect(wsUrl(gws[0], '/chat'), { headers: { ...bearer(member.access), 'Gateway-Org': String(orgId) } })))
      .toMatchObject({ status: 400, json: { error: 'Requête invalide', code: 'org_not_applicable' } });
    expect(refused(await wsConnect(wsUrl(gws[0], '/live'), { headers: { ...bearer(member.access), 'Gateway-Org': String(orgId) } })))
      .toMatchObject({ status: 403, json: { code: 'role_insufficient', current_role: 'member' } });
    const socket = opened(await wsConnect(wsUrl(gws[0], '/chat'), { headers: bearer(member.access) }));
    expect(ws.handshakes.at(-1)!.headers['gateway-org']).toBeUndefined();
    socket.ws.close();
  });

  it('a role lowered by hand closes the socket on the other instance within one second (1008 Rôle insuffisant); a bystander stays', async () => {
    const [admin, other] = [await makeUser(gws[0]), await makeUser(gws[0])];
    await addMember(admin, 'admin');
    await addMember(other, 'admin');
    const socket = opened(await wsConnect(wsUrl(gws[1], '/live'), { headers: { ...bearer(admin.access), 'Gateway-Org': String(orgId) } }));
    const bystander = opened(await wsConnect(wsUrl(gws[1], '/live'), { headers: { ...bearer(other.access), 'Gateway-Org': String(orgId) } }));
    await sql("UPDATE memberships SET role = 'member' WHERE org_id = $1 AND user_id = $2", [orgId, admin.id]);
    expect(await closedWithin(socket, 1000)).toEqual({ code: 1008, reason: 'Rôle insuffisant' });
    bystander.ws.send('still here');
    expect(await bystander.next()).toBe('echo:still here');
    bystander.ws.close();
  });

  it('removing a member closes their sockets, by bearer and by their organization key, and revokes the key', async () => {
    const leaver = await makeUser(gws[0]);
    await addMember(leaver, 'admin');
    const created = await gws[0].post(`/api/v1/orgs/${orgId}/api-keys`, { name: 'ci', role: 'admin' }, { headers: bearer(leaver.access) });
    expect(created.status, created.text).toBe(201);
    const byBearer = opened(await wsConnect(wsUrl(gws[1], '/live'), { headers: { ...bearer(leaver.access), 'Gateway-Org': String(orgId) } }));
    const byKey = opened(await wsConnect(wsUrl(gws[1], '/live'), { headers: { 'x-api-key': created.json.key } }));
    expect((await gws[0].request('DELETE', `/api/v1/orgs/${orgId}/members/${leaver.id}`, { headers: bearer(owner.access) })).status).toBe(200);
    const [a, b] = await Promise.all([closedWithin(byBearer, 1000), closedWithin(byKey, 1000)]);
    expect(a).toEqual({ code: 1008, reason: 'Accès à l\'organisation refusé' });
    expect(b).toEqual({ code: 1008, reason: 'Token invalide ou expiré' });
    // Revoked, not only refused while its creator is away: gone from the organization's keys, and
    // still refused on both instances once they are a member again.
    const listed = await gws[0].get(`/api/v1/orgs/${orgId}/api-keys`, { headers: bearer(owner.access) });
    expect(listed.json.api_keys.map((k: { id: number }) => k.id)).not.toContain(created.json.id);
    await addMember(leaver, 'admin');
    // Once each instance lets them in again by bearer, their old key is still refused there.
    await everywhereWithin(gws, async (gw) => {
      const outcome = await wsConnect(wsUrl(gw, '/live'), { headers: { ...bearer(leaver.access), 'Gateway-Org': String(orgId) } });
      if ('status' in outcome) return false;
      outcome.ws.close();
      return true;
    }, 1000);
    for (const gw of gws) {
      expect(refused(await wsConnect(wsUrl(gw, '/live'), { headers: { 'x-api-key': created.json.key } }))).toMatchObject({ status: 401, json: { code: 'token_invalid' } });
    }
  });
});

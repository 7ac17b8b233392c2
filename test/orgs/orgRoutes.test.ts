// What an organization's own routes record (CONTRACT §22; issue 69: src/orgs/orgs.ts's mutation
// room found it untested): the log lines of a creation and a deletion, the audit rows' data of a
// rename (none for the same name) and a deletion, and an id asked for before it existed acted for
// at once by its new owner (the membership cache forgets it on creation). On a database of the
// test's own: the next organization's id is known before it is made.
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  bearer, closeSql, describeWithServices, holdNotifications, loggedLines, marker, startTestGateway, throwawayDatabase, type TestGateway, type TestUser, type ThrowawayDatabase,
} from '../helpers/gateway.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import { startSmtpCatcher, type SmtpCatcher } from '../helpers/smtp.js';
import { actingConfig, createOrg, verifiedUser } from './helpers.js';

describeWithServices('an organization\'s own routes: what they log and audit', () => {
  let smtp: SmtpCatcher;
  let echo: EchoUpstream;
  let db: ThrowawayDatabase;
  let gw: TestGateway;

  beforeAll(async () => {
    [smtp, echo, db] = await Promise.all([startSmtpCatcher(), startEchoUpstream(), throwawayDatabase({ migrated: true })]);
    const config = actingConfig(smtp, echo.url);
    gw = await startTestGateway({ ...config, storage: { ...config.storage, ...db.storage } });
  });
  afterAll(async () => {
    await gw?.close();
    await Promise.all([smtp?.close(), echo?.close()]);
    await db?.drop();
    await closeSql();
  });

  const as = (user: TestUser) => ({ headers: bearer(user.access) });
  const audited = (type: string, orgId: number) =>
    db.sql<{ data: Record<string, unknown> }>("SELECT data - 'org_id' AS data FROM audit_events WHERE type = $1 AND data->>'org_id' = $2 ORDER BY id", [type, String(orgId)])
      .then((rows) => rows.map((r) => r.data));

  it('a creation is logged; the id its owner asked to act for before it existed is theirs at once', async () => {
    const owner = await verifiedUser(gw, smtp);
    const [row] = await db.sql<{ next: number }>('SELECT CASE WHEN is_called THEN last_value + 1 ELSE last_value END::int AS next FROM organizations_id_seq');
    const next = row!.next;
    const m = marker();
    const acting = { headers: { ...bearer(owner.access), 'Gateway-Org': String(next) } };
    // Asked before it exists: no membership, and the instance remembers that answer.
    expect((await gw.get(`/api/v1/team-reports/${m}`, acting)).status).toBe(403);
    // The feed would tell the instance within a second; held, only the route's own word counts.
    const held = holdNotifications(gw);
    try {
      const orgId = await createOrg(gw, owner);
      expect(orgId).toBe(next);
      expect(loggedLines(gw, 'organization created').filter((l) => l.orgId === orgId).map((l) => l.userId)).toEqual([owner.id]);
      expect((await gw.get(`/api/v1/team-reports/${m}`, acting)).status).toBe(200);
      expect(echo.last(m)!.headers['x-org-id']).toBe(String(orgId));
    } finally {
      held.release();
    }
  });

  it('a rename is audited with the new name; one to the same name is not', async () => {
    const owner = await verifiedUser(gw, smtp);
    const orgId = await createOrg(gw, owner, 'Acme');
    for (const name of ['Acme', 'Acme Labs', 'Acme Labs']) {
      expect((await gw.request('PATCH', `/api/v1/orgs/${orgId}`, { ...as(owner), json: { name } })).json).toMatchObject({ id: orgId, name });
    }
    expect(await audited('org.updated', orgId)).toEqual([{ name: 'Acme Labs' }]);
  });

  it('a deletion is audited with its name and the keys it revoked, and logged', async () => {
    const owner = await verifiedUser(gw, smtp);
    const orgId = await createOrg(gw, owner, 'Gone Inc');
    await db.sql("UPDATE organizations SET plan = 'pro' WHERE id = $1", [orgId]); // the example's apiKeys.plans
    for (const name of ['ci', 'batch']) expect((await gw.post(`/api/v1/orgs/${orgId}/api-keys`, { name }, as(owner))).status).toBe(201);
    expect((await gw.request('DELETE', `/api/v1/orgs/${orgId}`, as(owner))).status).toBe(200);
    expect(await audited('org.deleted', orgId)).toEqual([{ name: 'Gone Inc', keys_revoked: 2 }]);
    expect(loggedLines(gw, 'organization deleted').filter((l) => l.orgId === orgId).map((l) => l.userId)).toEqual([owner.id]);
  });

  it('an owner whose address is no longer verified may not delete it: the second-factor guard asks for a verified address', async () => {
    const owner = await verifiedUser(gw, smtp);
    const orgId = await createOrg(gw, owner, 'Kept Inc');
    await db.sql('UPDATE users SET email_verified_at = NULL WHERE id = $1', [owner.id]);
    // Forgotten here at once, as the users trigger's notification makes every instance forget it
    // within a second: the guard must not read the cached, verified user (CI once got 200).
    gw.services.identities.forgetUser(owner.id);
    const res = await gw.request('DELETE', `/api/v1/orgs/${orgId}`, as(owner));
    expect([res.status, res.json.code]).toEqual([403, 'email_unverified']);
    expect(await db.sql('SELECT name FROM organizations WHERE id = $1', [orgId])).toEqual([{ name: 'Kept Inc' }]);
  });
});

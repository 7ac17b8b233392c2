// Organizations across two instances on one database (CONTRACT §22): what the lock order of
// src/orgs/change.ts guarantees when requests race. Of parallel accepts of one invitation exactly
// one joins; parallel creations never make a user own more than maxOwnedPerUser; the two last
// owners demoting each other at once leave one owner, never none.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { bearer, closeSql, describeWithServices, sql, startTwoGateways, type TestGateway, type TestUser } from '../helpers/gateway.js';
import { startSmtpCatcher, type SmtpCatcher } from '../helpers/smtp.js';
import { createOrg, invite, join, organizationsConfig, verifiedUser } from './helpers.js';

describeWithServices('organizations across two instances', () => {
  let smtp: SmtpCatcher;
  let gws: [TestGateway, TestGateway];

  beforeAll(async () => {
    smtp = await startSmtpCatcher();
    gws = await startTwoGateways(organizationsConfig(smtp));
  });
  afterAll(async () => {
    await Promise.all((gws ?? []).map((gw) => gw.close()));
    await smtp?.close();
    await closeSql();
  });

  const on = (i: number) => gws[i % 2]!;
  const as = (user: TestUser) => ({ headers: bearer(user.access) });

  it('one invitation accepted 10 times at once, on both instances: exactly one 200, one membership', async () => {
    const [owner, guest] = [await verifiedUser(gws[0], smtp), await verifiedUser(gws[0], smtp)];
    const id = await createOrg(gws[0], owner);
    const token = await invite(gws[0], smtp, id, owner, guest, 'member');
    const statuses = await Promise.all(Array.from({ length: 10 }, (_, i) => join(on(i), guest, token)));
    expect(statuses.filter((s) => s === 200)).toHaveLength(1);
    expect(statuses.filter((s) => s !== 200).every((s) => s === 400 || s === 409)).toBe(true);
    expect(await sql('SELECT role FROM memberships WHERE org_id = $1 AND user_id = $2', [id, guest.id])).toEqual([{ role: 'member' }]);
    expect(await sql("SELECT 1 FROM audit_events WHERE type = 'org.member_added' AND data->>'org_id' = $1", [String(id)])).toHaveLength(1);
  });

  it('10 creations at once, on both instances, make exactly maxOwnedPerUser (3) organizations', async () => {
    const founder = await verifiedUser(gws[0], smtp);
    const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => on(i).post('/api/v1/orgs', { name: `Race ${i}` }, as(founder))));
    expect(answers.map((a) => a.status).sort()).toEqual([201, 201, 201, 409, 409, 409, 409, 409, 409, 409]);
    expect(await sql("SELECT 1 FROM memberships WHERE user_id = $1 AND role = 'owner'", [founder.id])).toHaveLength(3);
  });

  it('the two last owners demoting each other at once, on two instances, leave exactly one owner (5 rounds)', async () => {
    for (let round = 0; round < 5; round++) {
      const [a, b] = [await verifiedUser(gws[0], smtp), await verifiedUser(gws[1], smtp)];
      const id = await createOrg(gws[0], a);
      expect(await join(gws[1], b, await invite(gws[0], smtp, id, a, b, 'owner'))).toBe(200);
      const [byA, byB] = await Promise.all([
        gws[0].request('PUT', `/api/v1/orgs/${id}/members/${b.id}`, { ...as(a), json: { role: 'member' } }),
        gws[1].request('PUT', `/api/v1/orgs/${id}/members/${a.id}`, { ...as(b), json: { role: 'member' } }),
      ]);
      // The second to take the lock finds itself demoted (403: a member may not change roles) or, had
      // it gone first, the other would have: never both 200.
      expect([byA.status, byB.status].sort()).toEqual([200, 403]);
      expect(await sql("SELECT 1 FROM memberships WHERE org_id = $1 AND role = 'owner'", [id])).toHaveLength(1);
    }
  });

  it('the two last owners each stepping down at once leave exactly one owner (5 rounds)', async () => {
    for (let round = 0; round < 5; round++) {
      const [a, b] = [await verifiedUser(gws[0], smtp), await verifiedUser(gws[1], smtp)];
      const id = await createOrg(gws[0], a);
      expect(await join(gws[1], b, await invite(gws[0], smtp, id, a, b, 'owner'))).toBe(200);
      const [byA, byB] = await Promise.all([
        gws[0].request('PUT', `/api/v1/orgs/${id}/members/${a.id}`, { ...as(a), json: { role: 'admin' } }),
        gws[1].request('PUT', `/api/v1/orgs/${id}/members/${b.id}`, { ...as(b), json: { role: 'admin' } }),
      ]);
      expect([byA.status, byB.status].sort()).toEqual([200, 409]);
      expect(await sql("SELECT 1 FROM memberships WHERE org_id = $1 AND role = 'owner'", [id])).toHaveLength(1);
    }
  });
});

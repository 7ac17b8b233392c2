// GET /api/v1/user/usage and GET /api/v1/orgs/{id}/usage (CONTRACT §30): the owner's counted uses
// and quota refusals per UTC day (30, oldest first, empty ones at 0), its uses per month (12), and
// each of its keys per day, counted on two instances and summed exactly; the organization's for its
// owner and admins only (a member 403, anyone else 404, no bearer 401, a key 401).
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { buildAdminApp } from '../../src/admin/app.js';
import { utcDay } from '../../src/time.js';
import { docsExample } from '../helpers/docs.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import {
  ADMIN_KEY, bearer, closeSql, describeWithServices, makeUser, sql, startTwoGateways, testClock, testConfigFromYaml, type TestGateway, type TestUser,
} from '../helpers/gateway.js';
import { request } from '../helpers/http.js';
import { startSmtpCatcher, type SmtpCatcher } from '../helpers/smtp.js';
import { createOrg, verifiedUser } from './helpers.js';

const DAY_MS = 86_400_000;

interface Body { days: Array<{ date: string; uses: number; denied: number }>; months: Array<{ month: string; uses: number }>; keys: Array<{ id: number; name: string; days: unknown[] }> }

describeWithServices('usage of a user and of an organization (CONTRACT §30)', () => {
  let smtp: SmtpCatcher;
  let echo: EchoUpstream;
  let gws: [TestGateway, TestGateway];
  let admin: FastifyInstance;
  let adminUrl: string;
  const clock = testClock();

  beforeAll(async () => {
    [smtp, echo] = await Promise.all([startSmtpCatcher(), startEchoUpstream()]);
    const yaml = `${docsExample('organizations', 'organizations')}${docsExample('organizations', 'organizations-pooled')}`;
    const config = testConfigFromYaml(yaml, { SMTP_URL: smtp.url, APP_URL: echo.url });
    gws = await startTwoGateways({ ...config, errors: { ...config.errors, codes: true } }, { clock });
    admin = await buildAdminApp(gws[0].services);
    adminUrl = await admin.listen({ host: '127.0.0.1', port: 0 });
  });
  afterAll(async () => {
    await admin?.close();
    await Promise.all((gws ?? []).map((g) => g.close()));
    await Promise.all([smtp?.close(), echo?.close()]);
    await closeSql();
  });

  const flushed = () => Promise.all(gws.flatMap((g) => [g.services.denials.flush(), g.services.keyUsage.flush()]));
  const search = (i: number, headers: Record<string, string>) => gws[i % 2]!.get('/api/v1/search/x', { headers });
  /** What the day list shows: every day at 0 but the given ones. */
  const days = (now: Date, given: Record<string, { uses: number; denied: number }>) => Array.from({ length: 30 }, (_, i) => {
    const date = utcDay(new Date(now.getTime() - (29 - i) * DAY_MS));
    return { date, ...(given[date] ?? { uses: 0, denied: 0 }) };
  });
  /** The 12 months ending with now's, oldest first, every one at 0 but the given ones. */
  const months = (now: Date, given: Record<string, number>) => Array.from({ length: 12 }, (_, i) => {
    const d = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - 11 + i, 1));
    const month = d.toISOString().slice(0, 7);
    return { month, uses: given[month] ?? 0 };
  });

  it('a user\'s own counter: uses and refusals per day on two instances, yesterday\'s rolled up with its refusals, the month summed', async () => {
    const user = await makeUser(gws[0]); // free: 1 a day
    const now = clock();
    const yesterday = utcDay(new Date(now.getTime() - DAY_MS));
    clock.advance(-DAY_MS);
    try {
      const answers = [];
      for (let i = 0; i < 3; i++) answers.push((await search(i, bearer(user.access))).status);
      expect(answers).toEqual([200, 429, 429]);
    } finally {
      clock.advance(DAY_MS);
    }
    await flushed();
    const answers = [];
    for (let i = 0; i < 4; i++) answers.push((await search(i, bearer(user.access))).status);
    expect(answers).toEqual([200, 429, 429, 429]);
    await flushed();

    const res = await gws[1].get('/api/v1/user/usage', { headers: bearer(user.access) });
    expect(res.status, res.text).toBe(200);
    const today = utcDay(clock());
    const sameMonth = yesterday.slice(0, 7) === today.slice(0, 7);
    expect(res.json).toEqual({
      days: days(clock(), { [yesterday]: { uses: 1, denied: 2 }, [today]: { uses: 1, denied: 3 } }),
      months: months(clock(), sameMonth ? { [today.slice(0, 7)]: 2 } : { [yesterday.slice(0, 7)]: 1, [today.slice(0, 7)]: 1 }),
      keys: [],
    });
    // The finished day is the rollup's row, its refusals kept beside the uses the trigger wrote.
    expect(await sql("SELECT uses, denied FROM usage_days WHERE user_id = $1 AND day = $2", [user.id, yesterday])).toEqual([{ uses: 1, denied: 2 }]);
  });

  /** An organization on `team` (10 a day, pooled) with its owner, an admin, a member, and an organization key. */
  async function team(): Promise<{ id: number; owner: TestUser; admin: TestUser; member: TestUser; key: { id: number; key: string } }> {
    const owner = await verifiedUser(gws[0], smtp);
    const id = await createOrg(gws[0], owner, 'Usage team');
    const [a, m] = [await makeUser(gws[0]), await makeUser(gws[0])];
    await sql('INSERT INTO memberships (org_id, user_id, role) VALUES ($1, $2, \'admin\'), ($1, $3, \'member\')', [id, a.id, m.id]);
    const set = await request(adminUrl, 'PUT', `/admin/v1/orgs/${id}/plan`, { headers: bearer(ADMIN_KEY), json: { plan: 'team' } });
    expect(set.status, set.text).toBe(200);
    const key = await gws[0].post(`/api/v1/orgs/${id}/api-keys`, { name: 'ci' }, { headers: bearer(owner.access) });
    expect(key.status, key.text).toBe(201);
    return { id, owner, admin: a, member: m, key: key.json as { id: number; key: string } };
  }

  it('an organization\'s pool: its owner and admins read it, members and strangers are refused', async () => {
    const org = await team();
    const acting = (u: TestUser) => ({ ...bearer(u.access), 'Gateway-Org': String(org.id) });
    // 8 by the members on two instances, then 5 with the key: 10 served from the pool of 10, 3 refused (all three by the key).
    for (let i = 0; i < 8; i++) expect((await search(i, acting([org.owner, org.admin, org.member][i % 3]!))).status).toBe(200);
    const byKey = [];
    for (let i = 0; i < 5; i++) byKey.push((await search(i, { 'x-api-key': org.key.key })).status);
    expect(byKey).toEqual([200, 200, 429, 429, 429]);
    await flushed();

    const today = utcDay(clock());
    const expected = {
      days: days(clock(), { [today]: { uses: 10, denied: 3 } }),
      months: months(clock(), { [today.slice(0, 7)]: 10 }),
      keys: [{ id: org.key.id, name: 'ci', days: days(clock(), {}).map(({ date }) => ({ date, requests: date === today ? 5 : 0, denied: date === today ? 3 : 0 })) }],
    };
    for (const [i, who] of [org.owner, org.admin].entries()) {
      const res = await gws[i]!.get(`/api/v1/orgs/${org.id}/usage`, { headers: bearer(who.access) });
      expect(res.status, res.text).toBe(200);
      expect(res.json).toEqual(expected);
    }
    // The members' own counters counted nothing of it.
    expect(((await gws[0].get('/api/v1/user/usage', { headers: bearer(org.member.access) })).json as Body).days.at(-1)).toEqual({ date: today, uses: 0, denied: 0 });

    const asked = (headers: Record<string, string>, id = org.id) => gws[1].get(`/api/v1/orgs/${id}/usage`, { headers });
    const member = await asked(bearer(org.member.access));
    expect([member.status, member.text]).toEqual([403, '{"error":"Rôle insuffisant","code":"role_insufficient","required_roles":["owner","admin"],"current_role":"member"}']);
    const stranger = await makeUser(gws[0]);
    const notMine = await asked(bearer(stranger.access));
    expect([notMine.status, notMine.text]).toEqual([404, '{"error":"Organisation introuvable","code":"org_not_found"}']);
    // Another organization's owner asking for this one's: as a stranger.
    const other = await team();
    expect((await asked(bearer(other.owner.access))).text).toBe(notMine.text);
    expect((await asked({})).status).toBe(401);
    const byOrgKey = await asked({ 'x-api-key': org.key.key });
    expect([byOrgKey.status, JSON.parse(byOrgKey.text).code]).toEqual([401, 'api_key_not_accepted']);
    expect((await gws[0].get('/api/v1/user/usage', {})).status).toBe(401);
  });
});

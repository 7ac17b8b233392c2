// A personal key endpoint never reaches an organization's key (CONTRACT §33, issue 68): an
// organization key's row names its creator (user_id), so every query of /api/v1/user/api-keys
// and of the operators' per-user view must also say org_id IS NULL. Every such endpoint (list,
// usage, roll, revoke, the admin API's GET /v1/users/{id}/api-keys) is asked about an
// organization key by its creator, while a member and after leaving, and answers as for a key
// that is none: 404 `Clé API introuvable`; the key itself is left as it was.
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { buildAdminApp } from '../../src/admin/app.js';
import { ADMIN_KEY, bearer, closeSql, describeWithServices, makeUser, sql, startTestGateway, type TestGateway, type TestUser } from '../helpers/gateway.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import { startSmtpCatcher, type SmtpCatcher } from '../helpers/smtp.js';
import { actingConfig, createOrg, verifiedUser } from './helpers.js';

const KEYS = '/api/v1/user/api-keys';
const NOT_FOUND = { status: 404, json: { error: 'Clé API introuvable', code: 'api_key_not_found' } };

describeWithServices('personal key endpoints and organization keys (CONTRACT §33)', () => {
  let smtp: SmtpCatcher;
  let echo: EchoUpstream;
  let gw: TestGateway;
  let admin: FastifyInstance;
  let owner: TestUser;
  let leaver: TestUser;
  let keeper: TestUser;
  let orgId: number;

  const as = (user: TestUser) => ({ headers: bearer(user.access) });
  const orgKey = async (by: TestUser) => {
    const res = await gw.post(`/api/v1/orgs/${orgId}/api-keys`, { name: 'ci' }, as(by));
    expect(res.status, res.text).toBe(201);
    return res.json as { id: number; key: string };
  };
  const keyRow = async (id: number) => (await sql<{ revoked: number; rolled_at: Date | null }>('SELECT revoked, rolled_at FROM api_tokens WHERE id = $1', [id]))[0];
  const adminKeys = async (user: TestUser) => {
    const res = await admin.inject({ method: 'GET', url: `/admin/v1/users/${user.id}/api-keys`, headers: { authorization: `Bearer ${ADMIN_KEY}` } });
    expect(res.statusCode, res.body).toBe(200);
    return (res.json() as { api_keys: { id: number }[] }).api_keys.map((k) => k.id);
  };
  /** Every personal-key endpoint, by `user`, about key `id`. */
  const personalAnswers = async (user: TestUser, id: number) => ({
    usage: await gw.get(`${KEYS}/${id}/usage`, as(user)),
    roll: await gw.post(`${KEYS}/${id}/roll`, {}, as(user)),
    revoke: await gw.request('DELETE', `${KEYS}/${id}`, as(user)),
  });

  beforeAll(async () => {
    [smtp, echo] = await Promise.all([startSmtpCatcher(), startEchoUpstream()]);
    gw = await startTestGateway(actingConfig(smtp, echo.url));
    admin = await buildAdminApp(gw.services);
    owner = await verifiedUser(gw, smtp);
    leaver = await makeUser(gw);
    keeper = await makeUser(gw, { plan: 'pro' });
    orgId = await createOrg(gw, owner);
    await sql("UPDATE organizations SET plan = 'pro' WHERE id = $1", [orgId]);
    await sql("INSERT INTO memberships (org_id, user_id, role) VALUES ($1, $2, 'admin'), ($1, $3, 'admin')", [orgId, leaver.id, keeper.id]);
  });
  afterAll(async () => {
    await admin?.close();
    await gw?.close();
    await Promise.all([smtp?.close(), echo?.close()]);
    await closeSql();
  });

  it('its creator, still a member, gets 404 Clé API introuvable from usage, roll and revoke, and the key is left active', async () => {
    const key = await orgKey(owner);
    // It was used: usage of it exists to leak.
    await sql('INSERT INTO api_key_usage (key_id, day, requests, denied) VALUES ($1, CURRENT_DATE, 5, 1)', [key.id]);
    const answers = await personalAnswers(owner, key.id);
    expect(answers.usage).toMatchObject(NOT_FOUND);
    expect(answers.roll).toMatchObject(NOT_FOUND);
    expect(answers.revoke).toMatchObject(NOT_FOUND);
    expect(await keyRow(key.id)).toEqual({ revoked: 0, rolled_at: null });
    expect((await gw.get(KEYS, as(owner))).json.api_keys).toEqual([]);
    // Reached where it belongs, by role.
    expect((await gw.get(`/api/v1/orgs/${orgId}/api-keys`, as(owner))).json.api_keys.map((k: { id: number }) => k.id)).toContain(key.id);
  });

  it('after its creator left the organization, the same: 404 on every personal-key endpoint', async () => {
    const key = await orgKey(leaver);
    await sql('INSERT INTO api_key_usage (key_id, day, requests, denied) VALUES ($1, CURRENT_DATE, 3, 0)', [key.id]);
    expect((await gw.request('DELETE', `/api/v1/orgs/${orgId}/members/${leaver.id}`, as(leaver))).status).toBe(200);
    const answers = await personalAnswers(leaver, key.id);
    expect(answers.usage).toMatchObject(NOT_FOUND);
    expect(answers.roll).toMatchObject(NOT_FOUND);
    expect(answers.revoke).toMatchObject(NOT_FOUND);
    expect((await gw.get(KEYS, as(leaver))).json.api_keys).toEqual([]);
  });

  it('the operators\' view of a user\'s keys lists the personal ones only', async () => {
    // A pro user holds personal keys as well (apiKeys.plans).
    const personal = await gw.post(KEYS, { name: 'mine' }, as(keeper));
    expect(personal.status, personal.text).toBe(201);
    const key = await orgKey(keeper);
    const listed = await adminKeys(keeper);
    expect(listed).toContain(personal.json.id);
    expect(listed).not.toContain(key.id);
    // A personal key's usage still answers (the 404 above is about whose key, not every key).
    expect((await gw.get(`${KEYS}/${personal.json.id as number}/usage`, as(keeper))).status).toBe(200);
    expect((await gw.get(KEYS, as(keeper))).json.api_keys.map((k: { id: number }) => k.id)).toEqual([personal.json.id]);
  });
});

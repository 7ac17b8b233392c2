// CONTRACT §24's admin API for operators, answer by answer (src/admin/operatorRoutes.ts): an
// operator created with its enrolment link (none without an address to build it from), refused for
// a bad role, a bad or taken email; a role changed, an operator removed and its factors reset, each
// with its audit row and log line, and 404 for an id that is not one; an operator's own tokens,
// revoked once and never another's. Minting is from a console session: operatorsSignIn.test.ts.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { mintOperatorToken } from '../../src/admin/operatorTokens.js';
import type { OperatorRole } from '../../src/storage/operators/operators.js';
import {
  ADMIN_KEY, bearer, describeWithServices, loggedLines, marker, testConfig, type TestGateway, type ThrowawayDatabase,
} from '../helpers/gateway.js';
import { request } from '../helpers/http.js';
import { adminOnOwnDatabase, type AdminOnOwnDatabase } from '../helpers/adminApi.js';
import { operatorWithToken } from '../helpers/operators.js';

const NOT_FOUND = { error: 'Ressource introuvable' };

describeWithServices('admin API: the operators\' routes', () => {
  let setup: AdminOnOwnDatabase;
  let db: ThrowawayDatabase;
  let gw: TestGateway;
  let url: string;
  const as = (token: string, method: string, path: string, json?: unknown) => request(url, method, path, { headers: bearer(token), ...(json === undefined ? {} : { json }) });
  const key = (method: string, path: string, json?: unknown) => as(ADMIN_KEY, method, path, json);

  const withToken = (role: OperatorRole) => operatorWithToken(gw.services.db, role);

  const audited = async (type: string, operatorId: number) => (await db.sql<{ actor: string; data: Record<string, unknown> }>(
    "SELECT actor, data FROM audit_events WHERE type = $1 AND (data->>'operator_id')::int = $2 ORDER BY id", [type, operatorId]));

  beforeAll(async () => {
    setup = await adminOnOwnDatabase(({ storage }) => testConfig({ storage }));
    ({ db, gw, url } = setup);
  });
  afterAll(() => setup?.close());

  it('creates an operator (201) with its one-time enrolment link, the email as typed made canonical; audited and logged', async () => {
    const local = `New-Op-${marker()}`;
    const made = await key('POST', '/admin/v1/operators', { email: `  ${local}@Example.TEST `, role: 'support' });
    const email = `${local.toLowerCase()}@example.test`;
    expect([made.status, made.json]).toEqual([201, {
      id: expect.any(Number), email, role: 'support', enrolled: false, mfa: false, created_at: expect.any(String),
      enrolment_url: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+\/console\/operator\.html#/),
    }]);
    const id = made.json.id as number;
    expect(await audited('operator.created', id)).toEqual([{ actor: 'admin', data: { operator_id: id, email, role: 'support' } }]);
    expect(loggedLines(gw, 'admin: operator changed').at(-1)).toMatchObject({ operatorId: id, type: 'operator.created' });
    const again = await key('POST', '/admin/v1/operators', { email, role: 'viewer' });
    expect([again.status, again.json]).toEqual([409, { error: 'Email déjà enregistré' }]);
  });

  it('refuses a role that is none (400) before an email that is none (400 Email invalide)', async () => {
    for (const role of [undefined, 'root', 1]) {
      const res = await key('POST', '/admin/v1/operators', { email: 'fine@example.test', role });
      expect([res.status, res.json]).toEqual([400, { error: 'Requête invalide' }]);
    }
    for (const email of [undefined, '', 'not-an-email', 42]) {
      const res = await key('POST', '/admin/v1/operators', { email, role: 'viewer' });
      expect([String(email), res.status, res.json]).toEqual([String(email), 400, { error: 'Email invalide' }]);
    }
    expect(await db.sql("SELECT 1 FROM operators WHERE email = 'fine@example.test'")).toEqual([]);
  });

  it('changes a role (200, audited); an id that is none is 404 for every route that takes one', async () => {
    const op = await withToken('viewer');
    const changed = await key('PUT', `/admin/v1/operators/${op.id}/role`, { role: 'admin' });
    expect([changed.status, changed.json]).toEqual([200, { id: op.id, email: op.email, role: 'admin', enrolled: false, mfa: false, created_at: expect.any(String) }]);
    expect(await audited('operator.role_changed', op.id)).toEqual([{ actor: 'admin', data: { operator_id: op.id, email: op.email, role: 'admin' } }]);
    for (const [method, path, json] of [
      ['PUT', '/admin/v1/operators/abc/role', { role: 'viewer' }], ['PUT', '/admin/v1/operators/999999999/role', { role: 'viewer' }],
      ['DELETE', '/admin/v1/operators/abc', undefined], ['DELETE', '/admin/v1/operators/abc/mfa', undefined], ['DELETE', '/admin/v1/operators/999999999/mfa', undefined],
    ] as const) {
      const res = await key(method, path, json);
      expect([path, res.status, res.json]).toEqual([path, 404, NOT_FOUND]);
    }
  });

  it('removes an operator (200, audited, logged): its token stops at once', async () => {
    const op = await withToken('support');
    expect((await as(op.token, 'GET', '/admin/v1/operator')).status).toBe(200);
    const removed = await key('DELETE', `/admin/v1/operators/${op.id}`);
    expect([removed.status, removed.json]).toEqual([200, expect.objectContaining({ id: op.id, email: op.email, role: 'support' })]);
    expect(await audited('operator.removed', op.id)).toEqual([{ actor: 'admin', data: { operator_id: op.id, email: op.email, role: 'support' } }]);
    expect(loggedLines(gw, 'admin: operator changed').at(-1)).toMatchObject({ operatorId: op.id, type: 'operator.removed' });
    expect((await as(op.token, 'GET', '/admin/v1/operator')).status).toBe(401);
  });

  it('the shared key resets an operator\'s factors: 200 with a new enrolment link, audited', async () => {
    const op = await withToken('viewer');
    await db.sql("INSERT INTO operator_totp (operator_id, secret_encrypted, confirmed_at) VALUES ($1, 'x', now())", [op.id]);
    const reset = await key('DELETE', `/admin/v1/operators/${op.id}/mfa`);
    expect([reset.status, reset.json]).toEqual([200, expect.objectContaining({ id: op.id, mfa: false, enrolment_url: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+\/console\//) })]);
    expect(await audited('operator.mfa_reset', op.id)).toHaveLength(1);
    expect(await db.sql('SELECT 1 FROM operator_totp WHERE operator_id = $1', [op.id])).toEqual([]);
  });

  it('revokes an operator\'s own token once, audited; another\'s, an id that is none, or the shared key\'s ask are 404', async () => {
    const op = await withToken('viewer');
    const other = await withToken('viewer');
    for (const path of [`/admin/v1/operator/tokens/${other.tokenId}`, '/admin/v1/operator/tokens/abc']) {
      const res = await as(op.token, 'DELETE', path);
      expect([path, res.status, res.json]).toEqual([path, 404, NOT_FOUND]);
    }
    expect((await as(other.token, 'GET', '/admin/v1/operator')).status).toBe(200);
    expect((await key('DELETE', `/admin/v1/operator/tokens/${op.tokenId}`)).json).toEqual(NOT_FOUND);
    expect((await key('POST', '/admin/v1/operator/tokens', { name: 'x' })).json).toEqual(NOT_FOUND);
    const spare = await mintOperatorToken(gw.services.db, op.id, 'spare', 90, new Date());
    expect((await as(op.token, 'DELETE', `/admin/v1/operator/tokens/${spare.id}`)).json).toEqual({ id: spare.id, revoked: true });
    expect((await as(op.token, 'DELETE', `/admin/v1/operator/tokens/${spare.id}`)).json).toEqual(NOT_FOUND);
    const events = await db.sql<{ actor: string; actor_id: number; data: Record<string, unknown> }>(
      "SELECT actor, actor_id, data FROM audit_events WHERE type = 'operator.token_revoked' AND actor_id = $1", [op.id]);
    expect(events).toEqual([{ actor: 'operator', actor_id: op.id, data: { token_id: spare.id, operator_email: op.email } }]);
  });
});

describeWithServices('admin API: an operator made where the console has no one address', () => {
  it('answers enrolment_url null (admin.host 0.0.0.0 and no admin.publicUrl): the CLI prints the link instead', async () => {
    const own = await adminOnOwnDatabase(({ storage }) => testConfig({ storage, admin: { host: '0.0.0.0', apiKey: ADMIN_KEY } }));
    try {
      const made = await request(own.url, 'POST', '/admin/v1/operators', { headers: bearer(ADMIN_KEY), json: { email: `op-${marker()}@example.test`, role: 'viewer' } });
      expect([made.status, made.json.enrolment_url]).toEqual([201, null]);
    } finally {
      await own.close();
    }
  });
});

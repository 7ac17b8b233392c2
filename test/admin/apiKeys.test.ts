// Operators and API keys (CONTRACT §21): the admin API lists a user's keys with their names,
// scopes and expiry, revokes one by id or the live ones among leaked raw keys, and `gateway keys
// revoke` does it from the command line as docs/api-keys.md shows; every instance refuses a
// revoked key within a second, and each revocation is an audit event.
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { buildAdminApp } from '../../src/admin/app.js';
import { CLI, ensureBuilt } from '../helpers/cli.js';
import { docsBlock } from '../helpers/docs.js';
import {
  ADMIN_KEY, bearer, closeSql, describeWithServices, eventually, makeUser, startTwoGateways, testConfig, throwawayDatabase, TEST_JWT_SECRET, type TestGateway, type ThrowawayDatabase,
} from '../helpers/gateway.js';

const KEYS = '/api/v1/user/api-keys';
const ME = '/api/v1/user/me';

describeWithServices('API keys for operators (CONTRACT §21)', () => {
  let db: ThrowawayDatabase;
  let a: TestGateway;
  let b: TestGateway;
  let admin: FastifyInstance;
  const call = (method: 'GET' | 'DELETE' | 'POST', url: string, payload?: unknown) =>
    admin.inject({ method, url, headers: { authorization: `Bearer ${ADMIN_KEY}` }, ...(payload === undefined ? {} : { payload: payload as object }) });

  beforeAll(async () => {
    ensureBuilt();
    db = await throwawayDatabase({ migrated: true });
    [a, b] = await startTwoGateways(testConfig({ storage: db.storage }));
    admin = await buildAdminApp(a.services);
    // The docs' user is 42 and its key 7.
    await db.sql("SELECT setval('users_id_seq', 41)");
    await db.sql("SELECT setval(pg_get_serial_sequence('api_tokens', 'id'), 6)");
  });
  afterAll(async () => {
    await admin?.close();
    await a?.close();
    await b?.close();
    await db?.drop();
    await closeSql();
  });

  const refusedEverywhere = (key: string) => eventually(async () => {
    const answers = await Promise.all([a, b].map((gw) => gw.get(ME, { headers: { 'x-api-key': key } })));
    return answers.every((r) => r.status === 401);
  }, 1000);

  it('revokes one key by id from the command line, as docs/api-keys.md shows', async () => {
    const user = await makeUser(a, { plan: 'pro' });
    expect(user.id).toBe(42);
    const created = (await a.post(KEYS, { name: 'deploys' }, { headers: bearer(user.access) })).json;
    expect(created.id).toBe(7);
    const cwd = mkdtempSync(path.join(tmpdir(), 'gw-keys-revoke-'));
    try {
      mkdirSync(path.join(cwd, 'node_modules/.bin'), { recursive: true });
      symlinkSync(CLI, path.join(cwd, 'node_modules/.bin/gateway'));
      writeFileSync(path.join(cwd, 'gateway.yaml'), `storage: { postgres: "${db.url}" }\nauth: { jwt: { secret: "${TEST_JWT_SECRET}" } }\n`);
      const env = { PATH: [path.dirname(process.execPath), process.env.PATH ?? ''].join(path.delimiter), HOME: process.env.HOME ?? cwd };
      const block = docsBlock('api-keys', 'keys-revoke');
      const out = await new Promise<string>((resolve, reject) => {
        execFile('bash', ['-e', '-c', block], { cwd, env, timeout: 60_000 }, (err, stdout, stderr) => (err ? reject(new Error(stderr)) : resolve(stdout)));
      });
      expect(out).toBe('API key 7 of user 42: revoked\n');
      await refusedEverywhere(created.key);
      const [event] = await db.sql<{ actor: string; data: { id: number } }>("SELECT actor, data FROM audit_events WHERE type = 'api_key.revoked' AND user_id = 42");
      expect(event).toEqual({ actor: 'cli', data: { id: 7 } });
    } finally {
      rmSync(cwd, { recursive: true, force: true });
    }
  });

  it('lists a user\'s keys with names, scopes and expiry, and revokes one by id on every instance', async () => {
    const user = await makeUser(a, { plan: 'pro' });
    const expires = new Date(Date.now() + 86_400_000).toISOString();
    const kept = (await a.post(KEYS, { name: 'kept', scopes: ['*'], expires_at: expires }, { headers: bearer(user.access) })).json;
    const dropped = (await a.post(KEYS, { name: 'dropped' }, { headers: bearer(user.access) })).json;
    const list = await call('GET', `/admin/v1/users/${user.id}/api-keys`);
    expect(list.json().api_keys.map((k: Record<string, unknown>) => [k.name, k.start, k.scopes, k.expires_at, k.active])).toEqual([
      ['dropped', dropped.start, null, null, true], ['kept', kept.start, ['*'], expires, true],
    ]);
    expect(list.body).not.toContain(kept.key);
    const res = await call('DELETE', `/admin/v1/api-keys/${dropped.id}`);
    expect([res.statusCode, res.json()]).toEqual([200, { message: 'Clé API révoquée', id: dropped.id, user_id: user.id }]);
    await refusedEverywhere(dropped.key);
    expect((await b.get(ME, { headers: { 'x-api-key': kept.key } })).status).toBe(200);
    expect((await call('DELETE', `/admin/v1/api-keys/${dropped.id}`)).statusCode).toBe(404);
    expect((await call('DELETE', '/admin/v1/api-keys/abc')).statusCode).toBe(404);
  });

  it('revokes the live keys among leaked ones, names only those, and ignores the rest', async () => {
    const user = await makeUser(a, { plan: 'pro' });
    const leaked = (await a.post(KEYS, { name: 'leaked' }, { headers: bearer(user.access) })).json;
    const safe = (await a.post(KEYS, { name: 'safe' }, { headers: bearer(user.access) })).json;
    const res = await call('POST', '/admin/v1/api-keys/leaked', { keys: [leaked.key, `${leaked.key.slice(0, -1)}x`, 'gw_not-a-key', leaked.key] });
    expect([res.statusCode, res.json()]).toEqual([200, { revoked: [leaked.id] }]);
    await refusedEverywhere(leaked.key);
    expect((await b.get(ME, { headers: { 'x-api-key': safe.key } })).status).toBe(200);
    const again = await call('POST', '/admin/v1/api-keys/leaked', { keys: [leaked.key] });
    expect(again.json()).toEqual({ revoked: [] });
    const events = await db.sql<{ actor: string; data: Record<string, unknown> }>("SELECT actor, data FROM audit_events WHERE type = 'api_key.revoked' AND user_id = $1", [user.id]);
    expect(events).toEqual([{ actor: 'admin', data: { id: leaked.id, reason: 'leaked' } }]);
    for (const body of [{}, { keys: 'gw_x' }, { keys: [1] }, { keys: Array(1001).fill('k') }]) {
      expect((await call('POST', '/admin/v1/api-keys/leaked', body)).statusCode, JSON.stringify(body).slice(0, 40)).toBe(400);
    }
  });
});

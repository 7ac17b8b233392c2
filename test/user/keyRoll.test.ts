// Rolling an API key (issue 51, CONTRACT §21, docs/api-keys.md "Rolling a key"): a new key of the
// same name, scopes and expiry; the old one works through its grace and then stops on every
// instance; a roll is atomic across two instances; a rolled key does not count toward
// maxPerOwner; a bearer sign-in only. The page's command is run as written.
import { execFile } from 'node:child_process';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { docsBlock, expectShown, shownOutput } from '../helpers/docs.js';
import {
  bearer, closeSql, describeWithServices, eventually, makeUser, startTwoGateways, testClock, testConfig, throwawayDatabase,
  type TestGateway, type ThrowawayDatabase,
} from '../helpers/gateway.js';

const KEYS = '/api/v1/user/api-keys';
const ME = '/api/v1/user/me';
const INVALID = { error: 'Token invalide ou expiré' };
const NOT_FOUND = { error: 'Clé API introuvable' };

describeWithServices('rolling an API key (CONTRACT §21)', () => {
  let db: ThrowawayDatabase;
  let a: TestGateway;
  let b: TestGateway;
  const clock = testClock();

  beforeAll(async () => {
    db = await throwawayDatabase({ migrated: true });
    [a, b] = await startTwoGateways(testConfig({ storage: db.storage, apiKeys: { plans: ['pro'], maxPerOwner: 5 } }), { clock });
    // The docs' user is 42 and its key 7.
    await db.sql("SELECT setval('users_id_seq', 41)");
    await db.sql("SELECT setval(pg_get_serial_sequence('api_tokens', 'id'), 6)");
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
    await db?.drop();
    await closeSql();
  });

  const create = (access: string, body: unknown) => a.post(KEYS, body, { headers: bearer(access) });
  const roll = (gw: TestGateway, access: string, id: number, body: unknown = {}) => gw.post(`${KEYS}/${id}/roll`, body, { headers: bearer(access) });
  const asKey = (gw: TestGateway, key: string) => gw.get(ME, { headers: { 'x-api-key': key } });
  const statusesWith = async (key: string) => Promise.all([a, b].map(async (gw) => (await asKey(gw, key)).status));

  it('rolls as docs/api-keys.md shows: the same name, scopes and expiry, a new id and key', async () => {
    const user = await makeUser(a, { plan: 'pro' });
    expect(user.id).toBe(42);
    const old = (await create(user.access, { name: 'deploys' })).json;
    expect(old.id).toBe(7);
    const block = docsBlock('api-keys', 'key-roll').replaceAll('localhost:8080', new URL(a.url).host);
    const stdout = await new Promise<string>((resolve, reject) => {
      execFile('bash', ['-e', '-o', 'pipefail', '-c', block], { env: { PATH: process.env.PATH ?? '', ACCESS_TOKEN: user.access }, timeout: 30_000 },
        (err, out, stderr) => (err ? reject(new Error(stderr)) : resolve(out)));
    });
    expectShown(stdout, shownOutput(block));
    const rolled = JSON.parse(stdout) as Record<string, unknown>;
    expect(Object.keys(rolled).sort()).toEqual(['created_at', 'expires_at', 'id', 'key', 'name', 'scopes', 'start']);
    expect(rolled).toMatchObject({ id: 8, name: 'deploys', scopes: null, expires_at: null });
    expect(rolled.key).not.toBe(old.key);
    expect(rolled.start).toBe((rolled.key as string).slice(0, 8));
    // A grace of 24h: both keys work on both instances.
    expect([...await statusesWith(old.key), ...await statusesWith(rolled.key as string)]).toEqual([200, 200, 200, 200]);
  });

  it('keeps the old key working through the grace, then refuses it on every instance; the new one works on', async () => {
    const user = await makeUser(a, { plan: 'pro' });
    const expires = new Date(clock().getTime() + 86_400_000).toISOString();
    const old = (await create(user.access, { name: 'reports', scopes: ['*'], expires_at: expires })).json;
    expect(await statusesWith(old.key)).toEqual([200, 200]);
    const res = await roll(b, user.access, old.id, { grace: '10m' });
    expect(res.status, res.text).toBe(201);
    expect(res.json).toMatchObject({ name: 'reports', scopes: ['*'], expires_at: expires });
    const fresh = res.json as { id: number; key: string };
    expect(fresh.id).toBeGreaterThan(old.id);
    const listed = (await a.get(KEYS, { headers: bearer(user.access) })).json.api_keys as Array<{ id: number; expires_at: string }>;
    const graceEnds = new Date(listed.find((k) => k.id === old.id)!.expires_at).getTime();
    expect(graceEnds - clock().getTime()).toBeGreaterThan(9 * 60_000);
    expect(graceEnds - clock().getTime()).toBeLessThanOrEqual(10 * 60_000);
    expect(listed.find((k) => k.id === fresh.id)!.expires_at).toBe(expires);
    // The operator's log says who rolled which key into which, and the grace; never a key.
    const logged = b.logs.map((line) => JSON.parse(line) as Record<string, unknown>).filter((line) => line.msg === 'API key rolled' && line.keyId === old.id);
    expect(logged).toEqual([expect.objectContaining({ level: 30, userId: user.id, keyId: old.id, newKeyId: fresh.id, graceMs: 600_000 })]);
    expect(b.logs.join('')).not.toContain(fresh.key);
    expect([...await statusesWith(old.key), ...await statusesWith(fresh.key)]).toEqual([200, 200, 200, 200]);
    clock.advance(10 * 60_000 + 1000);
    try {
      for (const gw of [a, b]) expect([(await asKey(gw, old.key)).status, (await asKey(gw, old.key)).json]).toEqual([401, INVALID]);
      expect(await statusesWith(fresh.key)).toEqual([200, 200]);
    } finally {
      clock.advance(-(10 * 60_000 + 1000));
    }
    const events = await db.sql<{ type: string; data: Record<string, unknown> }>(
      "SELECT type, data FROM audit_events WHERE user_id = $1 AND (data ? 'rolled_from' OR data->>'reason' = 'rolled') ORDER BY id", [user.id]);
    expect(events).toEqual([
      { type: 'api_key.created', data: { id: fresh.id, name: 'reports', scopes: ['*'], rolled_from: old.id } },
      { type: 'api_key.revoked', data: { id: old.id, reason: 'rolled', replaced_by: fresh.id, expires_at: new Date(graceEnds).toISOString() } },
    ]);
  });

  it('with no grace (the default), stops the old key at once here and within a second on the other instance', async () => {
    const user = await makeUser(a, { plan: 'pro' });
    const old = (await create(user.access, { name: 'ci' })).json;
    // Both instances hold the key in their cache.
    expect(await statusesWith(old.key)).toEqual([200, 200]);
    const res = await a.request('POST', `${KEYS}/${old.id}/roll`, { headers: bearer(user.access) });
    expect(res.status, res.text).toBe(201);
    expect((await asKey(a, old.key)).json).toEqual(INVALID);
    await eventually(async () => (await asKey(b, old.key)).status === 401, 1000);
    expect(await statusesWith(res.json.key)).toEqual([200, 200]);
  });

  it('takes a grace of 0s to 7d only', async () => {
    const user = await makeUser(a, { plan: 'pro' });
    for (const grace of ['8d', '7d1s', '604800001ms', '-1s', '1w', '10', '', ' ', 5, true, ['1h'], { h: 1 }]) {
      const key = (await create(user.access, { name: 'k' })).json;
      const res = await roll(a, user.access, key.id, { grace });
      expect([res.status, res.json], JSON.stringify(grace)).toEqual([400, { error: 'Requête invalide' }]);
      await a.request('DELETE', `${KEYS}/${key.id}`, { headers: bearer(user.access) });
    }
    for (const grace of ['0s', '0ms', '7d', '604800000ms', '168h', null]) {
      const key = (await create(user.access, { name: 'k' })).json;
      expect((await roll(a, user.access, key.id, { grace })).status, JSON.stringify(grace)).toBe(201);
      await db.sql('UPDATE api_tokens SET revoked = 1 WHERE user_id = $1', [user.id]);
    }
  });

  it('404s a key rolled already, revoked, expired, unknown or someone else\'s', async () => {
    const user = await makeUser(a, { plan: 'pro' });
    const other = await makeUser(a, { plan: 'pro' });
    const rolled = (await create(user.access, { name: 'rolled' })).json;
    expect((await roll(a, user.access, rolled.id, { grace: '1h' })).status).toBe(201);
    const revoked = (await create(user.access, { name: 'revoked' })).json;
    await a.request('DELETE', `${KEYS}/${revoked.id}`, { headers: bearer(user.access) });
    const expired = (await create(user.access, { name: 'expired', expires_at: new Date(clock().getTime() + 60_000).toISOString() })).json;
    const mine = (await create(user.access, { name: 'mine' })).json;
    clock.advance(61_000);
    try {
      for (const [what, id, access] of [['rolled', rolled.id, user.access], ['revoked', revoked.id, user.access], ['expired', expired.id, user.access],
        ['unknown', 99_999_999, user.access], ['another user\'s', mine.id, other.access]] as const) {
        const res = await roll(b, access, id);
        expect([res.status, res.json], what).toEqual([404, NOT_FOUND]);
      }
    } finally {
      clock.advance(-61_000);
    }
    expect((await a.post(`${KEYS}/abc/roll`, {}, { headers: bearer(user.access) })).json).toEqual(NOT_FOUND);
    expect(await statusesWith(mine.key)).toEqual([200, 200]);
  });

  it('rolls a key once when two instances are asked at the same moment', async () => {
    const user = await makeUser(a, { plan: 'pro' });
    for (let i = 0; i < 3; i++) {
      const key = (await create(user.access, { name: `race${i}` })).json;
      const answers = await Promise.all([roll(a, user.access, key.id), roll(b, user.access, key.id)]);
      expect(answers.map((r) => r.status).sort(), `race ${i}`).toEqual([201, 404]);
      expect(answers.find((r) => r.status === 404)!.json).toEqual(NOT_FOUND);
      const rows = await db.sql<{ n: number }>("SELECT count(*)::int AS n FROM api_tokens WHERE user_id = $1 AND name = $2", [user.id, `race${i}`]);
      expect(rows[0]!.n).toBe(2);
    }
  });

  it('does not count a rolled key toward maxPerOwner', async () => {
    const user = await makeUser(a, { plan: 'pro' });
    const keys = [];
    for (let i = 0; i < 5; i++) keys.push((await create(user.access, { name: `k${i}` })).json);
    expect((await create(user.access, { name: 'sixth' })).status).toBe(409);
    // At the limit, a roll still makes its key, and the rolled one (in its grace) stops counting.
    expect((await roll(a, user.access, keys[0].id, { grace: '1h' })).status).toBe(201);
    expect((await a.get(KEYS, { headers: bearer(user.access) })).json.api_keys).toHaveLength(6);
    expect((await create(user.access, { name: 'sixth' })).status).toBe(409);
    await a.request('DELETE', `${KEYS}/${keys[1].id}`, { headers: bearer(user.access) });
    expect((await create(user.access, { name: 'fifth again' })).status).toBe(201);
    expect(await statusesWith(keys[0].key)).toEqual([200, 200]);
  });

  it('takes a bearer sign-in only: an X-API-Key alone gets 401 api_key_not_accepted', async () => {
    const user = await makeUser(a, { plan: 'pro' });
    const key = (await create(user.access, { name: 'k' })).json;
    const res = await a.request('POST', `${KEYS}/${key.id}/roll`, { headers: { 'x-api-key': key.key, accept: 'application/problem+json' }, json: {} });
    expect([res.status, res.json.code, res.json.error]).toEqual([401, 'api_key_not_accepted', 'Token invalide ou expiré']);
    expect(await statusesWith(key.key)).toEqual([200, 200]);
  });
});

// Issue 51, first part (CONTRACT §21): several named keys per user, with expiry, a recognisable
// format whose checksum is refused before any lookup, maxPerOwner under parallel creation on two
// instances, a bearer sign-in only on /api/v1/user/api-keys, and the section 4 key beside them.
import { crc32 } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  bearer, closeSql, describeWithServices, eventually, makeUser, queriesDuring, startTwoGateways, testClock, testConfigFromYaml, type TestGateway,
} from '../helpers/gateway.js';
import { docsExample } from '../helpers/docs.js';

const KEYS = '/api/v1/user/api-keys';
const ME = '/api/v1/user/me';
const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** The checksum as a secret scanner computes it (docs/api-keys.md), written apart from the gateway's. */
function scannerChecksum(random: string): string {
  let n = crc32(Buffer.from(random, 'ascii'));
  let out = '';
  do {
    out = BASE62[n % 62] + out;
    n = Math.floor(n / 62);
  } while (n > 0);
  return out.padStart(6, '0');
}

describeWithServices('named API keys (CONTRACT §21)', () => {
  let a: TestGateway;
  let b: TestGateway;
  const clock = testClock();

  beforeAll(async () => {
    // docs/api-keys.md's example, as written.
    [a, b] = await startTwoGateways(testConfigFromYaml(docsExample('api-keys', 'api-keys')), { clock });
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
    await closeSql();
  });

  const create = (gw: TestGateway, access: string, body: unknown) => gw.post(KEYS, body, { headers: bearer(access) });

  it('creates keys in the documented format, each one working, listed without the key, the section 4 key beside them', async () => {
    const user = await makeUser(a, { plan: 'pro' });
    const legacy = (await a.post('/api/v1/user/api-token', {}, { headers: bearer(user.access) })).json.api_token as string;
    const res = await create(a, user.access, { name: 'CI deploys' });
    expect(res.status, res.text).toBe(201);
    expect(Object.keys(res.json).sort()).toEqual(['created_at', 'expires_at', 'id', 'key', 'name', 'scopes', 'start']);
    const { key, start } = res.json as { key: string; start: string };
    const [, random, checksum] = /^gw_([0-9A-Za-z]{32})([0-9A-Za-z]{6})$/.exec(key) ?? [];
    expect(checksum).toBe(scannerChecksum(random!));
    expect(start).toBe(key.slice(0, 8));
    expect(res.json).toMatchObject({ name: 'CI deploys', scopes: null, expires_at: null });
    for (const k of [legacy, key]) expect((await b.get(ME, { headers: { 'x-api-key': k } })).status).toBe(200);
    // A second section 4 key replaces the first default one only: the named key stays.
    await a.post('/api/v1/user/api-token', {}, { headers: bearer(user.access) });
    expect((await b.get(ME, { headers: { 'x-api-key': key } })).status).toBe(200);
    const list = await b.get(KEYS, { headers: bearer(user.access) });
    expect(list.status).toBe(200);
    expect(list.json.api_keys.map((k: { name: string }) => k.name)).toEqual(['default', 'CI deploys']);
    expect(list.text).not.toContain(key);
    const { last_used_at: lastUsed, ...listed } = list.json.api_keys[1];
    expect(listed).toEqual({ id: res.json.id, name: 'CI deploys', start, scopes: null, created_at: res.json.created_at, expires_at: null });
    expect(lastUsed === null || typeof lastUsed === 'string').toBe(true);
  });

  it('revokes one key on every instance within a second, and 404s another user\'s or an unknown one', async () => {
    const user = await makeUser(a, { plan: 'pro' });
    const other = await makeUser(a, { plan: 'pro' });
    const keep = (await create(a, user.access, { name: 'keep' })).json;
    const drop = (await create(a, user.access, { name: 'drop' })).json;
    expect((await b.get(ME, { headers: { 'x-api-key': drop.key } })).status).toBe(200);
    expect((await a.request('DELETE', `${KEYS}/${drop.id}`, { headers: bearer(other.access) })).status).toBe(404);
    const gone = await a.request('DELETE', `${KEYS}/${drop.id}`, { headers: bearer(user.access) });
    expect(gone.status).toBe(200);
    await eventually(async () => (await b.get(ME, { headers: { 'x-api-key': drop.key } })).status === 401, 1000);
    expect((await b.get(ME, { headers: { 'x-api-key': keep.key } })).status).toBe(200);
    const again = await a.request('DELETE', `${KEYS}/${drop.id}`, { headers: bearer(user.access) });
    expect([again.status, again.json]).toEqual([404, { error: 'Clé API introuvable' }]);
    expect((await a.request('DELETE', `${KEYS}/abc`, { headers: bearer(user.access) })).status).toBe(404);
  });

  it('never exceeds maxPerOwner, even with parallel creations on two instances', async () => {
    const user = await makeUser(a, { plan: 'pro' });
    const answers = await Promise.all(Array.from({ length: 12 }, (_, i) => create(i % 2 ? a : b, user.access, { name: `k${i}` })));
    expect(answers.filter((r) => r.status === 201)).toHaveLength(5);
    const refused = answers.filter((r) => r.status !== 201);
    expect(refused.map((r) => [r.status, r.json])).toEqual(Array(7).fill([409, { error: 'Nombre maximal de clés API atteint' }]));
    expect((await a.get(KEYS, { headers: bearer(user.access) })).json.api_keys).toHaveLength(5);
  });

  it('refuses a key past its expiry like a revoked one, and only accepts an expiry within a year', async () => {
    const user = await makeUser(a, { plan: 'pro' });
    const now = clock();
    const soon = new Date(now.getTime() + 60_000).toISOString();
    const res = await create(a, user.access, { name: 'short', expires_at: soon });
    expect(res.status, res.text).toBe(201);
    expect(res.json.expires_at).toBe(soon);
    expect((await a.get(ME, { headers: { 'x-api-key': res.json.key } })).status).toBe(200);
    clock.advance(61_000);
    try {
      for (const gw of [a, b]) expect((await gw.get(ME, { headers: { 'x-api-key': res.json.key } })).json).toEqual({ error: 'Token invalide ou expiré' });
    } finally {
      clock.advance(-61_000);
    }
    for (const expires_at of [new Date(now.getTime() - 1000).toISOString(), new Date(now.getTime() + 366 * 86_400_000).toISOString(), 'tomorrow', 42]) {
      expect((await create(a, user.access, { name: 'bad', expires_at })).json, String(expires_at)).toEqual({ error: 'Requête invalide' });
    }
  });

  it('refuses bad names and scopes: 400, and 400 Portée inconnue for a scope no route declares', async () => {
    const user = await makeUser(a, { plan: 'pro' });
    const bodies = [
      {}, { name: '' }, { name: 'x'.repeat(65) }, { name: 'a\nb' }, { name: 'a\u202eb' }, { name: 7 },
      { name: 'ok', scopes: [] }, { name: 'ok', scopes: 'x' }, { name: 'ok', scopes: [1] },
    ];
    for (const body of bodies) {
      const res = await create(a, user.access, body);
      expect([res.status, res.json], JSON.stringify(body)).toEqual([400, { error: 'Requête invalide' }]);
    }
    expect((await create(a, user.access, { name: 'ok', scopes: ['reports:read'] })).json).toEqual({ error: 'Portée inconnue' });
    const all = await create(a, user.access, { name: 'all', scopes: ['*'] });
    expect([all.status, all.json.scopes]).toEqual([201, ['*']]);
  });

  it('takes a bearer sign-in only: an API key alone gets 401 api_key_not_accepted; a free user the plan denial', async () => {
    const user = await makeUser(a, { plan: 'pro' });
    const key = (await create(a, user.access, { name: 'k' })).json.key as string;
    for (const [method, path] of [['POST', KEYS], ['GET', KEYS], ['DELETE', `${KEYS}/1`]] as const) {
      const headers = { 'x-api-key': key, accept: 'application/problem+json' };
      const res = await a.request(method, path, { headers, json: method === 'POST' ? { name: 'x' } : undefined });
      expect([res.status, res.json.code, res.json.error], `${method} ${path}`).toEqual([401, 'api_key_not_accepted', 'Token invalide ou expiré']);
    }
    const free = await makeUser(a);
    const res = await create(a, free.access, { name: 'k' });
    expect([res.status, res.json]).toEqual([403, { error: 'Plan insuffisant', required: ['pro'], current_plan: 'free', upgrade_url: '/api/v1/subscription/upgrade' }]);
  });

  describe('a key whose checksum is wrong', () => {
    it('is refused without a storage call', async () => {
      const user = await makeUser(a, { plan: 'pro' });
      const key = (await create(a, user.access, { name: 'k' })).json.key as string;
      const forged = key.slice(0, -1) + (key.endsWith('0') ? '1' : '0');
      let res;
      const queries = await queriesDuring(a, async () => { res = await a.get(ME, { headers: { 'x-api-key': forged } }); });
      expect(res!.status).toBe(401);
      expect(queries.filter((q) => /api_tokens/.test(q))).toEqual([]);
    });
  });
});

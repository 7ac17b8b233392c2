// apiKeys.prefix (CONTRACT §21, docs/api-keys.md "Secret scanning"): new keys start with the
// operator's prefix; the docs' scanner script, run as written, finds a real key and passes over a
// corrupted one; a forged checksum under the configured prefix or gw is refused before any lookup;
// keys made under an earlier prefix keep working, and never reach an upstream wherever a client
// puts them. Two instances on one database, one on the default prefix and one on `acme`, stand for
// a gateway before and after its operator set the prefix.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, beforeEach, expect, it } from 'vitest';
import {
  bearer, closeSql, describeWithServices, makeUser, marker, queriesDuring, startTestGateway, testConfigFromYaml, type TestGateway, type TestUser,
} from '../helpers/gateway.js';
import { docsBlock, docsExample } from '../helpers/docs.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';

const KEYS = '/api/v1/user/api-keys';
const ME = '/api/v1/user/me';
const ROUTES = 'upstreams:\n  app: { url: "${APP_URL}" }\n'
  + 'routes:\n  - { path: /api/v1/orders, upstream: app }\n  - { path: /public, upstream: app, auth: none }\n';

/** The key with its last checksum character changed: the same shape, a wrong checksum. */
const corrupted = (key: string) => key.slice(0, -1) + (key.endsWith('0') ? '1' : '0');

describeWithServices('apiKeys.prefix (CONTRACT §21)', () => {
  let echo: EchoUpstream;
  let before: TestGateway; // apiKeys.prefix left at gw
  let after: TestGateway; // the docs' example: acme
  let user: TestUser;
  let dir: string;
  const create = async (gw: TestGateway) => {
    const res = await gw.post(KEYS, { name: 'ci' }, { headers: bearer(user.access) });
    expect(res.status, res.text).toBe(201);
    return res.json as { id: number; key: string; start: string };
  };
  /** The docs' scanner, written to a file as the page shows it and run on `text`: the keys it reports. */
  const scan = (prefix: string, text: string) => new Promise<string[]>((resolve, reject) => {
    const script = path.join(dir, 'scan-keys.mjs');
    const child = execFile(process.execPath, [script, prefix], (error, stdout) => (error ? reject(error) : resolve(stdout.split('\n').filter(Boolean))));
    child.stdin!.end(text);
  });

  beforeAll(async () => {
    echo = await startEchoUpstream();
    const env = { APP_URL: echo.url };
    [before, after] = await Promise.all([
      startTestGateway(testConfigFromYaml(`${docsExample('api-keys', 'api-keys')}${ROUTES}`, env)),
      startTestGateway(testConfigFromYaml(`${docsExample('api-keys', 'api-key-prefix')}${ROUTES}`, env)),
    ]);
    dir = mkdtempSync(path.join(tmpdir(), 'gw-scan-'));
    writeFileSync(path.join(dir, 'scan-keys.mjs'), docsBlock('api-keys', 'scan-keys'));
  });
  // Each test its own user: the docs' api-keys example holds a user to 5 keys.
  beforeEach(async () => {
    user = await makeUser(after, { plan: 'pro' });
  });
  afterAll(async () => {
    await Promise.all([before?.close(), after?.close()]);
    await echo?.close();
    rmSync(dir, { recursive: true, force: true });
    await closeSql();
  });

  it('new keys start with the configured prefix, start is its first len(prefix) + 6 characters, and the docs\' scanner finds them', async () => {
    const { key, start } = await create(after);
    expect(key).toMatch(/^acme_[0-9A-Za-z]{38}$/);
    expect(start).toBe(key.slice(0, 'acme'.length + 6));
    const text = `deploy:\n  token: ${key}\n  old: ${corrupted(key)}\n  other: gw_${key.slice(5)}\n`;
    expect(await scan('acme', text)).toEqual([key]);
    expect((await create(before)).key).toMatch(/^gw_[0-9A-Za-z]{38}$/);
  });

  it('a rolled key takes the configured prefix too, whatever its predecessor had', async () => {
    const earlier = await create(before);
    const rolled = await after.post(`${KEYS}/${earlier.id}/roll`, {}, { headers: bearer(user.access) });
    expect(rolled.status, rolled.text).toBe(201);
    expect(rolled.json.key).toMatch(/^acme_[0-9A-Za-z]{38}$/);
    expect(rolled.json.start).toBe(String(rolled.json.key).slice(0, 'acme'.length + 6));
  });

  it('a key made under the earlier prefix keeps working after the change, and the other way round', async () => {
    const earlier = await create(before);
    const later = await create(after);
    for (const gw of [before, after]) {
      for (const { key } of [earlier, later]) expect((await gw.get(ME, { headers: { 'x-api-key': key } })).status).toBe(200);
    }
  });

  it('a forged checksum under the configured prefix or gw is refused before any lookup; under another prefix it is looked up', async () => {
    const { key } = await create(after);
    const random = key.slice('acme_'.length);
    const forged = { acme: corrupted(key), gw: corrupted(`gw_${random}`), other: corrupted(`zeta_${random}`) };
    const lookups: Record<string, string[]> = {};
    for (const [name, value] of Object.entries(forged)) {
      let status = 0;
      const queries = await queriesDuring(after, async () => { status = (await after.get(ME, { headers: { 'x-api-key': value } })).status; });
      expect(status, name).toBe(401);
      lookups[name] = queries.filter((q) => /api_tokens/.test(q));
    }
    expect(lookups.acme).toEqual([]);
    expect(lookups.gw).toEqual([]);
    expect(lookups.other!.length).toBeGreaterThan(0);
  });

  it('a key of any prefix never reaches an upstream: in a cookie, the query, or glued to a word in another header', async () => {
    const keys = [(await create(after)).key, (await create(before)).key];
    for (const key of keys) {
      const m = marker();
      const res = await after.get(`/public/${m}?q=1&token=${key}`, { headers: { cookie: `a=1; k=${key}`, 'x-access-token': `token${key}` } });
      expect(res.status).toBe(200);
      const hit = echo.last(m)!;
      expect(hit.url).toBe(`/public/${m}?q=1`);
      expect(hit.headers.cookie).toBe('a=1');
      expect(hit.headers['x-access-token']).toBeUndefined();
    }
  });
});

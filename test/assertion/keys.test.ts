// The assertion key's life: created once for all instances, rotated without losing a request,
// kept across restarts. Each test works on a database of its own, so a rotation here never
// changes the keys another test file relies on.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, expect, it } from 'vitest';
import { ensureAssertionKeys, rotateAssertionKeys } from '../../src/credentials/assertionKeys.js';
import { RETIRED_KEY_PUBLISHED_MS } from '../../src/credentials/assertionKeyring.js';
import { migrate } from '../../src/storage/database/migrations.js';
import { postgresDatabase, type Database } from '../../src/storage/database/db.js';
import { verifyGatewayAssertion } from '../../src/verify/index.js';
import { ensureBuilt, gateway } from '../helpers/cli.js';
import { startEchoUpstream } from '../helpers/echoUpstream.js';
import { bearer, closeSql, describeWithServices, eventually, makeUser, startTestGateway, testClock, testConfig, throwawayDatabase, type TestGateway } from '../helpers/gateway.js';
import { holdRows } from '../helpers/rowLock.js';
import { decodeAssertion, startFastifyUpstream } from '../helpers/verifyingUpstreams.js';

describeWithServices('assertion keys', () => {
  // Each test's gateways and databases go when it ends: held to the file's end, their pools added
  // up past Postgres's max_connections beside another file's (CI: "too many clients already").
  const cleanups: Array<() => Promise<unknown>> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
    cleanups.length = 0;
  });
  afterAll(() => closeSql());

  /** A new empty database, and a connection to it like the one `gateway keys rotate` opens. */
  async function freshDatabase(): Promise<{ url: string; db: Database }> {
    const tmp = await throwawayDatabase();
    const db = postgresDatabase(tmp.url);
    cleanups.push(() => tmp.drop(), () => db.close());
    return { url: tmp.url, db };
  }

  async function started(gateway: Promise<TestGateway>): Promise<TestGateway> {
    const gw = await gateway;
    cleanups.push(() => gw.close());
    return gw;
  }

  const kidsOf = async (gw: TestGateway): Promise<string[]> => (await gw.get('/.well-known/gateway-assertion-keys.json')).json.keys.map((k: { kid: string }) => k.kid);
  const keyStates = (db: Database) => db.query<{ kid: string; state: string; has_private: boolean }>(
    // By state first: keys made in one transaction can share a created_at.
    "SELECT kid, state, private_jwk IS NOT NULL AS has_private FROM assertion_keys ORDER BY CASE state WHEN 'retired' THEN 0 WHEN 'current' THEN 1 ELSE 2 END, created_at",
  );

  it('instances starting at once on an empty database end with one current and one next key', async () => {
    const { url, db } = await freshDatabase();
    const config = testConfig({ storage: { postgres: url } });
    const gateways = await Promise.all([1, 2, 3].map(() => started(startTestGateway(config))));
    const rows = await keyStates(db);
    expect(rows.map((r) => r.state).sort()).toEqual(['current', 'next']);
    const kidIn = (state: string) => rows.find((r) => r.state === state)!.kid;
    for (const gw of gateways) expect(await kidsOf(gw)).toEqual([kidIn('next'), kidIn('current')]);

    // The same race without the migration lock in front: eight creators at once on another empty database.
    const other = await freshDatabase();
    await migrate(other.db);
    await Promise.all(Array.from({ length: 8 }, () => ensureAssertionKeys(other.db)));
    expect((await keyStates(other.db)).map((r) => r.state).sort()).toEqual(['current', 'next']);
  });

  it('a rotation with requests in flight on two instances loses none', async () => {
    const { url, db } = await freshDatabase();
    const upstream = await startFastifyUpstream();
    cleanups.push(() => upstream.close());
    const config = testConfig({
      storage: { postgres: url },
      upstreams: { secure: { url: upstream.url, assertion: true } },
      routes: [{ path: '/secure', upstream: 'secure' }],
    });
    const clock = testClock();
    const a = await started(startTestGateway(config, { clock }));
    const b = await started(startTestGateway(config));
    await upstream.protect({ jwksUrl: `${a.url}/.well-known/gateway-assertion-keys.json`, audience: 'secure' });
    const user = await makeUser(a);
    const signedKid = async (gw: TestGateway) => {
      const res = await gw.get('/secure/kid', { headers: bearer(user.access) });
      return res.status === 200 ? decodeAssertion(res.json.assertion).header.kid : `status ${res.status}`;
    };
    const before = await a.get('/secure/before', { headers: bearer(user.access) });
    expect(before.status).toBe(200);
    const [old] = (await keyStates(db)).filter((r) => r.state === 'current');
    expect(decodeAssertion(before.json.assertion).header.kid).toBe(old!.kid);

    const statuses: number[] = [];
    let stop = false;
    const fire = async (gw: TestGateway) => {
      while (!stop) statuses.push((await gw.get('/secure/load', { headers: bearer(user.access) })).status);
    };
    const workers = [a, b, a, b].map(fire);
    try {
      await eventually(() => statuses.length >= 40, 10_000);
      const rotation = await rotateAssertionKeys(db); // what `gateway keys rotate` runs
      expect(rotation.previous).toBe(old!.kid);
      // Both instances hear of it (NOTIFY) and sign with the key that was published as next.
      await eventually(async () => (await signedKid(a)) === rotation.current && (await signedKid(b)) === rotation.current, 5000);
      const seen = statuses.length;
      await eventually(() => statuses.length >= seen + 40, 10_000);
      stop = true;
      await Promise.all(workers);

      expect(statuses.length).toBeGreaterThanOrEqual(80);
      expect(statuses.filter((s) => s !== 200)).toEqual([]);
      // Published: the new next, the new current, and the retired key (its private part erased).
      expect(await kidsOf(a)).toEqual([rotation.next, rotation.current, rotation.previous]);
      expect(await keyStates(db)).toEqual([
        { kid: rotation.previous, state: 'retired', has_private: false },
        { kid: rotation.current, state: 'current', has_private: true },
        { kid: rotation.next, state: 'next', has_private: true },
      ]);
      // An assertion the old key signed before the rotation still verifies for a verifier fetching the keys now.
      const oldHeaders = { 'x-gateway-assertion': before.json.assertion, 'x-user-id': String(user.id), 'x-user-plan': 'free' };
      expect(await verifyGatewayAssertion(oldHeaders, { jwksUrl: `${b.url}/.well-known/gateway-assertion-keys.json`, audience: 'secure', jwksCacheMaxAgeMs: 299_999 }))
        .toEqual({ userId: user.id, plan: 'free', email: user.email, authMethod: 'bearer' });

      // Once everything it signed has expired, the retired key is no longer published.
      clock.advance(RETIRED_KEY_PUBLISHED_MS + 1000);
      expect(await kidsOf(a)).toEqual([rotation.next, rotation.current]);
    } finally {
      stop = true;
      await Promise.all(workers);
    }
  });

  it('`gateway keys rotate` while the next key is deleted by hand: makes a next key again, promotes it and says so', { timeout: 120_000 }, async () => {
    ensureBuilt();
    const { url, db } = await freshDatabase();
    await migrate(db);
    await ensureAssertionKeys(db);
    const [old] = (await keyStates(db)).filter((r) => r.state === 'current');
    const dir = mkdtempSync(path.join(tmpdir(), 'gw-keys-rotate-'));
    cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
    writeFileSync(path.join(dir, 'gateway.yaml'), `storage:\n  postgres: ${JSON.stringify(url)}\n`);
    // Deleted, not yet committed: the rotation finds the next key present, then waits to promote that row.
    const deletion = await holdRows("DELETE FROM assertion_keys WHERE state = 'next'", [], url);
    try {
      const rotating = gateway(['keys', 'rotate', '--config', path.join(dir, 'gateway.yaml')], { cwd: dir });
      await deletion.waiters(1);
      await deletion.release();
      const run = await rotating;
      expect(run.stderr).toBe('');
      expect(run.code).toBe(0);
      const rows = await keyStates(db);
      const kidIn = (state: string) => rows.find((r) => r.state === state)!.kid;
      expect(rows.map((r) => [r.state, r.has_private])).toEqual([['retired', false], ['current', true], ['next', true]]);
      expect(kidIn('retired')).toBe(old!.kid);
      expect(run.stdout).toBe(`assertion key rotated: now signing with kid ${kidIn('current')}; ${old!.kid} stays published for 120 s; next kid ${kidIn('next')} is published ahead\n`);
    } finally {
      await deletion.release().catch(() => {});
    }
  });

  it('two rotations at once run one after the other', async () => {
    const { db } = await freshDatabase();
    await migrate(db);
    await ensureAssertionKeys(db);
    const [x, y] = await Promise.all([rotateAssertionKeys(db), rotateAssertionKeys(db)]);
    const [first, second] = x!.current === y!.previous ? [x!, y!] : [y!, x!];
    expect(second.previous).toBe(first.current);
    expect(second.current).toBe(first.next);
    const rows = await keyStates(db);
    expect(rows.map((r) => [r.state, r.has_private])).toEqual([['retired', false], ['retired', false], ['current', true], ['next', true]]);
  });

  it('the keys survive a restart: same JWKS, same kid, earlier assertions still verify', async () => {
    const { url } = await freshDatabase();
    const echo = await startEchoUpstream();
    cleanups.push(() => echo.close());
    const config = testConfig({ storage: { postgres: url }, upstreams: { app: { url: echo.url, assertion: true } }, routes: [{ path: '/app', upstream: 'app' }] });

    const first = await startTestGateway(config);
    const user = await makeUser(first);
    const jwksBefore = (await first.get('/.well-known/gateway-assertion-keys.json')).json;
    expect((await first.get('/app/one', { headers: bearer(user.access) })).status).toBe(200);
    await first.close();

    const second = await started(startTestGateway(config));
    const jwksAfter = (await second.get('/.well-known/gateway-assertion-keys.json')).json;
    expect(jwksAfter).toEqual(jwksBefore);
    expect((await second.get('/app/two', { headers: bearer(user.access) })).status).toBe(200);
    const one = echo.last('/app/one')!.headers;
    const two = echo.last('/app/two')!.headers;
    expect(decodeAssertion(two['x-gateway-assertion'] as string).header.kid).toBe(decodeAssertion(one['x-gateway-assertion'] as string).header.kid);
    expect(await verifyGatewayAssertion(one as Record<string, string>, { jwks: jwksAfter, audience: 'app' }))
      .toEqual({ userId: user.id, plan: 'free', email: user.email, authMethod: 'bearer' });
  });

  it('works the same on embedded PGlite (npm start without DATABASE_URL)', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'gw-keys-pglite-'));
    cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
    const echo = await startEchoUpstream();
    cleanups.push(() => echo.close());
    const gw = await started(startTestGateway(testConfig({
      storage: { postgres: '', redis: '', embeddedDir: dir },
      upstreams: { app: { url: echo.url, assertion: true } },
      routes: [{ path: '/app', upstream: 'app' }],
    })));
    expect(await kidsOf(gw)).toHaveLength(2);
    const rotation = await rotateAssertionKeys(gw.services.db);
    await eventually(async () => (await kidsOf(gw)).join() === [rotation.next, rotation.current, rotation.previous].join());
    const user = await makeUser(gw);
    expect((await gw.get('/app/pglite', { headers: bearer(user.access) })).status).toBe(200);
    expect(decodeAssertion(echo.last('/app/pglite')!.headers['x-gateway-assertion'] as string).header.kid).toBe(rotation.current);
  });
});

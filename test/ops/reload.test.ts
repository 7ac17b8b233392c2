// SIGHUP on the built CLI: routes, upstreams, freeDailyLimit and the auth rate limit change live,
// requests in flight finish on the table they matched, an invalid file changes nothing, and
// settings that cannot change live are named in the log as needing a restart.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startHoldingUpstream, type HoldingUpstream } from '../helpers/echoUpstream.js';
import {
  bearer, closeSql, describeWithServices, eventually, makeUser, marker, newEmail, ownRedisPrefix, rawTestConfig, startTestGateway, testConfig, type TestGateway,
} from '../helpers/gateway.js';
import { spawnGateway, type GatewayProcess, type LogLine } from '../helpers/gatewayProcess.js';
import { request } from '../helpers/http.js';

describeWithServices('reload on SIGHUP', () => {
  let one: HoldingUpstream;
  let two: HoldingUpstream;
  let helper: TestGateway;
  beforeAll(async () => {
    [one, two] = await Promise.all([startHoldingUpstream(), startHoldingUpstream()]);
    helper = await startTestGateway(testConfig());
  });
  afterAll(async () => {
    await helper?.close();
    await Promise.all([one?.close(), two?.close()]);
    await closeSql();
  });

  function config(overrides: { upstreams?: object; routes?: object[]; plans?: object; rateLimit?: object; prefix?: string } = {}): Record<string, unknown> {
    const base = rawTestConfig();
    return {
      ...base,
      storage: { ...(base.storage as object), ...(overrides.prefix ? { redisKeyPrefix: overrides.prefix } : {}) },
      auth: { ...(base.auth as object), rateLimit: overrides.rateLimit ?? { max: 0 } },
      plans: overrides.plans ?? { freeDailyLimit: 1 },
      upstreams: overrides.upstreams ?? { app: { url: one.url, timeout: '30s' } },
      routes: overrides.routes ?? [{ path: '/a', upstream: 'app', auth: 'none' }],
    };
  }

  /** Sends SIGHUP and waits for the reload's outcome line (the n-th of its kind since start). */
  async function hup(gw: GatewayProcess, outcome: (l: LogLine) => boolean): Promise<LogLine> {
    const seen = gw.logs.filter(outcome).length;
    gw.child.kill('SIGHUP');
    await eventually(() => gw.logs.filter(outcome).length > seen, 10_000);
    return gw.logs.filter(outcome).at(-1)!;
  }
  const reloaded = (l: LogLine) => typeof l.msg === 'string' && l.msg.startsWith('configuration reloaded');
  const refused = (l: LogLine) => l.msg === 'configuration reload refused: keeping the running configuration';

  it('swaps routes and upstreams without dropping the requests in flight', async () => {
    const gw = await spawnGateway(config());
    try {
      const m = marker();
      const hold = one.hold(m);
      // Five requests parked at upstream one on the old table.
      const inFlight = Array.from({ length: 5 }, (_, i) => request(gw.url, 'GET', `/a/${m}/${i}`));
      await eventually(() => hold.held() === 5, 10_000);
      // Paths read before the reload, read again after it (the contexts keep what a path reads as, per configuration).
      const same = `/a/${marker()}`;
      expect((await request(gw.url, 'GET', same)).json.path).toBe(same);
      expect((await request(gw.url, 'GET', '/b/x')).json).toEqual({ error: 'Route introuvable' });

      gw.writeConfig(config({
        upstreams: { app: { url: two.url, timeout: '30s' } },
        routes: [{ path: '/a', upstream: 'app', auth: 'none', rewritePrefix: '/moved' }, { path: '/b', upstream: 'app', auth: 'required' }],
      }));
      const line = await hup(gw, reloaded);
      expect(line.applied).toEqual(expect.arrayContaining(['routes', 'upstreams.app.url']));

      // New requests take the new table: /a goes to upstream two, rewritten; /b exists and is guarded.
      const n = marker();
      const moved = await request(gw.url, 'GET', `/a/${n}`);
      expect(moved.status).toBe(200);
      expect(moved.json.path).toBe(`/moved/${n}`);
      expect(two.count(n)).toBe(1);
      expect(one.count(n)).toBe(0);
      expect((await request(gw.url, 'GET', '/b/x')).json).toEqual({ error: 'Token invalide ou expiré' });
      expect((await request(gw.url, 'GET', same)).json.path).toBe(same.replace('/a/', '/moved/'));

      // The parked requests finish on upstream one, as they started.
      hold.release();
      const answers = await Promise.all(inFlight);
      expect(answers.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
      expect(answers.map((r) => r.json.path)).toEqual([0, 1, 2, 3, 4].map((i) => `/a/${m}/${i}`));
    } finally {
      await gw.stop();
    }
  });

  it('reloads on a SIGHUP sent the moment it says it is listening', async () => {
    // An orchestrator may signal as soon as the line appears; before the handler is in place a
    // SIGHUP ends the process (its default action).
    const gw = await spawnGateway(config(), { onListening: (child) => child.kill('SIGHUP') });
    try {
      await gw.waitForLog((l) => l.msg === 'configuration reloaded: nothing live changed');
      expect(gw.child.exitCode).toBeNull();
      expect((await request(gw.url, 'GET', '/healthz')).json).toEqual({ status: 'ok' });
    } finally {
      await gw.stop();
    }
  });

  it('keeps the running configuration when the new file is invalid, and says why', async () => {
    const gw = await spawnGateway(config());
    try {
      gw.writeConfig(config({ routes: [{ path: '/a', upstream: 'nowhere', auth: 'none' }] }));
      const line = await hup(gw, refused);
      expect(line.problems).toEqual([expect.stringContaining('routes[0].upstream: unknown upstream "nowhere"')]);

      gw.writeConfig('server: [this is: not yaml');
      expect((await hup(gw, refused)).problems).toEqual([expect.stringContaining('YAML')]);

      // Still serving the original table, still alive.
      const m = marker();
      const res = await request(gw.url, 'GET', `/a/${m}`);
      expect(res.status).toBe(200);
      expect(one.count(m)).toBe(1);
      expect(gw.child.exitCode).toBeNull();

      // A good file afterwards is applied.
      gw.writeConfig(config({ routes: [{ path: '/c', upstream: 'app', auth: 'none' }] }));
      await hup(gw, reloaded);
      expect((await request(gw.url, 'GET', `/a/${m}`)).json).toEqual({ error: 'Route introuvable' });
      expect((await request(gw.url, 'GET', `/c/${m}`)).status).toBe(200);
    } finally {
      await gw.stop();
    }
  });

  it('names the settings that need a restart and leaves them as they were', async () => {
    const gw = await spawnGateway(config());
    try {
      const changed = config();
      changed.server = { host: '127.0.0.1', port: 1 };
      // The token keys reload live (CONTRACT §25, test/auth/tokenRotation.test.ts); the issuer does not.
      const auth = changed.auth as { jwt: object };
      changed.auth = { ...auth, jwt: { ...auth.jwt, issuer: 'https://another-issuer.example' }, accessTokenTtl: '5m' };
      gw.writeConfig(changed);
      const line = await hup(gw, (l) => l.msg === 'changed settings need a restart to take effect');
      expect(line.settings).toEqual(expect.arrayContaining(['server.port', 'auth.jwt.issuer', 'auth.accessTokenTtl']));
      // Names only: no value reaches the log.
      expect(JSON.stringify(gw.logs)).not.toContain('another-issuer');
      // Still listening where it was, still signing and checking as before.
      const user = await makeUser(helper);
      const res = await request(gw.url, 'GET', '/api/v1/user/me', { headers: bearer(user.access) });
      expect(res.status).toBe(200);
    } finally {
      await gw.stop();
    }
  });

  it('applies a new freeDailyLimit and auth rate limit', async () => {
    const prefix = ownRedisPrefix('reload');
    const routes = [{ path: '/daily', upstream: 'app', auth: 'required', dailyLimit: true }];
    const gw = await spawnGateway(config({ routes, prefix }));
    try {
      const user = await makeUser(helper);
      const use = () => request(gw.url, 'GET', `/daily/${marker()}`, { headers: bearer(user.access) });
      expect((await use()).status).toBe(200);
      const refusedOnce = await use();
      expect(refusedOnce.status).toBe(429);
      expect(refusedOnce.json.error).toBe('Limite quotidienne atteinte (plan free: 1 course/jour)');
      expect((await use()).status).toBe(429); // refused attempts count in Redis, not in Postgres

      gw.writeConfig(config({ routes, prefix, plans: { freeDailyLimit: 3 }, rateLimit: { max: 2, window: '1m' } }));
      expect((await hup(gw, reloaded)).applied).toEqual(expect.arrayContaining(['plans.freeDailyLimit', 'auth.rateLimit.max']));
      // The raised limit admits two more uses today, then names the new limit.
      await eventually(async () => (await use()).status === 200, 5000);
      expect((await use()).status).toBe(200);
      const third = await use();
      expect(third.status).toBe(429);
      expect(third.json.error).toBe('Limite quotidienne atteinte (plan free: 3 courses/jour)');

      // The auth rate limit, off at start, is now 2 per minute per address.
      const login = () => request(gw.url, 'POST', '/api/v1/auth/login', { json: { email: newEmail(), password: 'x' } });
      expect((await login()).status).toBe(401);
      expect((await login()).status).toBe(401);
      const limited = await login();
      expect(limited.status).toBe(429);
      expect(limited.json).toEqual({ error: 'Trop de tentatives, réessayez plus tard' });
    } finally {
      await gw.stop();
    }
  });
});

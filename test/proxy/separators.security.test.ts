// Paths no upstream reads alike (issue 27, CONTRACT §19): spellings that a public catch-all route
// forwarded verbatim, which an upstream decoding twice, cutting at NUL, trimming or applying NFKC
// reads as a guarded path, are refused 400 on the proxy and the decisions listener alike; a route
// that must carry encoded separators says `encodedSeparators: keep`.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { docsExample } from '../helpers/docs.js';
import { ADMIN_KEY, bearer, closeSql, describeWithServices, makeUser, marker, startDecidingGateway, startTestGateway, testConfigFromYaml, type TestGateway } from '../helpers/gateway.js';
import { request } from '../helpers/http.js';
import { sparePort } from '../helpers/ports.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';

const BAD_REQUEST = { error: 'Requête invalide' };

describeWithServices('encoded separators and their kin', () => {
  let upstream: EchoUpstream;
  let gw: TestGateway;

  beforeAll(async () => {
    upstream = await startEchoUpstream();
    gw = await startDecidingGateway({
      admin: { host: '127.0.0.1', port: await sparePort() },
      upstreams: { app: { url: upstream.url } },
      routes: [
        { path: '/', upstream: 'app', auth: 'none' },
        { path: '/api/v1/profile', upstream: 'app' },
        { path: '/api/v1/reports', upstream: 'app' },
        { path: '/projects', upstream: 'app', encodedSeparators: 'keep' },
      ],
    });
  });
  afterAll(async () => { await gw?.close(); await upstream?.close(); await closeSql(); });

  const spellings = (m: string) => [
    `/api/v1/profile%3b${m}`, `/api/v1/profile%3B/${m}`, `/api/v1/reports%00/${m}`, `/api/v1/reports%2500/${m}`,
    `/api/v1/profile%20?${m}`, `/api/v1/profile%09?${m}`, `/api/v1%252fprofile/${m}`, `/api/v1%255Cprofile/${m}`, `/api/v1/profile%253b/${m}`,
    `/x/%252e%252e/api/v1/profile/${m}`, `/api/v1%EF%BC%8Fprofile/${m}`, `/api/v1/profile%EF%BC%9B/${m}`, `/x/%EF%BC%8E%EF%BC%8E/api/v1/profile/${m}`,
    // A segment ending in dots, which Windows and IIS read without them.
    `/api/v1/reports./${m}`, `/api/v1/reports../${m}`, `/api/v1/reports%2e/${m}`,
    // … also before `;params`, which servlet containers drop (found by a manual pass after 4-ZERO-3).
    `/api/v1/reports.;/${m}`, `/api/v1/reports..;/${m}`, `/api/v1/reports.;jsessionid=1/${m}`, `/api/v1/Reports.;/${m}`, `/api/v1/reports%2e;/${m}`, `/api/v1/reports%20;/${m}`,
    // Letters NFKC folds into a guarded route's (fullwidth ｒ, the ﬁ ligature), for upstreams that fold Unicode.
    `/api/v1/%EF%BD%92eports/${m}`, `/api/v1/%ef%bd%92eports/${m}`, `/api/v1/pro%EF%AC%81le/${m}`,
    // An encoded `#` or `?`, once or twice, any case, which an upstream decoding first cuts the path at (issue 68).
    `/api/v1/profile%23${m}`, `/api/v1/profile%23/${m}`, `/api/v1/profile%3F${m}`, `/api/v1/profile%3f/${m}`, `/api/v1/profile%2523/${m}`, `/api/v1/profile%253F/${m}`,
  ];

  it('refuses each spelling on the proxy with 400, the upstream never reached', async () => {
    const m = marker();
    for (const path of spellings(m)) {
      const res = await gw.get(path);
      expect(res.status, path).toBe(400);
      expect(res.json).toEqual(BAD_REQUEST);
    }
    expect(upstream.count(m)).toBe(0);
  });

  it('refuses each spelling on the decisions listener too, by path and by X-Forwarded-Uri', async () => {
    for (const path of spellings(marker())) {
      const byPath = await gw.decide('GET', `/decisions${path}`);
      expect(byPath.status, path).toBe(400);
      const byHeader = await gw.decide('GET', '/decisions', { headers: { 'x-forwarded-uri': path } });
      expect(byHeader.status, path).toBe(400);
    }
  });

  it('an encoded # or ? is 400 on every listener: a public catch-all, a route keeping separators, own endpoints, admin (issue 68)', async () => {
    const m = marker();
    const user = await makeUser(gw);
    const paths = [`/api/v1/profile%23`, `/api/v1/profile%23?${m}`, `/api/v1/profile%3F${m}`, `/projects/a%23b/${m}`, `/projects/a%3fb/${m}`, `/files/${m}%23`];
    for (const path of [...paths, '/api/v1/user/me%23', '/api/v1/user/me%3F', '/healthz%23']) {
      const res = await gw.get(path, { headers: bearer(user.access) });
      expect([path, res.status, res.json], path).toEqual([path, 400, BAD_REQUEST]);
    }
    expect(upstream.hits.filter((hit) => hit.path.startsWith('/api/v1/profile') || hit.path.includes(m))).toEqual([]);
    const admin = { authorization: `Bearer ${ADMIN_KEY}` };
    for (const path of [`/admin/v1/users/${user.id}%23`, `/admin/v1/users%3F`, '/healthz%23', '/readyz%3f', `/admin/v1/users/${user.id}%2523`]) {
      const res = await request(gw.adminUrl!, 'GET', path, { headers: admin });
      expect([path, res.status, res.json], path).toEqual([path, 400, BAD_REQUEST]);
    }
    expect((await request(gw.adminUrl!, 'GET', `/admin/v1/users/${user.id}`, { headers: admin })).status).toBe(200);
    const decided = await gw.decide('GET', `/decisions/files/${m}%23`);
    expect([decided.status, decided.json]).toEqual([400, BAD_REQUEST]);
  });

  it('still serves a literal % (%25) and other escapes through the public route', async () => {
    const m = marker();
    expect((await gw.get(`/files/100%25/${m}`)).status).toBe(200);
    expect(upstream.last(m)!.path).toBe(`/files/100%25/${m}`);
    expect((await gw.get(`/files/a%20b/${m}x`)).status).toBe(200);
    // Unicode that NFKC folds without changing the route it falls under is the upstream's business.
    expect((await gw.get(`/files/%EF%BC%91%EF%BC%92/${m}`)).status).toBe(200);
    expect((await gw.get(`/files/%C3%A9t%C3%A9/${m}`)).status).toBe(200);
  });

  it('with encodedSeparators: keep, forwards them undecoded under the route\'s guards', async () => {
    const m = marker();
    const path = `/projects/group%2Fproject/${m}/a%3Bb`;
    expect((await gw.get(path)).status).toBe(401);
    expect(upstream.count(m)).toBe(0);
    const user = await makeUser(gw);
    const res = await gw.get(path, { headers: bearer(user.access) });
    expect(res.status).toBe(200);
    expect(upstream.last(m)!.path).toBe(path);
    // The decisions listener decides for it as the proxy does.
    expect((await gw.decide('GET', `/decisions${path}`, { headers: bearer(user.access) })).status).toBe(200);
    expect((await gw.decide('GET', `/decisions${path}`)).status).toBe(401);
  });

  it('with encodedSeparators: keep, still resolves encoded dot segments, so `..` cannot climb to a route that refuses them', async () => {
    const m = marker();
    const res = await gw.get(`/projects/%2e%2e/api/v1/profile%2F${m}`);
    expect(res.status).toBe(400);
    expect(res.json).toEqual(BAD_REQUEST);
    expect(upstream.count(m)).toBe(0);
  });

  it('runs the docs\' example as written: GitLab-style project ids reach the upstream undecoded', async () => {
    const docs = await startTestGateway(testConfigFromYaml(docsExample('routing-and-headers', 'encoded-separators'), { GITLAB_URL: upstream.url }));
    try {
      const m = marker();
      const path = `/api/v4/projects/group%2Fproject/issues/${m}`;
      expect((await docs.get(path)).status).toBe(401);
      const user = await makeUser(docs);
      expect((await docs.get(path, { headers: bearer(user.access) })).status).toBe(200);
      expect(upstream.last(m)!.path).toBe(path);
      expect((await docs.get(`/api/v4/other%2F${m}`)).status).toBe(400);
    } finally {
      await docs.close();
    }
  });
});

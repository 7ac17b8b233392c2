// A client's copy of a reserved identity header never reaches the application behind a proxy that
// asks the decisions listener (CONTRACT §33, §11, §22): nginx auth_request and Caddy forward_auth,
// each run with the configuration docs/decisions.md ships today and with the one it shipped before
// organizations (fixtures/before-organizations.md, verbatim), which copies none of the x-org-*
// headers from the answer. Both configurations pass the client's headers to the decision unchanged
// (but those Caddy removes first), so the listener refusing any client copy protects them all,
// and any header the gateway adds after a proxy was configured.
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Proxy } from '../helpers/globalSetup.js';
import { docsBlock, docsExample, fencedBlocks } from '../helpers/docs.js';
import { bearer, closeSql, makeUser, marker, sql, startTestGateway, testConfigFromYaml, testServices, TEST_JWT_SECRET, type TestGateway } from '../helpers/gateway.js';
import { request, type HttpResponse } from '../helpers/http.js';
import { sparePort } from '../helpers/ports.js';
import { describeWithProxy, startCaddy, startNginx, withPorts, type RunningProxy } from '../helpers/proxies.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';

const BEFORE_ORGANIZATIONS = 'test/decisions/fixtures/before-organizations.md';
// The docs' gateway.yaml with organizations on, as a deployment that turned them on after its proxy was configured.
const ORGANIZATIONS = `
organizations:
  enabled: true
mail:
  smtp: ''
  from: gateway@example.test
  resetUrl: https://app.example.test/reset?token={token}
  verifyUrl: https://app.example.test/verify?token={token}
  invitationUrl: https://app.example.test/join?token={token}
`;

/**
 * Every reserved name a client might send (CONTRACT §3, §21, §22, §27, §33), a few spelled as
 * upstream frameworks read them alike; `x-user-role` stands for a header the gateway adds after a
 * proxy was configured.
 */
const RESERVED = [
  'X-User-Id', 'X-User-Plan', 'X-User-Email', 'X-User-Key-Id', 'X-User-External-Id', 'X-User-Role', 'x-USER-id',
  'X-Org-Id', 'X-Org-Role', 'X-Org-Plan', 'X-ORG-ID', 'X-Auth-Method', 'X-Gateway-Assertion', 'X_Org_Id', 'X_User_Id',
];
/** Names that are no identity header, and pass through the decision. */
const NOT_RESERVED = ['X-Organization', 'X-Users', 'X-Auth-Methods', 'Gateway-Org-Aware'];

const configurations = (proxy: Proxy) => ({
  today: docsBlock('decisions', proxy),
  'before organizations': fencedBlocks(BEFORE_ORGANIZATIONS).find((block) => block.name === proxy)!.text,
});

for (const proxy of ['nginx', 'caddy'] as const satisfies readonly Proxy[]) {
  describeWithProxy(proxy)(`client copies of identity headers through ${proxy}`, () => {
    let upstream: EchoUpstream;
    let gw: TestGateway;
    const fronts: Record<string, RunningProxy> = {};
    let orgId: number;

    beforeAll(async () => {
      upstream = await startEchoUpstream();
      const yaml = docsExample('decisions', 'decisions') + ORGANIZATIONS;
      gw = await startTestGateway(testConfigFromYaml(yaml, {
        DECISIONS_PORT: String(await sparePort()), APP_UPSTREAM: upstream.url, DATABASE_URL: testServices!.postgres, JWT_SECRET: TEST_JWT_SECRET,
      }));
      const port = (url: string | undefined) => Number(new URL(url!).port);
      for (const [name, site] of Object.entries(configurations(proxy))) {
        const proxyPort = await sparePort();
        const ports = { 8000: proxyPort, 8080: port(gw.url), 8081: port(gw.url), 9191: port(gw.decisionsUrl), 9192: port(gw.decisionsUrl), 3000: upstream.port };
        fronts[name] = await (proxy === 'nginx' ? startNginx : startCaddy)(withPorts(site, ports), proxyPort);
      }
      orgId = (await sql<{ id: number }>("INSERT INTO organizations (name, plan) VALUES ('Victim', 'pro') RETURNING id"))[0]!.id;
    });
    afterAll(async () => {
      await Promise.all(Object.values(fronts).map((front) => front.close()));
      await gw?.close();
      await upstream?.close();
      await closeSql();
    });

    const expectRefused = (res: HttpResponse, front: RunningProxy, what: string) => {
      expect(res.status, `${what}: ${res.text}\n${front.log()}`).toBe(400);
      expect(res.json, what).toEqual({ error: 'Requête invalide' });
    };

    it('before organizations: a client\'s X-Org-* with X-Gateway-Org-Aware: 1 never reaches the application (issue 68)', async () => {
      const front = fronts['before organizations']!;
      const premium = await makeUser(gw, { plan: 'premium' });
      const forged = { 'X-Gateway-Org-Aware': '1', 'X-Org-Id': String(orgId), 'X-Org-Role': 'owner', 'X-Org-Plan': 'pro' };
      for (const [what, path, headers] of [
        ['a member of no organization, on a bearer route', '/api/v1/reports', { ...forged, ...bearer(premium.access) }],
        ['anonymous, on a public route', '/api/v1/catalog', forged],
      ] as const) {
        const m = marker();
        const res = await request(front.url, 'GET', `${path}/${m}`, { headers });
        expect(upstream.hits.filter((hit) => hit.path.includes(m)).map((hit) => hit.headers['x-org-id']), what).toEqual([]);
        expectRefused(res, front, what);
      }
    });

    it('no reserved header a client sends reaches the application, under either configuration, signed in or not', async () => {
      const premium = await makeUser(gw, { plan: 'premium' });
      for (const [configuration, front] of Object.entries(fronts)) {
        for (const name of RESERVED) {
          for (const [who, path, credentials] of [['signed in', '/api/v1/reports', bearer(premium.access)], ['anonymous', '/api/v1/catalog', {}]] as const) {
            const m = marker();
            const forged = `client-${m}`;
            const what = `${configuration}, ${who}, ${name}`;
            const res = await request(front.url, 'GET', `${path}/${m}`, { headers: { ...credentials, [name]: forged } });
            const seen = upstream.hits.filter((hit) => hit.path.includes(m)).flatMap((hit) => Object.entries(hit.headers));
            expect(seen.filter(([, value]) => String(value).includes(forged)), what).toEqual([]);
            // Refused wherever the proxy hands the client's copy to the decision; Caddy removes its
            // x-user-*, x-auth-method, x-gateway-assertion and `_` names first, and today x-org-* too.
            const removedFirst = proxy === 'caddy' && (!/^x-org-/i.test(name) || configuration === 'today');
            if (removedFirst || (proxy === 'nginx' && name.includes('_'))) {
              expect(res.status, `${what}: ${res.text}\n${front.log()}`).toBe(200);
            } else {
              expectRefused(res, front, what);
            }
          }
        }
      }
    });

    it('headers that are no identity header, and the retired X-Gateway-Org-Aware, pass as before', async () => {
      for (const [configuration, front] of Object.entries(fronts)) {
        for (const name of [...NOT_RESERVED, 'X-Gateway-Org-Aware']) {
          const m = marker();
          const res = await request(front.url, 'GET', `/api/v1/catalog/${m}`, { headers: { [name]: `client-${m}` } });
          expect(res.status, `${configuration}, ${name}: ${res.text}\n${front.log()}`).toBe(200);
          expect(upstream.last(m)!.headers[name.toLowerCase()], `${configuration}, ${name}`).toBe(`client-${m}`);
        }
      }
    });
  });
}

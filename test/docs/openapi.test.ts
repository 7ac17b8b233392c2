// docs/openapi.json is the OpenAPI document the admin listener serves: regenerated from the
// routes, it must be the committed file (regenerate: npm run build && node dist/cli.js openapi >
// docs/openapi.json), and it describes every own endpoint of both listeners.
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { buildAdminApp } from '../../src/admin/app.js';
import { DOCUMENTED_OPTIONS } from '../../src/openapi.js';
import { closeSql, describeWithServices, startTestGateway, testConfig, type TestGateway } from '../helpers/gateway.js';

const COMMITTED = JSON.parse(readFileSync(new URL('../../docs/openapi.json', import.meta.url), 'utf8')) as {
  openapi: string;
  paths: Record<string, Record<string, { summary?: string; responses?: Record<string, unknown> }>>;
};

describeWithServices('the OpenAPI document', () => {
  let gw: TestGateway;
  let served: unknown;

  beforeAll(async () => {
    gw = await startTestGateway(testConfig(DOCUMENTED_OPTIONS));
    const admin = await buildAdminApp(gw.services, { publicDocument: () => gw.app.swagger() as Record<string, unknown> });
    served = (await admin.inject({ method: 'GET', url: '/openapi.json' })).json();
    await admin.close();
  });

  afterAll(async () => {
    await gw?.close();
    await closeSql();
  });

  it('is what the admin listener serves (regenerate: npm run build && node dist/cli.js openapi > docs/openapi.json)', () => {
    expect(served).toEqual(COMMITTED);
  });

  it('is OpenAPI 3.1 and describes every own endpoint of both listeners, each with a summary and its answers', () => {
    expect(COMMITTED.openapi).toBe('3.1.0');
    for (const path of ['/api/v1/auth/login', '/api/v1/auth/magic-link', '/api/v1/user/me', '/healthz', '/.well-known/gateway-assertion-keys.json', '/metrics', '/admin/v1/users/{id}/plan']) {
      expect(Object.keys(COMMITTED.paths), path).toContain(path);
    }
    for (const [path, operations] of Object.entries(COMMITTED.paths)) {
      for (const [method, operation] of Object.entries(operations)) {
        expect(operation.summary, `${method} ${path}`).toMatch(/\w/);
        expect(Object.keys(operation.responses ?? {}).length, `${method} ${path}`).toBeGreaterThan(0);
      }
    }
    // The proxy's catch-all is the upstreams' business, not an endpoint of the gateway's.
    expect(Object.keys(COMMITTED.paths).some((p) => p.includes('*'))).toBe(false);
  });
});

// The document and the catalog agree (issue 49): every code an error response names is the
// catalog's, with the status it is documented under; the catalog's codes the document leaves out
// are exactly those no own endpoint answers, each for its reason.
const NOT_OWN_ENDPOINT_ANSWERS: Record<string, string> = {
  dailyLimitReached: 'routes with dailyLimit', monthlyLimitReached: 'routes with dailyLimit', tooManyRequests: 'routes with rateLimit', mfaRequired: 'routes with mfa: required',
  upstreamUnavailable: 'proxied routes', upstreamTimeout: 'proxied routes', methodNotAllowed: 'any path, for a method it does not take',
  headersTooLarge: 'requests never parsed', requestTimeout: 'requests never parsed', expectationFailed: 'requests never parsed',
  internal: 'a fault of ours', notAuthenticated: 'never answered (plans need auth: required)',
  consoleCsrf: 'the console (HTML, not in the document)', consoleTicketInvalid: 'the console', metricsUnauthorized: 'the metrics listener (not in the document)',
  scopeInsufficient: 'a key with scopes, on routes and on every own endpoint a key may call but GET /api/v1/user/me (docs/api-keys.md)',
  orgNotApplicable: 'routes that declare no org: (docs/organizations.md)', orgAccessDenied: 'routes that declare org: (docs/organizations.md)', orgRequired: 'routes with org: required',
};

it('names in its error responses only the catalog\'s codes, each under its status, and every code an own endpoint answers', async () => {
  const { CATALOG } = await import('../../src/errors/catalog.js');
  const byCode = new Map<string, { name: string; status: number }>(Object.entries(CATALOG).map(([name, e]) => [e.code, { name, status: e.status }]));
  const documented = new Set<string>();
  for (const operations of Object.values(COMMITTED.paths)) {
    for (const op of Object.values(operations)) {
      for (const [status, response] of Object.entries(op.responses ?? {})) {
        const schema = (response as { content?: Record<string, { schema?: { properties?: { code?: { enum?: string[] } } } }> }).content?.['application/json']?.schema;
        for (const code of schema?.properties?.code?.enum ?? []) {
          expect(byCode.get(code)?.status, `${code} under ${status}`).toBe(Number(status));
          documented.add(byCode.get(code)!.name);
        }
      }
    }
  }
  const missing = Object.keys(CATALOG).filter((name) => !documented.has(name)).sort();
  expect(missing).toEqual(Object.keys(NOT_OWN_ENDPOINT_ANSWERS).sort());
});

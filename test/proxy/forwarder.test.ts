// The forwarder's pure steps, without a listener: plan() (what the upstream is asked for, or the
// WebSocket target, for an allowed decision) and the upstream failure table (what each failure
// answers, counts and logs). End to end: routing.*.test.ts, upstreamFailures.test.ts in test/ops.
import { describe, expect, it } from 'vitest';
import { configSchema } from '../../src/config/schema.js';
import { Live, liveSettingsOf } from '../../src/live/live.js';
import type { Decision } from '../../src/pipeline/pipeline.js';
import { BODY_TOO_LARGE } from '../../src/proxy/bodyLimit.js';
import { plan, type PlanInput } from '../../src/proxy/forwarder.js';
import { CLIENT_GONE } from '../../src/proxy/relay.js';
import { classifyUpstreamFailure, UPSTREAM_FAILURES } from '../../src/proxy/upstreamFailures.js';
import { requestContext } from '../../src/live/requestContext.js';

const live = new Live(liveSettingsOf(configSchema.parse({
  upstreams: { app: { url: 'http://app.test:8080/base', timeout: '7s' } },
  routes: [
    { path: '/orders', upstream: 'app' },
    { path: '/billing', upstream: 'app', rewritePrefix: '/v2/billing' },
    { path: '/live', upstream: 'app', websocket: true },
  ],
})));
const NO_CREDENTIALS = { authorization: false, cookie: undefined, query: undefined, headers: [] };
const IDENTITY = { 'x-user-id': '7', 'x-user-plan': 'pro', 'x-user-email': 'ada@example.test', 'x-auth-method': 'bearer' };

/** An allowed decision for `url`, as the pipeline gives it, with the plan() input of a plain HTTP/1.1 request. */
function allowed(method: string, url: string, overrides: Partial<PlanInput> = {}): [PlanInput, Decision & { kind: 'allow' }] {
  const context = requestContext(live.current, method, url, () => []);
  if (context.match.kind !== 'route') throw new Error(`no route for ${url}`);
  const decision: Decision & { kind: 'allow' } = {
    kind: 'allow', route: context.match.route, upstreamPath: context.match.upstreamPath,
    auth: { kind: 'authenticated', user: { id: 7 } as never, method: 'bearer' }, identity: IDENTITY, responseHeaders: undefined,
  };
  const input: PlanInput = {
    context, headers: { host: 'gw.example.test', 'x-user-id': '1', authorization: 'Bearer token', 'x-custom': 'kept' }, requestId: 'req-1',
    socketAddress: '10.0.0.9', protocol: 'https', host: 'gw.example.test', websocket: false, query: context.query, own: { ...NO_CREDENTIALS, authorization: true },
    trustProxy: false, ...overrides,
  };
  return [input, decision];
}

describe('plan()', () => {
  it('asks the upstream for the path under its base, with the identity of the decision and not the client\'s', () => {
    const planned = plan(...allowed('POST', '/orders/42?x=1'));
    expect(planned).toMatchObject({ kind: 'relay', upstream: 'app', request: { origin: 'http://app.test:8080', path: '/base/orders/42?x=1', method: 'POST', timeout: 7000 } });
    if (planned.kind !== 'relay') return;
    // No Host: the client's names the gateway, and undici writes the origin's (headers.test.ts sees it upstream).
    expect(planned.request.headers).toEqual({
      'x-custom': 'kept', 'x-forwarded-for': '10.0.0.9', 'x-forwarded-proto': 'https', 'x-forwarded-host': 'gw.example.test', 'x-request-id': 'req-1', ...IDENTITY,
    });
  });

  it('applies rewritePrefix, and keeps a bare `?` as the client sent it', () => {
    expect(plan(...allowed('GET', '/billing/invoices?'))).toMatchObject({ request: { path: '/base/v2/billing/invoices?' } });
  });

  it('forwards the query without the pairs that carried a gateway credential', () => {
    const [input, decision] = allowed('GET', '/orders?access_token=eyJx.y.z&page=2');
    expect(plan({ ...input, own: { ...input.own, query: 'page=2' } }, decision)).toMatchObject({ request: { path: '/base/orders?page=2' } });
    expect(plan({ ...input, own: { ...input.own, query: '' } }, decision)).toMatchObject({ request: { path: '/base/orders' } });
  });

  it('appends the socket address to a trusted X-Forwarded-For chain, and replaces an untrusted one', () => {
    const [input, decision] = allowed('GET', '/orders', { headers: { 'x-forwarded-for': '203.0.113.5' } });
    expect(plan({ ...input, trustProxy: true }, decision)).toMatchObject({ request: { headers: { 'x-forwarded-for': '203.0.113.5, 10.0.0.9' } } });
    expect(plan(input, decision)).toMatchObject({ request: { headers: { 'x-forwarded-for': '10.0.0.9' } } });
  });

  it('gives a WebSocket target with the upgrade\'s query (a bare `?` dropped) and the standing its socket is checked against', () => {
    const [input, decision] = allowed('GET', '/live/room?', { websocket: true });
    expect(plan(input, decision)).toMatchObject({
      kind: 'websocket', upstream: 'app',
      target: { url: 'http://app.test:8080/base/live/room', timeout: 7000, standing: { route: '/live', userId: 7 } },
    });
  });

  it('refuses a path no request can carry', () => {
    expect(plan(...allowed('GET', '/orders/%E0%A4%A'))).toEqual({ kind: 'refused', upstream: 'app' });
  });
});

describe('the upstream failure table', () => {
  const coded = (code: string, cause?: unknown) => Object.assign(new Error(code), { code, cause });
  it.each([
    [coded('ECONNREFUSED'), false, 'unavailable', 'upstreamUnavailable', 'unavailable'],
    [coded('UND_ERR_SOCKET'), false, 'unavailable', 'upstreamUnavailable', 'unavailable'],
    [coded('UND_ERR_HEADERS_TIMEOUT'), false, 'timeout', 'upstreamTimeout', 'timeout'],
    [coded('UND_ERR_ABORTED', coded('UND_ERR_BODY_TIMEOUT')), false, 'timeout', 'upstreamTimeout', 'timeout'],
    [coded('UND_ERR_ABORTED', coded(BODY_TOO_LARGE)), false, 'bodyTooLarge', 'payloadTooLarge', undefined],
    [coded('UND_ERR_ABORTED', coded(CLIENT_GONE)), false, 'clientGone', undefined, undefined],
    [coded('ECONNRESET'), true, 'clientGone', undefined, undefined], // the client's socket is gone: not the upstream's fault
    [coded('UND_ERR_INVALID_ARG'), false, 'refusedByClient', 'badRequest', undefined],
  ] as const)('%s (client gone: %s) is %s: answers %s, counts %s', (error, clientGone, row, answer, metric) => {
    const failure = classifyUpstreamFailure(error, clientGone);
    expect(failure).toBe(row);
    expect(UPSTREAM_FAILURES[failure].answer).toBe(answer);
    expect(UPSTREAM_FAILURES[failure].metric).toBe(metric);
  });
});

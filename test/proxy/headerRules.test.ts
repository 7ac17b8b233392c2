// Unit tests of the header rules (src/proxy/headers.ts, CONTRACT §3): what upstreams receive and
// what clients get back. The threats: a client passing itself off as another user through an
// identity header an upstream framework reads, a method override running a method the route does
// not take, a forwarding header lying about the client, an upstream closing the client's
// connection. End to end, on the wire: headers.test.ts and routing.security.test.ts.
import type { IncomingHttpHeaders } from 'node:http';
import { describe, expect, it } from 'vitest';
import { identityHeaders, isIdentityHeader } from '../../src/pipeline/identityHeaders.js';
import { downstreamHeaders, upstreamHeaders, type ForwardContext } from '../../src/proxy/headers.js';
import { overridingMethods } from '../../src/routing/methodOverrides.js';
import type { User } from '../../src/storage/accounts/users.js';

const USER: User = { id: 42, email: 'ada@example.test', plan: 'pro', is_active: 1, daily_usage: 0, last_usage_date: null, created_at: new Date(0), email_verified_at: null, credential_generation: 0 };

describe('isIdentityHeader', () => {
  it.each([
    ['x-user-id'], ['x-user-plan'], ['x-user-email'], ['x-user-anything'], ['x-auth-method'], ['x-gateway-assertion'],
    // Many frameworks read `_` as `-` and ignore case (Rack, PHP's $_SERVER, CGI).
    ['X-User-Id'], ['X_User_Id'], ['x_user_plan'], ['X_AUTH_METHOD'], ['x_gateway_assertion'], ['X-User-'],
  ])('%s is one', (name) => {
    expect(isIdentityHeader(name)).toBe(true);
  });

  it.each([['x-user'], ['x-users'], ['x-userid'], ['x-gateway-other'], ['x-auth'], ['authorization'], ['user-id'], ['xx-user-id'], ['x-request-id'], ['']])('%j is not', (name) => {
    expect(isIdentityHeader(name)).toBe(false);
  });
});

describe('identityHeaders', () => {
  it('says who the caller is, as CONTRACT §3 names it', () => {
    expect(identityHeaders(USER, 'bearer')).toEqual({ 'x-user-id': '42', 'x-user-plan': 'pro', 'x-user-email': 'ada@example.test', 'x-auth-method': 'bearer' });
    expect(identityHeaders(USER, 'api-key')['x-auth-method']).toBe('api-key');
  });

  it('gives names that isIdentityHeader recognizes, so a client can never send them itself', () => {
    for (const name of Object.keys(identityHeaders(USER, 'bearer'))) expect(isIdentityHeader(name), name).toBe(true);
  });
});

describe('overridingMethods', () => {
  // The pipeline hands it the query its RequestContext split off the URL.
  const queryOf = (url: string) => (url.includes('?') ? url.slice(url.indexOf('?') + 1) : undefined);
  // Header names as Node delivers them: lower case.
  it.each([
    [{ 'x-http-method-override': 'DELETE' }, '/r', ['DELETE']], // Symfony, Laravel, Express's method-override
    [{ 'x-http-method': 'put' }, '/r', ['PUT']], // ASP.NET, OData
    [{ 'x-method-override': 'PATCH' }, '/r', ['PATCH']],
    [{ x_http_method_override: 'DELETE' }, '/r', ['DELETE']], // `_` read as `-`
    [{ 'x-http-method': ' put , patch' }, '/r', ['PUT', 'PATCH']],
    [{ 'x-http-method-override': ['PUT', 'DELETE'] }, '/r', ['PUT', 'DELETE']],
    [{}, '/r?_method=delete', ['DELETE']], // Laravel, Symfony, Express's method-override
    [{}, '/r?x=1&%5Fmethod=put', ['PUT']], // `%5F` is `_` once decoded
    [{}, '/r?.method=put', ['PUT']], // PHP reads `.`, ` ` and `[` in a key as `_`
    [{}, '/r?%20method=put', ['PUT']],
    [{}, '/r?[method=put', ['PUT']],
    [{ 'x-http-method-override': 'DELETE' }, '/r?_method=PUT', ['DELETE', 'PUT']],
  ] as Array<[IncomingHttpHeaders, string, string[]]>)('finds in %j and %s the methods %j', (headers, url, methods) => {
    expect(overridingMethods(headers, queryOf(url))).toEqual(methods);
  });

  it.each([
    [{}, '/r'],
    [{ 'x-other': 'DELETE', 'x-http-method-overrides': 'DELETE' }, '/r'],
    [{ 'x-http-method-override': '' }, '/r?_method='],
    [{}, '/r?method=DELETE'],
    [{}, '/r?_methods=DELETE'],
    [{}, '/r/_method=DELETE'],
  ] as Array<[IncomingHttpHeaders, string]>)('finds none in %j and %s', (headers, url) => {
    expect(overridingMethods(headers, queryOf(url))).toEqual([]);
  });
});

describe('upstreamHeaders', () => {
  const ctx = (over: Partial<ForwardContext> = {}): ForwardContext => ({
    requestId: 'req-1', forwardedFor: '203.0.113.7', proto: 'https', host: 'gateway.test',
    identity: undefined, dropAuthorization: false, trustProxy: false, ...over,
  });

  it('passes the end-to-end headers on as they are, and the client\'s Host as X-Forwarded-Host only (the upstream\'s own is written by undici)', () => {
    const incoming = { accept: 'application/json', cookie: 'k=v', 'content-type': 'text/plain', 'content-length': '3', 'x-custom': ['a', 'b'] };
    expect(upstreamHeaders({ host: 'gateway.test', ...incoming }, ctx())).toEqual({
      ...incoming,
      'x-forwarded-for': '203.0.113.7', 'x-forwarded-proto': 'https', 'x-forwarded-host': 'gateway.test', 'x-request-id': 'req-1',
    });
  });

  it('drops every identity header the client sent, whatever its spelling, and sets the gateway\'s last', () => {
    const incoming = { 'x-user-id': '1', x_user_plan: 'pro', 'x-user-whatever': 'x', 'x-auth-method': 'bearer', 'x-gateway-assertion': 'forged', accept: '*/*' };
    expect(upstreamHeaders(incoming, ctx())).toEqual({ accept: '*/*', 'x-forwarded-for': '203.0.113.7', 'x-forwarded-proto': 'https', 'x-forwarded-host': 'gateway.test', 'x-request-id': 'req-1' });
    const identity = { ...identityHeaders(USER, 'bearer'), 'x-gateway-assertion': 'signed' };
    expect(upstreamHeaders(incoming, ctx({ identity }))).toMatchObject(identity);
  });

  it('drops hop-by-hop headers (RFC 9110 §7.6.1) and Expect, which the gateway answers itself', () => {
    const hop = {
      connection: 'keep-alive', 'keep-alive': 'timeout=5', 'proxy-connection': 'keep-alive', 'transfer-encoding': 'chunked', te: 'trailers', trailer: 'x-sum', upgrade: 'h2c',
      expect: '100-continue',
    };
    expect(Object.keys(upstreamHeaders({ ...hop, accept: '*/*' }, ctx()))).toEqual(['accept', 'x-forwarded-for', 'x-forwarded-proto', 'x-forwarded-host', 'x-request-id']);
  });

  it('drops the headers the client names in Connection, never the ones the gateway sets, and HTTP/2 pseudo-headers', () => {
    const incoming = { connection: 'keep-alive, X-Debug, x-user-id, x-forwarded-for', 'x-debug': '1', ':path': '/x', ':method': 'GET', accept: '*/*' };
    const identity = identityHeaders(USER, 'bearer');
    const out = upstreamHeaders(incoming, ctx({ identity }));
    expect(out).not.toHaveProperty('x-debug');
    expect(Object.keys(out).filter((n) => n.startsWith(':'))).toEqual([]);
    expect(out).toMatchObject({ accept: '*/*', 'x-forwarded-for': '203.0.113.7', ...identity });
  });

  it('replaces what the client says of where the request came from, and drops its API key', () => {
    const claims = { 'x-forwarded-for': '10.0.0.1', 'x-forwarded-proto': 'http', 'x-forwarded-host': 'evil.test', 'x-request-id': 'client-id', 'x-api-key': 'gw_secret' };
    expect(upstreamHeaders(claims, ctx())).toEqual({ 'x-forwarded-for': '203.0.113.7', 'x-forwarded-proto': 'https', 'x-forwarded-host': 'gateway.test', 'x-request-id': 'req-1' });
    // No Host to speak of: the client's X-Forwarded-Host does not get through in its place.
    expect(upstreamHeaders(claims, ctx({ host: undefined }))).not.toHaveProperty('x-forwarded-host');
  });

  it('keeps X-Forwarded-Port and -Prefix only from a trusted proxy, and the other address claims never (CONTRACT §8)', () => {
    const family = { 'x-forwarded-port': '80', 'x-forwarded-prefix': '/evil' };
    const claims = {
      forwarded: 'for=10.0.0.1;proto=http', 'x-real-ip': '10.0.0.1', 'x-client-ip': '10.0.0.1', 'client-ip': '10.0.0.1', 'true-client-ip': '10.0.0.1',
      'cf-connecting-ip': '10.0.0.1', 'fastly-client-ip': '10.0.0.1', 'x-cluster-client-ip': '10.0.0.1', 'x-original-forwarded-for': '10.0.0.1',
      'x-original-url': '/admin', 'x-rewrite-url': '/admin', 'x-original-uri': '/admin', 'proxy-authorization': 'Basic eA==',
    };
    const untrusted = upstreamHeaders({ ...family, ...claims }, ctx());
    const trusted = upstreamHeaders({ ...family, ...claims }, ctx({ trustProxy: true }));
    for (const name of Object.keys(family)) expect(untrusted, name).not.toHaveProperty(name);
    expect(trusted).toMatchObject(family);
    for (const name of Object.keys(claims)) {
      expect(untrusted, name).not.toHaveProperty(name);
      expect(trusted, name).not.toHaveProperty(name);
    }
  });

  it('drops every header whose name has an underscore, as nginx does', () => {
    const out = upstreamHeaders({ transfer_encoding: 'chunked', content_length: '5', x_custom: 'x', 'x-custom': 'kept' }, ctx());
    expect(out).toMatchObject({ 'x-custom': 'kept' });
    for (const name of ['transfer_encoding', 'content_length', 'x_custom']) expect(out, name).not.toHaveProperty(name);
  });

  it('replaces the Cookie header when told to, and drops it when nothing is left', () => {
    expect(upstreamHeaders({ cookie: 'a=1; t=x.y.z' }, ctx({ cookie: 'a=1' })).cookie).toBe('a=1');
    expect(upstreamHeaders({ cookie: 't=x.y.z' }, ctx({ cookie: null }))).not.toHaveProperty('cookie');
    expect(upstreamHeaders({ cookie: 'a=1' }, ctx()).cookie).toBe('a=1');
  });

  it('drops Authorization when it carried the gateway\'s own token, and only then', () => {
    const incoming = { authorization: 'Bearer eyJ.eyJ.sig' };
    expect(upstreamHeaders(incoming, ctx({ dropAuthorization: true }))).not.toHaveProperty('authorization');
    expect(upstreamHeaders(incoming, ctx())).toMatchObject(incoming);
  });
});

describe('downstreamHeaders', () => {
  it('passes the upstream\'s end-to-end headers on, and drops its hop-by-hop ones', () => {
    const upstream = {
      'content-type': 'text/plain', 'set-cookie': ['a=1', 'b=2'], 'x-custom': 'kept',
      connection: 'close', 'keep-alive': 'timeout=1', 'transfer-encoding': 'chunked', trailer: 'x-sum', Upgrade: 'h2c',
    };
    expect(downstreamHeaders(upstream)).toEqual({ 'content-type': 'text/plain', 'set-cookie': ['a=1', 'b=2'], 'x-custom': 'kept' });
  });

  it('drops the headers the upstream\'s Connection names, whatever their case', () => {
    expect(downstreamHeaders({ connection: 'keep-alive, X-Internal', 'x-internal': 'secret', 'X-Internal': 'secret', 'x-public': 'yes' })).toEqual({ 'x-public': 'yes' });
  });

  it('keeps the gateway\'s request id: the upstream\'s never reaches the client', () => {
    expect(downstreamHeaders({ 'x-request-id': 'upstream-id', 'content-length': '2' })).toEqual({ 'content-length': '2' });
    expect(downstreamHeaders({ 'X-Request-Id': 'upstream-id' })).toEqual({});
  });
});

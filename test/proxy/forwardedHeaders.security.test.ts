// What never reaches an upstream (issue 16, CONTRACT §8): URL overrides and client-address claims
// that frameworks trust, header names with `_` that CGI-style servers read as dashed ones, and a
// gateway token or API key wherever the client put it (query, cookie, Authorization,
// Proxy-Authorization) in any form the upstream's framework reads, and scheme and path-prefix claims.
import { SignJWT } from 'jose';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { bearer, closeSql, describeWithServices, makeUser, marker, startTestGateway, testConfig, type TestGateway, type TestUser } from '../helpers/gateway.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';

describeWithServices('headers and tokens that never reach an upstream', () => {
  let upstream: EchoUpstream;
  let gw: TestGateway;
  let user: TestUser;

  beforeAll(async () => {
    upstream = await startEchoUpstream();
    gw = await startTestGateway(testConfig({
      upstreams: { app: { url: upstream.url } },
      routes: [
        { path: '/open', upstream: 'app', auth: 'none' },
        { path: '/private', upstream: 'app', auth: 'required' },
      ],
    }));
    user = await makeUser(gw);
  });

  afterAll(async () => {
    await gw?.close();
    await upstream?.close();
    await closeSql();
  });

  it('drops URL overrides, client-address claims, Proxy-Authorization and every name with an underscore', async () => {
    const sent: Record<string, string> = {
      'X-Original-URL': '/admin', 'X-Rewrite-URL': '/admin', 'X-Original-URI': '/admin',
      'X-Client-IP': '10.0.0.1', 'Client-IP': '10.0.0.1', 'True-Client-IP': '10.0.0.1', 'CF-Connecting-IP': '10.0.0.1',
      'Fastly-Client-IP': '10.0.0.1', 'X-Cluster-Client-IP': '10.0.0.1', 'X-Original-Forwarded-For': '10.0.0.1',
      'X-Real-IP': '10.0.0.1', Forwarded: 'for=10.0.0.1', 'Proxy-Authorization': 'Basic YWRtaW46YWRtaW4=',
      Transfer_Encoding: 'chunked', Content_Length: '5', X_Custom_Thing: 'x', X_Forwarded_For: '10.0.0.1',
    };
    for (const route of ['/open', '/private']) {
      const m = marker();
      const res = await gw.get(`${route}/${m}`, { headers: { ...sent, ...bearer(user.access), 'x-kept': 'yes' } });
      expect(res.status).toBe(200);
      const received = upstream.last(m)!.headers;
      for (const name of Object.keys(sent)) expect(received[name.toLowerCase()], `${route}: ${name}`).toBeUndefined();
      expect(received['x-kept']).toBe('yes');
      expect(received['x-forwarded-for']).toBe('127.0.0.1');
    }
  });

  it('removes a gateway token from the query, from cookies and from Proxy-Authorization, and keeps what is not one', async () => {
    // Another service's JWT, same shape, other key: the upstream's business.
    const foreign = await new SignJWT({ scope: 'x' }).setProtectedHeader({ alg: 'HS256', typ: 'at+jwt' }).setSubject('1').sign(new TextEncoder().encode('another-service-secret-of-32-bytes!!'));
    const m = marker();
    const res = await gw.get(`/open/${m}?a=1&access_token=${user.access}&token=${encodeURIComponent(user.refresh)}&foreign=${foreign}`, {
      headers: {
        cookie: `theme=dark; access_token=${user.access}; sid="${user.refresh}"; other=${foreign}`,
        'proxy-authorization': `Bearer ${user.access}`,
      },
    });
    expect(res.status).toBe(200);
    const hit = upstream.last(m)!;
    expect(hit.url).toBe(`/open/${m}?a=1&foreign=${foreign}`);
    expect(hit.headers.cookie).toBe(`theme=dark; other=${foreign}`);
    expect(hit.headers['proxy-authorization']).toBeUndefined();
    expect(JSON.stringify(hit.headers)).not.toContain(user.access);

    // A request whose only cookie was a gateway token sends none.
    const n = marker();
    await gw.get(`/open/${n}?access_token=${user.access}`, { headers: { cookie: `access_token=${user.access}` } });
    expect(upstream.last(n)!.url).toBe(`/open/${n}`);
    expect(upstream.last(n)!.headers.cookie).toBeUndefined();
  });

  it('removes a gateway token with other characters glued after it, which an upstream could cut back off', async () => {
    for (const junk of ['X', 'XY', '_', '-', 'abcdefgh']) {
      const m = marker();
      const glued = `${user.access}${junk}`;
      const res = await gw.get(`/open/${m}?access_token=${glued}`, { headers: { authorization: `Bearer ${glued}`, cookie: `access_token=${glued}`, 'x-token': glued } });
      expect(res.status, junk).toBe(200);
      const hit = upstream.last(m)!;
      expect(JSON.stringify(hit), junk).not.toContain(user.access);
      expect(JSON.stringify(hit), junk).not.toContain(user.access.slice(user.access.lastIndexOf('.')));
    }
    // On a guarded route it is no credential: 401, as any token that is not exactly one.
    expect((await gw.get(`/private/${marker()}`, { headers: { authorization: `Bearer ${user.access}X` } })).status).toBe(401);
  });

  it('removes a gateway token from the query and the cookies as Rack reads them: after a `;`, and percent-encoded', async () => {
    // Rack 2 (Rails 6 and 7.0) splits a query on `;` as on `&`, and percent-decodes every cookie
    // value: `?a=1;access_token=<jwt>` and `access_token=<jwt with . as %2E>` give the application
    // the token itself, to log or to replay here as the user.
    for (const token of [user.access, user.refresh]) {
      const m = marker();
      const escaped = token.replace(/\./g, '%2E');
      const res = await gw.get(`/open/${m}?a=1;access_token=${token}&b=${escaped}`, { headers: { cookie: `theme=dark; access_token=${escaped}` } });
      expect(res.status).toBe(200);
      const hit = upstream.last(m)!;
      const seen = decodeURIComponent(`${hit.url} ${JSON.stringify(hit.headers)}`);
      expect(seen).not.toContain(token);
      expect(seen).toContain('theme=dark');
    }
  });

  it('never forwards a gateway API key, wherever the client put it', async () => {
    // API keys live until revoked; clients of most APIs send theirs as `Authorization: Bearer`. On an
    // `auth: none` route nothing refuses it, so it reached the upstream (X-API-Key alone was dropped).
    const pro = await makeUser(gw, { plan: 'pro' });
    const key = (await gw.post('/api/v1/user/api-token', {}, { headers: bearer(pro.access) })).json.api_token as string;
    const placements: Array<[string, Record<string, string>]> = [
      [`?api_key=${key}`, {}],
      ['', { authorization: `Bearer ${key}` }],
      ['', { authorization: key }],
      ['', { cookie: `api_key=${key}` }],
    ];
    for (const [query, headers] of placements) {
      const m = marker();
      expect((await gw.get(`/open/${m}${query}`, { headers })).status).toBe(200);
      const hit = upstream.last(m)!;
      expect(`${hit.url} ${JSON.stringify(hit.headers)}`, JSON.stringify(headers) + query).not.toContain(key);
    }
  });

  it('drops the scheme and path-prefix claims frameworks trust over what the gateway says', async () => {
    // Rack (Rails) reads X-Forwarded-Ssl: on and X-Forwarded-Scheme before X-Forwarded-Proto; gunicorn
    // trusts X-Forwarded-Protocol and X-Forwarded-Ssl from the gateway's address; Tornado (xheaders)
    // and the much-copied Flask ReverseProxied middleware read X-Scheme, and that middleware cuts
    // X-Script-Name off the path, so `/open/api/reports` would run `/api/reports` there. IIS reads
    // Front-End-Https. The client would choose the scheme (secure cookies, force_ssl, absolute URLs)
    // or the path the application routes, which the gateway says itself (X-Forwarded-Prefix goes too).
    const claims = {
      'X-Forwarded-Ssl': 'on', 'X-Forwarded-Scheme': 'https', 'X-Forwarded-Protocol': 'ssl', 'X-Scheme': 'https', 'Front-End-Https': 'on',
      'X-Script-Name': '/open',
    };
    for (const route of ['/open', '/private']) {
      const m = marker();
      expect((await gw.get(`${route}/${m}`, { headers: { ...claims, ...bearer(user.access) } })).status).toBe(200);
      const received = upstream.last(m)!.headers;
      for (const name of Object.keys(claims)) expect(received[name.toLowerCase()], `${route}: ${name}`).toBeUndefined();
      expect(received['x-forwarded-proto']).toBe('http');
    }
  });

  it('leaves queries and cookies without a gateway token byte for byte as sent', async () => {
    const m = marker();
    const query = `?q=a.b.c&x=%2E%2E&e=caf%C3%A9&flag`;
    await gw.get(`/open/${m}${query}`, { headers: { cookie: 'a=1.2.3; b="x.y.z"' } });
    expect(upstream.last(m)!.url).toBe(`/open/${m}${query}`);
    expect(upstream.last(m)!.headers.cookie).toBe('a=1.2.3; b="x.y.z"');
  });
});

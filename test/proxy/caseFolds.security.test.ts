// Case folds (issue 45, break 2; CONTRACT §26): `/api/v1/prof%c4%b1le` (Turkish dotless ı) matched
// no guarded route and reached the upstream through a public catch-all without identity, while
// Java's equalsIgnoreCase, String.toUpperCase or a Turkish-locale toLowerCase reads it as the guarded
// `/api/v1/profile`. Every such spelling is refused 400 on the proxy, the decisions listener and
// WebSocket upgrades; a non-ASCII path that folds to no other route is served unchanged. The whole
// class of characters is covered by test/routing/caseFolds.test.ts.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { closeSql, describeWithServices, marker, startDecidingGateway, type TestGateway } from '../helpers/gateway.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import { rawExchange } from '../helpers/http.js';
import { opened, refused, startWsUpstream, wsConnect, type WsUpstream } from '../helpers/wsUpstream.js';

const BAD_REQUEST = { error: 'Requête invalide' };

describeWithServices('case folds of guarded paths', () => {
  let upstream: EchoUpstream;
  let ws: WsUpstream;
  let gw: TestGateway;

  beforeAll(async () => {
    upstream = await startEchoUpstream();
    ws = await startWsUpstream();
    gw = await startDecidingGateway({
      upstreams: { app: { url: upstream.url }, live: { url: ws.url } },
      routes: [
        { path: '/api/v1', upstream: 'app', auth: 'none' },
        { path: '/api/v1/profile', upstream: 'app' },
        { path: '/api/v1/billing', upstream: 'app' },
        { path: '/api/v1/keys', upstream: 'app' },
        { path: '/live', upstream: 'live', auth: 'none', websocket: true },
        { path: '/live/profile', upstream: 'live', websocket: true },
      ],
    });
  });
  afterAll(async () => { await gw?.close(); await ws?.close(); await upstream?.close(); await closeSql(); });

  const spellings = (m: string) => [
    `/api/v1/prof%c4%b1le/${m}`, `/api/v1/prof%C4%B1le/${m}`, // ı: Java's equalsIgnoreCase, toUpperCase
    `/api/v1/b%C4%B1ll%C4%B1ng/${m}`, `/api/v1/B%C4%B0LL%C4%B0NG/${m}`, `/api/v1/b%C4%B0ll%C4%B1ng/${m}`, // İ: toLowerCase in Turkish
    `/api/v1/key%C5%BF/${m}`, `/api/v1/%E2%84%AAeys/${m}`, `/API/V1/%E2%84%AAEYS/${m}`, // long ſ, Kelvin K
    `/api/v1/bI%CC%87lling/${m}`, // I + combining dot above: `i` lower-cased in Turkish
    `/api/v1/prof%C4%B1le.json;${m}`, `/api/v1/prof%C4%B1le;${m}?x=1`, // a format suffix (§8), `;params` and a query
  ];

  it('guards the paths as spelled in ASCII', async () => {
    const m = marker();
    expect((await gw.get(`/api/v1/profile/${m}`)).status).toBe(401);
    expect(upstream.count(m)).toBe(0);
  });

  it('refuses each spelling on the proxy with 400, the upstream never reached', async () => {
    const m = marker();
    for (const path of spellings(m)) {
      const res = await gw.get(path);
      expect(res.status, path).toBe(400);
      expect(res.json, path).toEqual(BAD_REQUEST);
    }
    expect(upstream.count(m)).toBe(0);
  });

  it('refuses the characters sent raw as UTF-8 too, with the catalog\'s 400', async () => {
    for (const char of ['ı', 'İ']) {
      const m = marker();
      const request = Buffer.concat([Buffer.from('GET /api/v1/prof'), Buffer.from(char), Buffer.from(`le/${m} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`)]);
      const answer = await rawExchange(gw.url, request, { halfClose: false });
      expect(answer.split('\r\n', 1)[0], char).toBe('HTTP/1.1 400 Bad Request');
      expect(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4))).toEqual(BAD_REQUEST);
      expect(upstream.count(m)).toBe(0);
    }
  });

  it('refuses each spelling on the decisions listener too, by path and by X-Forwarded-Uri', async () => {
    for (const path of spellings(marker())) {
      const byPath = await gw.decide('GET', `/decisions${path}`);
      expect(byPath.status, path).toBe(400);
      expect(byPath.json, path).toEqual(BAD_REQUEST);
      const byHeader = await gw.decide('GET', '/decisions', { headers: { 'x-forwarded-uri': path } });
      expect(byHeader.status, path).toBe(400);
    }
  });

  it('refuses a WebSocket upgrade on such a spelling, the upstream never reached', async () => {
    const m = marker();
    const url = `${gw.url.replace(/^http/, 'ws')}/live/prof%C4%B1le/${m}`;
    const refusal = refused(await wsConnect(url));
    expect(refusal.status).toBe(400);
    expect(refusal.json).toEqual(BAD_REQUEST);
    expect(ws.last(m)).toBeUndefined();
    // A non-ASCII path that folds to no other route opens as any other.
    const n = marker();
    const socket = opened(await wsConnect(`${gw.url.replace(/^http/, 'ws')}/live/caf%C3%A9/${n}`));
    expect(ws.last(n)!.url).toBe(`/live/caf%C3%A9/${n}`);
    socket.ws.close();
  });

  it('serves a non-ASCII path that folds to no other route unchanged, on the proxy and the decisions listener', async () => {
    for (const path of ['/api/v1/caf%C3%A9', '/api/v1/other/prof%C4%B1le', '/api/v1/%C5%81ukasz']) {
      const m = marker();
      const res = await gw.get(`${path}/${m}`);
      expect(res.status, path).toBe(200);
      expect(upstream.last(m)!.path).toBe(`${path}/${m}`);
      expect((await gw.decide('GET', `/decisions${path}/${m}`)).status, path).toBe(200);
    }
  });
});

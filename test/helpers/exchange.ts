// One request through a gateway, its header lines as written, and what each side saw: the
// differential tests' unit (test/proxy/differential.test.ts, directLane.test.ts).
import http from 'node:http';
import type { EchoUpstream } from './echoUpstream.js';
import type { TestGateway } from './gateway.js';

export interface Exchange {
  upstream: { method: string; url: string; rawHeaders: string[]; body: string } | undefined;
  status: number;
  rawHeaders: string[];
  body: string;
}

/** One request with its header lines as written (duplicates, odd spellings), and what each side saw. */
export function exchange(gw: TestGateway, upstream: EchoUpstream, m: string, method: string, path: string, headerPairs: string[], body?: string): Promise<Exchange> {
  const url = new URL(gw.url);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: url.hostname, port: url.port, method, path, headers: ['Host', url.host, ...headerPairs], agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => { text += c; });
      res.on('end', () => {
        const hit = upstream.last(m);
        const id = res.headers['x-request-id'] as string;
        // The request id in place of its value, and no Date (a second may pass between the two).
        const lines = (raw: string[]) => raw.map((v) => (v === id ? '<request id>' : v)).filter((_v, i, all) => !/^date$/i.test(all[i - (i % 2)]!));
        resolve({
          upstream: hit && { method: hit.method, url: hit.url, rawHeaders: lines(hit.rawHeaders), body: hit.body },
          status: res.statusCode ?? 0, rawHeaders: lines(res.rawHeaders), body: text.replaceAll(id, '<request id>'),
        });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

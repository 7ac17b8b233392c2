// A real HTTPS webhook receiver for delivery tests, with a self-signed certificate made by openssl
// in a temporary directory (the gateway trusts it through webhooks.caFile).
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
import https from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';

export interface TestCertificate {
  certFile: string;
  cert: string;
  key: string;
  remove(): void;
}

/** A certificate for localhost, 127.0.0.1 and the extra names given, valid one day. */
export function makeCertificate(extraNames: string[] = []): TestCertificate {
  const dir = mkdtempSync(path.join(tmpdir(), 'gw-webhook-cert-'));
  const keyFile = path.join(dir, 'key.pem');
  const certFile = path.join(dir, 'cert.pem');
  const san = ['IP:127.0.0.1', 'DNS:localhost', ...extraNames.map((n) => `DNS:${n}`)].join(',');
  execFileSync('openssl', [
    'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
    '-subj', '/CN=localhost', '-addext', `subjectAltName=${san}`, '-days', '1',
    '-keyout', keyFile, '-out', certFile,
  ], { stdio: 'ignore' });
  return { certFile, cert: readFileSync(certFile, 'utf8'), key: readFileSync(keyFile, 'utf8'), remove: () => rmSync(dir, { recursive: true, force: true }) };
}

export interface Delivery {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
  json: { type: string; timestamp: string; data: Record<string, unknown> };
}

/** What the receiver answers to the n-th request (0-based): a status, or 'hang' (never answers). */
export type Behaviour = (delivery: Delivery, n: number) => number | 'hang';

export interface Receiver {
  port: number;
  /** https://127.0.0.1:PORT/hook */
  url: string;
  deliveries: Delivery[];
  /** requests received and not answered (hanging) */
  hanging: number;
  behaviour: Behaviour;
  ofType(type: string): Delivery[];
  close(): Promise<void>;
}

export async function startReceiver(cert: TestCertificate, behaviour: Behaviour = () => 200): Promise<Receiver> {
  const sockets = new Set<Socket>();
  const held: ServerResponse[] = [];
  const receiver: Receiver = {
    port: 0, url: '', deliveries: [], hanging: 0, behaviour,
    ofType: (type) => receiver.deliveries.filter((d) => d.json?.type === type),
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  const server = https.createServer({ key: cert.key, cert: cert.cert }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      let json: Delivery['json'];
      try { json = JSON.parse(body); } catch { json = undefined as never; }
      const delivery: Delivery = { path: req.url ?? '/', headers: req.headers, body, json };
      const n = receiver.deliveries.push(delivery) - 1;
      const answer = receiver.behaviour(delivery, n);
      if (answer === 'hang') {
        receiver.hanging++;
        held.push(res);
        res.on('close', () => { receiver.hanging--; });
        return;
      }
      res.writeHead(answer, { 'content-type': 'text/plain' }).end('ok');
    });
  });
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  server.on('secureConnection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  receiver.port = (server.address() as AddressInfo).port;
  receiver.url = `https://127.0.0.1:${receiver.port}/hook`;
  return receiver;
}

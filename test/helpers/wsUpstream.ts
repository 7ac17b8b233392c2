// A real WebSocket upstream (ws): echoes every message back, prefixed with "echo:" for text, and
// records each handshake it accepted (URL, headers, chosen subprotocol) and each close it saw.
// Paths containing "refuse" answer the handshake with 403 and a body; "hello" sends a greeting
// first; "cookie" adds a session cookie and headers of its own to its 101. Over HTTPS with `tls` (requestCert to demand a client certificate).
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import WebSocket, { WebSocketServer } from 'ws';

export interface Handshake {
  url: string;
  headers: http.IncomingHttpHeaders;
  protocol: string;
  clientCn?: string;
}

export interface WsUpstream {
  /** http(s)://127.0.0.1:PORT, as an upstream's url in gateway.yaml */
  url: string;
  handshakes: Handshake[];
  closes: Array<{ url: string; code: number; reason: string }>;
  /** Sockets open on the upstream right now. */
  readonly open: number;
  last(marker: string): Handshake | undefined;
  close(): Promise<void>;
}

export async function startWsUpstream(options: { tls?: https.ServerOptions } = {}): Promise<WsUpstream> {
  const handshakes: Handshake[] = [];
  const closes: WsUpstream['closes'] = [];
  const server = options.tls ? https.createServer(options.tls) : http.createServer();
  // A plain GET on the same path (no upgrade) gets a JSON answer, as an application may serve both.
  server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ plain: true, url: req.url, upgrade: req.headers.upgrade ?? null }));
  });
  const wss = new WebSocketServer({ noServer: true, handleProtocols: (offered) => [...offered].at(-1) ?? false });
  wss.on('headers', (headers, req) => {
    if (req.url?.includes('cookie')) headers.push('Set-Cookie: session=s1; Path=/; HttpOnly', 'Set-Cookie: theme=dark', 'X-Upstream: ws', 'X-Request-Id: upstream-id', 'Keep-Alive: timeout=5');
  });
  server.on('upgrade', (req: http.IncomingMessage, socket, head) => {
    if (req.url?.includes('refuse')) {
      const body = '{"upstream":"refused"}';
      socket.end(`HTTP/1.1 403 Forbidden\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\nx-upstream: ws\r\nconnection: close\r\n\r\n${body}`);
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      const peer = options.tls ? (req.socket as TLSSocket).getPeerCertificate() : undefined;
      handshakes.push({ url: req.url ?? '', headers: req.headers, protocol: ws.protocol, clientCn: peer?.subject ? String(peer.subject.CN) : undefined });
      if (req.url?.includes('hello')) ws.send('hello');
      ws.on('message', (data, isBinary) => ws.send(isBinary ? data : `echo:${data.toString()}`, { binary: isBinary }));
      ws.on('close', (code, reason) => closes.push({ url: req.url ?? '', code, reason: reason.toString() }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const sockets = () => [...wss.clients].filter((c) => c.readyState === WebSocket.OPEN).length;
  return {
    url: `${options.tls ? 'https' : 'http'}://127.0.0.1:${port}`,
    handshakes,
    closes,
    get open() { return sockets(); },
    last: (marker) => handshakes.filter((h) => h.url.includes(marker)).at(-1),
    close: async () => {
      for (const client of wss.clients) client.terminate();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A client's socket as a test reads it: messages in order, and how it closed. */
export interface TestSocket {
  ws: WebSocket;
  /** The headers of the 101 that opened it. */
  headers: http.IncomingHttpHeaders;
  /** The next message received (text as a string, binary as a Buffer). */
  next(): Promise<string | Buffer>;
  closed: Promise<{ code: number; reason: string }>;
}

/** How `socket` closed, failing the test if it has not closed within `ms`. */
export async function closedWithin(socket: TestSocket, ms: number): Promise<{ code: number; reason: string }> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => { timer = setTimeout(() => reject(new Error(`the socket was not closed within ${ms} ms`)), Math.max(0, ms)); });
  try {
    return await Promise.race([socket.closed, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** An answer other than the upgrade: what the client's handshake got instead. */
export interface Refusal {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
  json: any; // eslint-disable-line @typescript-eslint/no-explicit-any -- tests read arbitrary bodies
}

/** Opens a WebSocket (ws:// or wss://) as a client would; resolves with the socket or the refusal. */
export function wsConnect(url: string, options: { headers?: Record<string, string>; protocols?: string[]; ca?: string } = {}): Promise<TestSocket | Refusal> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, options.protocols ?? [], { headers: options.headers, ca: options.ca, perMessageDeflate: false });
    const queue: Array<string | Buffer> = [];
    const waiting: Array<(m: string | Buffer) => void> = [];
    ws.on('message', (data, isBinary) => {
      const message = isBinary ? (data as Buffer) : data.toString();
      const wake = waiting.shift();
      if (wake) wake(message);
      else queue.push(message);
    });
    const closed = new Promise<{ code: number; reason: string }>((done) => ws.once('close', (code, reason) => done({ code, reason: reason.toString() })));
    let headers: http.IncomingHttpHeaders = {};
    ws.once('upgrade', (res) => { headers = res.headers; });
    ws.once('open', () => resolve({
      ws, closed, headers,
      next: () => (queue.length ? Promise.resolve(queue.shift()!) : new Promise((wake) => waiting.push(wake))),
    }));
    ws.once('unexpected-response', (_req, res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (c: string) => { body += c; });
      res.on('end', () => {
        let json: unknown;
        try { json = JSON.parse(body); } catch { json = undefined; }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body, json });
        ws.terminate();
      });
    });
    ws.on('error', (err) => { if (ws.readyState === WebSocket.CONNECTING) reject(err); });
  });
}

export function opened(outcome: TestSocket | Refusal): TestSocket {
  if ('status' in outcome) throw new Error(`expected the upgrade, got ${outcome.status} ${outcome.body}`);
  return outcome;
}

export function refused(outcome: TestSocket | Refusal): Refusal {
  if (!('status' in outcome)) {
    outcome.ws.terminate();
    throw new Error('expected a refusal, the upgrade was accepted');
  }
  return outcome;
}

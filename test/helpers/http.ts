// A plain node:http client: exact bytes and headers (fetch would refuse Connection, Host, …).
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';

export interface HttpResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
  json: any; // eslint-disable-line @typescript-eslint/no-explicit-any -- tests read arbitrary bodies
}

/** A response read as bytes (streamRequest). */
export interface RawResponse { status: number; headers: http.IncomingHttpHeaders; body: Buffer }

export interface RequestOptions {
  headers?: Record<string, string | string[]>;
  json?: unknown;
  body?: string | Buffer;
  timeout?: number;
  /** A connection of its own, closed after: for requests the gateway may answer by closing it. */
  freshConnection?: boolean;
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
// For gateways listening on HTTPS (server.tls): the tests about TLS check certificates themselves;
// this one only carries the requests that set a test up (registering users, logging in).
const tlsAgent = new https.Agent({ keepAlive: true, maxSockets: 256, rejectUnauthorized: false });

export function request(baseUrl: string, method: string, path: string, options: RequestOptions = {}): Promise<HttpResponse> {
  const url = new URL(baseUrl);
  const headers: Record<string, string | string[]> = { ...options.headers };
  let body = options.body;
  if (options.json !== undefined) {
    body = JSON.stringify(options.json);
    if (!Object.keys(headers).some((h) => h.toLowerCase() === 'content-type')) headers['content-type'] = 'application/json';
  }
  // Node frames a body with chunked encoding only for methods that usually have one: a DELETE or an
  // OPTIONS would go out unframed, and the server would read no body at all.
  const framed = Object.keys(headers).some((h) => ['content-length', 'transfer-encoding'].includes(h.toLowerCase()));
  if (body !== undefined && !framed && ['DELETE', 'OPTIONS'].includes(method.toUpperCase())) headers['content-length'] = String(Buffer.byteLength(body));
  // An unframed GET or HEAD body was never the request's: on a kept-alive connection the server
  // reads its bytes as the next request, answers that garbage 400 and closes, and the agent's next
  // request on the connection meets a reset. Not sent; a test of bodies on a GET frames its own.
  if (body !== undefined && !framed && ['GET', 'HEAD'].includes(method.toUpperCase())) body = undefined;
  return new Promise((resolve, reject) => {
    const secure = url.protocol === 'https:';
    const send = secure ? https.request : http.request;
    const shared = secure ? tlsAgent : agent;
    const requestOptions = {
      host: url.hostname, port: url.port, method, path, headers, agent: options.freshConnection ? false : shared, rejectUnauthorized: !secure, timeout: options.timeout ?? 20_000,
    };
    const req = send(requestOptions, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let json: unknown;
        try { json = JSON.parse(text); } catch { json = undefined; }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json });
      });
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`${method} ${path}: timed out`)));
    req.on('error', reject);
    req.end(body);
  });
}

/**
 * A request whose body is written in chunks, on a connection of its own (Transfer-Encoding:
 * chunked unless a content-length is given). Resolves with the response even when the gateway
 * stops reading the body early.
 */
export function streamRequest(baseUrl: string, method: string, path: string, chunks: Buffer[], headers: Record<string, string> = {}): Promise<RawResponse> {
  const url = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    let responded = false;
    const req = http.request({ host: url.hostname, port: url.port, method, path, headers, agent: false }, (res) => {
      responded = true;
      const parts: Buffer[] = [];
      res.on('data', (c: Buffer) => parts.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(parts) }));
      res.on('error', reject);
    });
    req.setTimeout(20_000, () => req.destroy(new Error('timed out')));
    // Once the gateway has answered (413), it may close the socket under our remaining writes.
    req.on('error', (err) => { if (!responded) reject(err); });
    let i = 0;
    const writeNext = () => {
      while (i < chunks.length) {
        if (req.destroyed) return;
        if (!req.write(chunks[i++]!)) { req.once('drain', writeNext); return; }
      }
      req.end();
    };
    writeNext();
  });
}

/** What came back on a raw connection, and whether the gateway ended it (false: the wait ran out). */
export interface RawAnswer {
  text: string;
  ended: boolean;
}

/**
 * Writes bytes on a fresh connection, half-closes it (unless halfClose is false: the gateway takes a
 * client's FIN during a proxied request as the client going away), and returns whatever comes back
 * before the gateway closes the connection or timeoutMs runs out.
 */
export function rawAnswer(baseUrl: string, bytes: Buffer, { halfClose = true, timeoutMs = 3000 } = {}): Promise<RawAnswer> {
  const url = new URL(baseUrl);
  return new Promise((resolve) => {
    const socket = net.connect(Number(url.port), url.hostname);
    const chunks: Buffer[] = [];
    const done = (ended: boolean) => () => {
      clearTimeout(timer);
      socket.destroy();
      resolve({ text: Buffer.concat(chunks).toString('utf8'), ended });
    };
    const timer = setTimeout(done(false), timeoutMs);
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', done(true));
    socket.on('close', done(true));
    socket.on('connect', () => (halfClose ? socket.end(bytes) : socket.write(bytes)));
  });
}

/** rawAnswer's text alone. */
export async function rawExchange(baseUrl: string, bytes: Buffer, options: { halfClose?: boolean; timeoutMs?: number } = {}): Promise<string> {
  return (await rawAnswer(baseUrl, bytes, options)).text;
}


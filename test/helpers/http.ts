// A plain node:http client: exact bytes and headers (fetch would refuse Connection, Host, …).
import http from 'node:http';
import net from 'node:net';

export interface HttpResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
  json: any; // eslint-disable-line @typescript-eslint/no-explicit-any -- tests read arbitrary bodies
}

export interface RequestOptions {
  headers?: Record<string, string | string[]>;
  json?: unknown;
  body?: string | Buffer;
  timeout?: number;
  /** A connection of its own, closed after: for requests the gateway may answer by closing it. */
  freshConnection?: boolean;
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });

export function request(baseUrl: string, method: string, path: string, options: RequestOptions = {}): Promise<HttpResponse> {
  const url = new URL(baseUrl);
  const headers: Record<string, string | string[]> = { ...options.headers };
  let body = options.body;
  if (options.json !== undefined) {
    body = JSON.stringify(options.json);
    if (!Object.keys(headers).some((h) => h.toLowerCase() === 'content-type')) headers['content-type'] = 'application/json';
  }
  return new Promise((resolve, reject) => {
    const req = http.request({ host: url.hostname, port: url.port, method, path, headers, agent: options.freshConnection ? false : agent, timeout: options.timeout ?? 20_000 }, (res) => {
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
 * Writes bytes on a fresh connection, half-closes it (unless halfClose is false: the gateway takes a
 * client's FIN during a proxied request as the client going away), and returns whatever comes back.
 */
export function rawExchange(baseUrl: string, bytes: Buffer, { halfClose = true } = {}): Promise<string> {
  const url = new URL(baseUrl);
  return new Promise((resolve) => {
    const socket = net.connect(Number(url.port), url.hostname);
    const chunks: Buffer[] = [];
    const done = () => { clearTimeout(timer); socket.destroy(); resolve(Buffer.concat(chunks).toString('utf8')); };
    const timer = setTimeout(done, 3000);
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', done);
    socket.on('close', done);
    socket.on('connect', () => (halfClose ? socket.end(bytes) : socket.write(bytes)));
  });
}

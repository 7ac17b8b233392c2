// RFC 9112 §3.2: a server MUST answer 400 to an HTTP/1.1 request without Host, with more than
// one, or with one that is not a host (`evil:1@127.0.0.1`). Node's own check (requireHostHeader,
// turned off in listenerOptions) answers with an empty body; Node keeps the first of two. HTTP/2
// says it in :authority (RFC 9113 §8.3.1), which goes upstream as X-Forwarded-Host all the same.
import type { FastifyRequest } from 'fastify';
import { isValidHost } from '../http.js';

/** Whether the request's Host (or :authority) is refused. */
export function refusesHost(request: FastifyRequest): boolean {
  const { host, ':authority': authority } = request.headers as { host?: string; ':authority'?: string };
  if (host === undefined && authority === undefined) return request.raw.httpVersion === '1.1';
  return (host !== undefined && !isValidHost(host)) || (authority !== undefined && !isValidHost(authority)) || hostHeaders(request.raw.rawHeaders) > 1;
}

function hostHeaders(raw: string[]): number {
  let n = 0;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    if (name.length === 4 && name.toLowerCase() === 'host') n++;
  }
  return n;
}

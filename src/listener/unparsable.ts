// Answers from the catalog to what never reaches a route: HTTP that cannot be parsed, a body that
// breaks framing, bytes after a request (smuggling), an Expect that is not 100-continue.
import { STATUS_CODES, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { DEFAULT_STYLE, errorAnswer, type ErrorCode, type ErrorStyle } from '../errors/index.js';

/**
 * HTTP that cannot even be parsed (bad syntax, headers over Node's limit, headers sent too slowly)
 * never reaches a route: answer it from the catalog too, then drop the connection, which cannot
 * be trusted to carry another request.
 */
export function clientErrorHandler(this: FastifyInstance, err: NodeJS.ErrnoException, socket: Duplex): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const inFlight = (socket as Duplex & { _httpMessage?: ServerResponse | null })._httpMessage;
  // The request being answered never finished arriving (the client closed or broke the connection
  // mid-body, or took longer than requestTimeout): it can never complete, and its upstream request
  // would wait for the rest of the body for ever. Let go of both.
  if (inFlight && !inFlight.req.complete) {
    // A body that breaks HTTP's own framing (a malformed chunk) is the client's fault: it gets the
    // catalog's 400 when nothing has been answered yet, then the connection goes. (A client that
    // closed mid-body, HPE_INVALID_EOF_STATE, is gone: nobody to answer.)
    if (err.code?.startsWith('HPE_') && err.code !== 'HPE_INVALID_EOF_STATE' && !inFlight.headersSent) {
      writeRaw(inFlight, 'badRequest', this.errorStyle ?? DEFAULT_STYLE);
      inFlight.once('finish', () => socket.destroy());
      return;
    }
    socket.destroy();
    return;
  }
  // Bytes after a request that declared no body (a pipelined or smuggled "request"): the earlier
  // request on this connection is still being answered. Let that answer go out alone, then close.
  if (inFlight) {
    if (!inFlight.headersSent) inFlight.setHeader('connection', 'close');
    inFlight.once('close', () => socket.destroy());
    return;
  }
  const code: ErrorCode = err.code === 'HPE_HEADER_OVERFLOW' ? 'headersTooLarge' : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 'requestTimeout' : 'badRequest';
  this.log.debug({ code: err.code }, 'unparsable request');
  // The request's headers were not read: the configured language, never problem details.
  const answer = errorAnswer(this.errorStyle ?? DEFAULT_STYLE, undefined, { code });
  const { status } = answer;
  const body = JSON.stringify(answer.body);
  // A response to HEAD has no body, even this one (the request line is in the bytes that failed).
  const head = (err as { rawPacket?: Buffer }).rawPacket?.subarray(0, 5).toString('latin1') === 'HEAD ';
  if (socket.writable) {
    socket.write(`HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: ${answer.contentType}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${head ? '' : body}`);
  }
  socket.destroy();
}

/** An answer from the catalog written on the raw response, for requests fastify never routes. */
export function writeRaw(res: ServerResponse, code: ErrorCode, style: ErrorStyle): void {
  const answer = errorAnswer(style, res.req.headers, { code });
  const body = JSON.stringify(answer.body);
  const headers = { 'content-type': answer.contentType, 'content-length': Buffer.byteLength(body), vary: answer.vary };
  // HTTP/2 has no Connection header (RFC 9113 §8.2.2): the stream ends, the connection stays.
  res.writeHead(answer.status, res.req.httpVersionMajor >= 2 ? headers : { ...headers, connection: 'close' });
  res.end(res.req.method === 'HEAD' ? undefined : body);
}

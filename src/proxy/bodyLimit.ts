// server.bodyLimit on proxied requests: bodies are streamed to the upstream untouched, never
// parsed, so only their size is checked: a declared Content-Length at once (413 before anything
// is sent), a chunked body as it streams (the upstream request is cut when it outgrows the limit).
import { finished, Transform, type TransformCallback } from 'node:stream';
import type { FastifyInstance } from 'fastify';

export const BODY_TOO_LARGE = 'FST_ERR_CTP_BODY_TOO_LARGE';

/** Replaces the scope's body parsers with a size-checking pass-through (server.bodyLimit: a start-up setting). */
export function streamBodiesWithin(app: FastifyInstance, bodyLimit: number): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (request, payload, done) => {
    const declared = Number(request.headers['content-length']);
    if (declared > bodyLimit) {
      done(bodyTooLarge(), undefined);
      return;
    }
    if (Number.isFinite(declared)) {
      done(null, payload);
      return;
    }
    const limited = sizeLimit(bodyLimit);
    // pipe() does not pass an abort on: a client gone mid-body must end the upstream request too.
    finished(payload, (err) => { if (err) limited.destroy(err); });
    done(null, payload.pipe(limited));
  });
}

function bodyTooLarge(): Error {
  return Object.assign(new Error('body too large'), { statusCode: 413, code: BODY_TOO_LARGE });
}

/** Counts a chunked body as it streams and fails it past the limit (no Content-Length to check). */
function sizeLimit(limit: number): Transform {
  let seen = 0;
  return new Transform({
    transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback) {
      seen += chunk.length;
      if (seen > limit) callback(bodyTooLarge());
      else callback(null, chunk);
    },
  });
}

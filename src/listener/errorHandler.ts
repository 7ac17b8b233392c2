// What a thrown error becomes on every listener: a catalog error as itself, Postgres away as 503
// (logged once per interval, with a count), a value Postgres cannot hold as 400, framework 4xx as
// the catalog's 400, anything else 500 with its stack in the log and nothing of it in the answer.
import type { FastifyError, FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { ERRORS, GatewayError, sendError } from '../errors/index.js';
import { isRefusedInput, isUnavailable } from '../storage/database/index.js';
import { failureLog } from '../telemetry/logThrottle.js';

/** Returns what its onResponse hook does with an answer's status, for answers fastify does not see (proxy/directLane.ts). */
export function registerErrorHandler(app: FastifyInstance): (status: number) => void {
  // While Postgres is away every request that needs it fails: one line per interval says so, with
  // a count, instead of a line with a stack per request (issue 18: 9,349 lines in a 5 s outage).
  const storageFailures = failureLog(app.log as Logger, 'storage unavailable: requests that need Postgres are answered 503', { recoveredMessage: 'storage answers again' });
  const overloaded = failureLog(app.log as Logger, 'request refused with a server error');
  const afterAnswer = (status: number): void => {
    if (status < 500) storageFailures.recovered();
  };
  app.addHook('onResponse', (_request, reply, done) => {
    afterAnswer(reply.statusCode);
    done();
  });
  app.setErrorHandler((error: FastifyError, request, reply) => {
    if (error instanceof GatewayError) {
      if (error.code === 'rateLimited') request.log.info({ ip: request.ip }, 'auth rate limit reached');
      else if (ERRORS[error.code].status >= 500) overloaded.failed(error, { reqId: request.id, code: error.code });
      return sendError(reply, error.code, error.extra);
    }
    if (isUnavailable(error)) {
      storageFailures.failed(error, { reqId: request.id, url: request.url });
      return sendError(reply, 'storageUnavailable');
    }
    // A value Postgres cannot hold (a NUL in text) that a check missed: the client's request, not
    // a fault of ours, so no 500; warned, so that the missing check is found (CONTRACT §26).
    if (isRefusedInput(error)) {
      request.log.warn({ err: error, url: request.routeOptions.url }, 'request refused by Postgres: a value it cannot hold');
      return sendError(reply, 'badRequest');
    }
    if (error.code === 'FST_ERR_CTP_BODY_TOO_LARGE' || error.statusCode === 413) return sendError(reply, 'payloadTooLarge');
    if (error.statusCode && error.statusCode >= 400 && error.statusCode < 500) {
      request.log.info({ err: error }, 'bad request');
      return sendError(reply, 'badRequest');
    }
    request.log.error({ err: error }, 'unexpected error');
    return sendError(reply, 'internal');
  });
  return afterAnswer;
}

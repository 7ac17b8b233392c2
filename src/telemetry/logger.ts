// pino with redaction: credentials never reach the logs, whatever a handler logs by mistake.
import { LogController, type FastifyBaseLogger, type FastifyReply, type FastifyRequest } from 'fastify';
import { destination, pino, type Bindings, type ChildLoggerOptions, type DestinationStream, type Level, type Logger } from 'pino';

export const REDACT_PATHS = [
  'req.headers.authorization', 'req.headers["x-api-key"]', 'req.headers.cookie', 'res.headers["set-cookie"]',
  'headers.authorization', 'headers["x-api-key"]', 'headers.cookie',
  '*.password', '*.password_hash', '*.refresh_token', '*.access_token', '*.api_token', '*.secret', '*.token',
  'password', 'refresh_token', 'access_token', 'api_token', 'secret', 'token',
];

const CENSOR = '[redacted]';
// pino's wildcard paths (`*.password`) cost ~10 µs on every line, request lines included (each
// top-level key and the message go through a cloning redactor), which was a large share of the
// proxy's hot path. The same protection, done here: the named keys one level down are censored
// with a few own-property checks, and pino keeps only the cheap fixed paths.
const NESTED_SECRETS = REDACT_PATHS.filter((p) => p.startsWith('*.')).map((p) => p.slice(2));
const FIXED_PATHS = REDACT_PATHS.filter((p) => !p.startsWith('*.'));

/** `obj` itself when no value one level down holds a secret key, else a copy with them censored. */
export function censorNested(obj: Record<string, unknown>): Record<string, unknown> {
  let out: Record<string, unknown> | undefined;
  for (const key in obj) {
    const value = obj[key];
    if (value === null || typeof value !== 'object' || Array.isArray(value)) continue;
    let copy: Record<string, unknown> | undefined;
    for (const name of NESTED_SECRETS) {
      if (!Object.prototype.hasOwnProperty.call(value, name)) continue;
      // An Error's message and stack are not own enumerable: keep them in the censored copy.
      copy ??= value instanceof Error ? { ...value, type: value.name, message: value.message, stack: value.stack } : { ...value };
      copy[name] = CENSOR;
    }
    if (copy) {
      out ??= { ...obj };
      out[key] = copy;
    }
  }
  return out ?? obj;
}

export function createLogger(level = 'info', destination?: DestinationStream): Logger {
  const logger = pino({ level, redact: { paths: FIXED_PATHS, censor: CENSOR }, formatters: { log: censorNested } }, destination);
  // pino runs no formatter on a child's bindings: censor them on the way in. Children inherit
  // this method from the root, so grandchildren are covered too.
  const child = logger.child as unknown as MakeChild;
  const makeChild: MakeChild = function (bindings, options) {
    return child.call(this, censorNested(bindings), options);
  };
  logger.child = function (this: Logger, bindings: Bindings, options?: ChildLoggerOptions) {
    // fastify's request.log: made lazily (LazyChild). Asked for here, by fastify's own child
    // logger factory, rather than through a childLoggerFactory of ours: fastify checks every
    // logger such a factory returns, seven method lookups and a filter on each request (1 % of
    // a proxied request's instructions).
    if (isRequestBinding(bindings) && !hasOptions(options)) return new LazyChild(this, bindings, makeChild) as unknown as Logger;
    return makeChild.call(this, bindings, options);
  } as unknown as Logger['child'];
  return logger;
}

type MakeChild = (this: Logger, bindings: Bindings, options?: ChildLoggerOptions) => Logger;

/** The bindings fastify gives each request's logger: its id alone, under fastify's default label. */
function isRequestBinding(bindings: Bindings): boolean {
  let keys = 0;
  for (const _ in bindings) keys++;
  return keys === 1 && typeof bindings.reqId === 'string';
}

function hasOptions(options: ChildLoggerOptions | undefined): boolean {
  for (const _ in options) return true;
  return false;
}

/**
 * Standard output for a long-running process: lines are written without waiting, and those logged
 * while a write is under way go out together in the next one. A synchronous write per line (pino's
 * default) cost about a tenth of a refused request's CPU, one system call per denial. Lines still
 * buffered are written before the process exits (pino flushes its destinations on exit).
 */
export function asyncStdout(): DestinationStream {
  return destination({ dest: 1, sync: false });
}

/**
 * Request lines: one per request (method, url, status, time and request id), written when it
 * completes, at debug level; a request that failed is logged at error level. fastify's default
 * (two info lines per request) was the largest per-request cost after the proxying itself (~30 µs
 * of CPU, `npm run bench`). At info, the log keeps what an operator acts on: every denial with
 * its reason and route, upstream failures, errors, lifecycle; traffic itself is in /metrics.
 */
export class AccessLog extends LogController {
  override incomingRequest(): void {
    // Folded into the completion line.
  }

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    if (this.isLogDisabled(request)) return;
    if (error) reply.log.error({ req: loggedRequest(request), res: reply, err: error, responseTime: reply.elapsedTime }, 'request errored');
    else reply.log.debug({ req: loggedRequest(request), res: reply, responseTime: reply.elapsedTime }, 'request completed');
  }
}

// A token in a URL: `?access_token=` (RFC 6750 §2.3, how browsers authenticate a WebSocket), an
// OAuth authorization `?code=` (an identity provider's redirect to the callback, CONTRACT §15), or a
// JWT in any other parameter. Its value is logged as CENSOR.
const TOKEN_IN_QUERY = /(?<=[?&](?:access_token|code)=)[^&]*|(?<=[?&][^=&]*=)eyJ[\w-]*\.[\w-]*\.[\w-]*/gi;

/**
 * The request as the access line shows it (fastify's req serializer reads these fields), with
 * tokens in the query censored. The common request, without them, is passed as it is.
 */
export function loggedRequest<R extends Pick<FastifyRequest, 'url' | 'method' | 'host' | 'socket' | 'headers'> & { ip?: string | undefined }>(request: R): R | Record<string, unknown> {
  const q = request.url.indexOf('?');
  if (q === -1) return request;
  const url = request.url.slice(0, q) + request.url.slice(q).replace(TOKEN_IN_QUERY, CENSOR);
  if (url === request.url) return request;
  return { method: request.method, url, host: request.host, ip: request.ip, socket: request.socket, headers: request.headers };
}

/**
 * request.log without a pino child built for every request. A child serializes its bindings (the
 * request id) and sets up its methods when made (a few µs, and garbage), yet at info level a
 * request that goes through logs nothing. So the child is made on the first line written at an
 * enabled level; until then, calls below the level cost a check.
 */
class LazyChild implements FastifyBaseLogger {
  private made: FastifyBaseLogger | undefined;

  constructor(private readonly parent: Logger, private readonly bindings: Bindings, private readonly makeChild: MakeChild) {}

  private get real(): FastifyBaseLogger {
    return (this.made ??= this.makeChild.call(this.parent, this.bindings) as unknown as FastifyBaseLogger);
  }

  private enabled(level: Level): boolean {
    return this.made ? (this.made as unknown as Logger).isLevelEnabled(level) : this.parent.isLevelEnabled(level);
  }

  get level(): string {
    return (this.made ?? this.parent).level;
  }

  set level(level: string) {
    this.real.level = level;
  }

  // Methods on the prototype, not per-instance closures: the point is to allocate next to nothing.
  fatal(...args: unknown[]): void { this.write('fatal', args); }
  error(...args: unknown[]): void { this.write('error', args); }
  warn(...args: unknown[]): void { this.write('warn', args); }
  info(...args: unknown[]): void { this.write('info', args); }
  debug(...args: unknown[]): void { this.write('debug', args); }
  trace(...args: unknown[]): void { this.write('trace', args); }
  silent(): void {}

  private write(level: Level, args: unknown[]): void {
    if (!this.enabled(level)) return;
    // A line with fields (most are: a denial's route and reason) is written by the parent with the
    // bindings as its first fields, the same line a child writes, without making the child: that
    // was a third of the cost of a denial's line, which a flood of refused requests pays each time.
    const first = args[0];
    if (!this.made && isPlainObject(first)) {
      args[0] = { ...this.bindings, ...first };
      (this.parent[level] as (...a: unknown[]) => void).apply(this.parent, args);
      return;
    }
    const real = this.real;
    (real[level] as (...a: unknown[]) => void).apply(real, args);
  }

  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.real.child(bindings, options);
  }
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && Object.getPrototypeOf(value) === Object.prototype;
}

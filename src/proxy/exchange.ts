// What forwarding reads of an allowed request and writes to its client (forwarder.ts, relay.ts):
// fastify's request and reply, or the direct lane's (directLane.ts), which serves a plain proxied
// request without fastify. Structural: fastify's satisfy them as they are.
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyBaseLogger } from 'fastify';
import type { ErrorCode } from '../errors/index.js';
import type { RequestContext } from '../live/requestContext.js';
import type { RequestTrace } from '../telemetry/tracing.js';

/** What forwarding reads of an allowed request: fastify's request, or the direct lane's (directLane.ts). */
export interface ProxiedRequest {
  readonly context: RequestContext;
  readonly headers: IncomingHttpHeaders;
  readonly id: string;
  readonly socket: Socket;
  /** `http` or `https`, or X-Forwarded-Proto's last entry behind a trusted proxy (fastify's request.protocol). */
  readonly protocol: string;
  /** Host, or X-Forwarded-Host's last entry behind a trusted proxy (fastify's request.host). */
  readonly host: string;
  readonly log: FastifyBaseLogger;
  readonly trace: RequestTrace | undefined;
  readonly corsCovered: boolean;
  readonly raw: IncomingMessage;
  readonly body: unknown;
  gatewayRoute: string;
}

/**
 * The client's side of a relayed exchange: fastify's reply, or the direct lane's (directLane.ts),
 * which serves a plain proxied request without fastify's.
 */
export interface ProxiedReply {
  readonly raw: ServerResponse;
  readonly request: { readonly raw: IncomingMessage };
  /** The answer's headers went out (or the exchange was taken over). */
  readonly sent: boolean;
  /** The headers the gateway set for the answer (x-request-id, CORS, Connection while draining), as a fresh object. */
  getHeaders(): Record<string, unknown>;
  /** From here on the response is the relay's. */
  hijack(): unknown;
  /** The relay ended the response with the upstream's whole answer (the direct lane tallies it then; fastify's onResponse sees fastify's). */
  relayed?(): void;
  /** Answers a catalog error itself (the direct lane's); fastify's reply has none, and errors/index.ts's sendError answers on it. */
  answerError?(code: ErrorCode): void;
}

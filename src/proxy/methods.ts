// The methods a proxied route takes: every one Node parses, as the public listener's proxy and the
// decisions listener (which answers for a proxy in front) see them all.
import { METHODS } from 'node:http';
import type { FastifyInstance } from 'fastify';

/**
 * Lets routes of `app` take every method Node parses, not only fastify's usual ones, so that TRACE
 * or PROPFIND get the catalog's 405 (or 404) rather than a bare not-found. CONNECT never reaches
 * fastify: Node hands it to 'connect'.
 */
export function acceptEveryMethod(app: FastifyInstance): void {
  for (const method of METHODS) {
    if (method !== 'CONNECT' && !app.supportedMethods.includes(method)) app.addHttpMethod(method);
  }
}

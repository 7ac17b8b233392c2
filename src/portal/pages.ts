// The portal's pages (CONTRACT §30): GET {path} and every GET under it but {path}api/ answer the
// file of that name from portal/ (files.ts) when there is one, else portal/index.html: each page of
// the single-page application is a URL a browser can bookmark and reload. {path}logo is the
// product's logo, with a CSP of its own (guard.ts). Nothing else is served under {path}.
import { readFileSync } from 'node:fs';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { PortalConfig } from '../config/schema/portal.js';
import { sendError } from '../errors/index.js';
import type { EndpointSchema } from '../openapi.js';
import { LOGO_CSP } from './guard.js';
import { portalFile, type PortalFile } from './files.js';

const INDEX = 'index.html';
// The wildcard routes below need none: the OpenAPI document leaves every `…/*` route out (openapi.ts).
const PAGE_DOC = { summary: 'The customer portal\'s pages (docs/portal.md)', hide: true } satisfies EndpointSchema & { hide: boolean };

/** Text files are sent gzipped to a client that accepts it. */
function send(request: FastifyRequest, reply: FastifyReply, file: PortalFile): FastifyReply {
  // A hashed name never changes content; any other name is checked again each time (a new release replaces it).
  reply.type(file.type).header('cache-control', file.immutable ? 'public, max-age=31536000, immutable' : 'no-cache');
  if (!file.gzip) return reply.send(file.body);
  reply.header('vary', 'Accept-Encoding');
  if (!/\bgzip\b/.test(String(request.headers['accept-encoding']))) return reply.send(file.body);
  return reply.header('content-encoding', 'gzip').send(file.gzip);
}

/** The logo file, read at start (config/files.ts checked it: PNG or SVG, under 100 KB). */
function readLogo(portal: PortalConfig): PortalFile | undefined {
  const logo = portal.product.logo;
  return logo ? portalFile(readFileSync(logo), logo) : undefined;
}

export function pageRoutes(scope: FastifyInstance, portal: PortalConfig, files: ReadonlyMap<string, PortalFile>): void {
  const { path } = portal;
  const logo = readLogo(portal);
  const page = (request: FastifyRequest, reply: FastifyReply) => {
    const index = files.get(INDEX);
    return index ? send(request, reply, index) : sendError(reply, 'routeNotFound');
  };
  const notAllowed = (reply: FastifyReply) => sendError(reply.header('allow', 'GET, HEAD'), 'methodNotAllowed');

  // /portal → /portal/: the pages' relative URLs are read from the folder's path.
  scope.get(path.slice(0, -1), { schema: PAGE_DOC }, (request, reply) => reply.redirect(`${path}${request.url.slice(path.length - 1)}`, 308));
  scope.get(path, { schema: PAGE_DOC }, page);
  scope.get(`${path}logo`, { schema: PAGE_DOC }, (request, reply) => (logo ? send(request, reply.header('content-security-policy', LOGO_CSP), logo) : sendError(reply, 'routeNotFound')));
  scope.all(`${path}*`, (request, reply) => {
    if (request.method !== 'GET' && request.method !== 'HEAD') return notAllowed(reply);
    const name = (request.params as { '*': string })['*'];
    const file = files.get(name);
    if (file) return send(request, reply, file);
    // A name with an extension is an asset: a missing one is not a page (a script must never get HTML).
    return /\.[A-Za-z0-9]+$/.test(name) ? sendError(reply, 'routeNotFound') : page(request, reply);
  });
  // Under {path}api/ only the API's own endpoints: anything else is JSON's 404, never a page.
  scope.all(`${path}api/*`, (_request, reply) => sendError(reply, 'routeNotFound'));
}

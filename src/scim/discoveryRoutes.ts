// GET ServiceProviderConfig, ResourceTypes and Schemas (RFC 7644 §4), and the answer to any other
// path under /scim/v2/orgs/{id}/: a SCIM 404, once the token passed (access.ts runs first).
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { callerOf } from './access.js';
import { listOf, resourceTypes, schemas, serviceProviderConfig } from './discovery.js';
import { notFound, scimError, sendScim } from './errors.js';

/** The base of this organization's SCIM API, as locations name it. */
export const baseOf = (request: FastifyRequest) => `/scim/v2/orgs/${callerOf(request).orgId}`;

const tags = ['scim'];
const security = [{ scimToken: [] }];
const anyObject = { type: 'object', additionalProperties: true };
const doc = (summary: string) => ({ tags, security, summary, response: { 200: anyObject } });

export async function discoveryRoutes(app: FastifyInstance): Promise<void> {
  app.get('/ServiceProviderConfig', { schema: doc('SCIM: what the service provider supports (patch, filter up to 100 results; no bulk, sort, etag, password change)') },
    async (request, reply) => sendScim(reply, serviceProviderConfig(baseOf(request))));
  app.get('/ResourceTypes', { schema: doc('SCIM: the resource types, User and Group') }, async (request, reply) => sendScim(reply, listOf(resourceTypes(baseOf(request)))));
  app.get('/ResourceTypes/:name', { schema: doc('SCIM: one resource type') }, async (request, reply) => {
    const found = resourceTypes(baseOf(request)).find((t) => t.id === (request.params as { name: string }).name);
    return sendScim(reply, found ?? notFound('Resource type'));
  });
  app.get('/Schemas', { schema: doc('SCIM: the User and Group schemas, with the attributes kept') }, async (request, reply) => sendScim(reply, listOf(schemas(baseOf(request)))));
  app.get('/Schemas/:id', { schema: doc('SCIM: one schema') }, async (request, reply) => {
    const found = schemas(baseOf(request)).find((s) => s.id === (request.params as { id: string }).id);
    return sendScim(reply, found ?? notFound('Schema'));
  });
  // Every other path and method under the organization's base: a SCIM answer, never the proxy's.
  app.all('/*', async (request) => scimError(404, `No SCIM endpoint ${request.method} ${request.url.split('?')[0]}`));
}

// The OpenAPI fragments of the public listener's own endpoints that are not given beside their
// handlers (health, keys, the catalog, auth/ and user/), found by method and path as each route is
// registered (../openapi.ts). Issue 48 moves each beside its handler; until then they are here.
import { type EndpointSchema } from './shapes.js';

/** Each endpoint's schema, by method and path (with its prefix). */
export const PUBLIC_ENDPOINTS: Record<string, EndpointSchema> = {
};

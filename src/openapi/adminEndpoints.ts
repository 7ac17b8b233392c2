// The OpenAPI fragments of the admin listener's endpoints that are not given beside their handlers,
// found by method and path as each route is registered (../openapi.ts).
import { type EndpointSchema } from './shapes.js';

/** Each endpoint's schema, by method and path (with its prefix). */
export const ADMIN_ENDPOINTS: Record<string, EndpointSchema> = {
};

// The OpenAPI 3.1 description of the gateway's own HTTP APIs (public and admin listeners), made by
// @fastify/swagger from the routes as they are registered. The schemas here document; they never
// validate nor serialize: the handlers read their input the way the spec says (a body that is
// not JSON reads as {}) and answer with the catalog's French errors, which a schema validator
// would replace with its own. Each route file gives its routes their schemas beside their handlers
// (STYLE 27: the route options' `schema`, with a summary, made with the parts exported here,
// openapi/shapes.ts's); this module only assembles them. A route without one fails the build of
// the document (test/docs/openapi.test.ts), so a new endpoint cannot go undocumented.
import swagger from '@fastify/swagger';
import type { FastifyInstance, FastifySchema } from 'fastify';
import { ERRORS, type ErrorCode as ErrorName } from './errors/index.js';
import { errorOf } from './openapi/shapes.js';
export {
  adminUser, bearer, bearerOnly, credentials, errorOf, errors, identity, limits, message, mfaChallenge, passkey, session, tokenPair, userId, withNewPair, type EndpointSchema,
} from './openapi/shapes.js';

/**
 * The optional settings the document is made with (merged into the configuration), so that it
 * describes the endpoints they switch on too.
 */
export const DOCUMENTED_OPTIONS = {
  mail: {
    resetUrl: 'https://app.example.com/reset?token={token}', verifyUrl: 'https://app.example.com/verify?token={token}', invitationUrl: 'https://app.example.com/join?token={token}',
  },
  organizations: { enabled: true, sso: {} },
  auth: {
    magicLink: { url: 'https://app.example.com/magic?token={token}' },
    passkeys: { rpId: 'example.com', rpName: 'Example', origins: ['https://app.example.com', 'https://portal.example.com'] },
    oidc: {
      publicUrl: 'https://gw.example.com',
      returnTo: ['https://app.example.com/'],
      providers: { google: { issuer: 'https://accounts.google.com', clientId: 'documented-client-id', clientSecret: 'documented-client-secret' } },
    },
  },
  // The return page posts the exchange with the gw_oidc cookie (auth.oidc.bindToBrowser, on for one site).
  cors: { origins: ['https://app.example.com'], credentials: true },
  // The customer portal's {path}api/ endpoints (CONTRACT §30).
  portal: { enabled: true, publicUrl: 'https://portal.example.com', product: { name: 'Example' } },
  // GET /api/v1/errors exists with codes on (CONTRACT §20).
  errors: { codes: true },
  billing: {
    stripe: {
      secretKey: 'rk_test_documented', webhookSecrets: ['whsec_documented'], prices: { price_documented: 'premium' },
      successUrl: 'https://app.example.com/billing?done=1', cancelUrl: 'https://app.example.com/billing',
    },
  },
};

/** Routes that are not endpoints of an API: the proxy's catch-all, the decisions listener's, the console's pages. */
const UNDOCUMENTED = /^\*$|\/\*$|^\/console\//;

export class UndocumentedRoute extends Error {}

/**
 * Makes `app` describe its routes: registers @fastify/swagger and hands each own route its schema.
 * Call before any route is registered.
 */
export async function documentRoutes(app: FastifyInstance): Promise<void> {
  // Documentation only (see above).
  app.setValidatorCompiler(() => () => true);
  app.setSerializerCompiler(() => (data) => JSON.stringify(data));
  app.addHook('onRoute', (route) => {
    if (UNDOCUMENTED.test(route.url)) {
      route.schema = { ...route.schema, hide: true } as FastifySchema;
      return;
    }
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    if (methods.every((m) => m === 'HEAD')) return;
    const key = `${methods.find((m) => m !== 'HEAD')} ${route.url}`;
    // The schema given beside the handler, with its summary; a copy per route, as a listener's hooks add to it.
    if (!(route.schema as { summary?: string } | undefined)?.summary) throw new UndocumentedRoute(`${key} has no schema: give its route one, with a summary, beside its handler`);
    route.schema = { ...route.schema };
    // Every admin endpoint declares a role (admin/access.ts): an operator below it is refused (CONTRACT §24).
    if (route.url.startsWith('/admin/v1/')) route.schema = withRefusal(route.schema, 'roleInsufficient');
  });
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: { title: 'auth-gateway', version: '1', description: 'The gateway\'s own endpoints. Routes declared in gateway.yaml are the upstreams\' (docs/routing-and-headers.md).' },
      components: {
        securitySchemes: {
          bearer: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' },
          apiKey: { type: 'apiKey', in: 'header', name: 'X-API-Key' },
          adminKey: { type: 'http', scheme: 'bearer', description: 'admin.apiKey' },
          scimToken: { type: 'http', scheme: 'bearer', description: 'A SCIM token of the organization of the path (CONTRACT §31)' },
        },
      },
    },
  });
}

type Responses = Record<string, { description?: string }>;

/**
 * `schema` with `code`'s answer among its documented responses (its message added to the
 * description of a status already there): for a refusal a hook adds to many routes at once.
 */
export function withRefusal(schema: FastifySchema | undefined, name: ErrorName): FastifySchema | undefined {
  const response = (schema as { response?: Responses } | undefined)?.response;
  if (!schema || !response) return schema;
  const { status, code } = ERRORS[name];
  const existing = response[status] as ReturnType<typeof errorOf> | undefined;
  const names = existing?.properties?.code?.enum ? Object.keys(ERRORS).filter((n) => existing.properties.code.enum.includes(ERRORS[n as ErrorName].code)) as ErrorName[] : [];
  if (names.some((n) => ERRORS[n].code === code)) return schema;
  return { ...schema, response: { ...response, [status]: errorOf([...names, name]) } } as FastifySchema;
}

type OpenApiDocument = { paths?: Record<string, unknown>; [key: string]: unknown };

/** One document for both listeners: the public one's, with the admin listener's paths added. */
export function combinedDocument(publicDoc: OpenApiDocument, adminDoc: OpenApiDocument): OpenApiDocument {
  return { ...publicDoc, paths: { ...publicDoc.paths, ...adminDoc.paths } };
}

// The portal's sessions (CONTRACT §30): under {path}api/, the sign-in endpoints of
// /api/v1/auth again (auth/index.ts, PORTAL_SESSION_ENDPOINTS), their very handlers, taking the
// same bodies and giving the same answers, except that the refresh token never travels in a body:
// it is set, rotated and cleared in the portal's cookie, HttpOnly (no script of the page, injected
// or not, reads it), SameSite=Strict and host-only, which no other endpoint reads. Access tokens
// stay in the page's memory. The CSRF rule and the headers are guard.ts's.
import type { FastifyInstance, FastifyReply, FastifyRequest, FastifySchema, RouteHandlerMethod } from 'fastify';
import type { PortalSessionEndpoint, SessionEndpoint } from '../auth/index.js';
import { PORTAL_COOKIE, PORTAL_HOST_COOKIE } from '../credentials/shapes.js';
import { cookieValue } from '../http.js';

/** The endpoints whose namesake reads the refresh token from the body: here it comes from the cookie. */
const FROM_COOKIE: ReadonlySet<PortalSessionEndpoint> = new Set(['refresh', 'logout']);

/** The portal's session cookie, as publicUrl's scheme allows it. */
export class PortalCookie {
  readonly name: string;
  private readonly attributes: string;

  /** `maxAgeS`: the refresh token's lifetime (auth.refreshTokenTtl), which the cookie outlives by nothing. */
  constructor(publicUrl: string, private readonly maxAgeS: number) {
    // Over http (allowed on loopback only) a browser refuses both Secure and the __Host- prefix.
    const secure = publicUrl.startsWith('https:');
    this.name = secure ? PORTAL_HOST_COOKIE : PORTAL_COOKIE;
    // No Domain: host-only, never sent to a sibling host where an upstream may run.
    this.attributes = `HttpOnly;${secure ? ' Secure;' : ''} SameSite=Strict; Path=/`;
  }

  value(request: FastifyRequest): string {
    return cookieValue(request.headers, this.name) ?? '';
  }

  set(reply: FastifyReply, token: string): void {
    reply.header('set-cookie', `${this.name}=${token}; ${this.attributes}; Max-Age=${this.maxAgeS}`);
  }

  clear(reply: FastifyReply): void {
    reply.header('set-cookie', `${this.name}=; ${this.attributes}; Max-Age=0`);
  }
}

type Schema = FastifySchema & { summary?: string; description?: string; body?: unknown; response?: Record<string, unknown> };

/** The namesake's OpenAPI fragment, told as the portal's: no refresh token in a body, either way. */
function portalSchema(name: PortalSessionEndpoint, schema: Schema | undefined): Schema {
  const { body, response = {}, ...rest } = schema ?? {};
  const pair = response[200] as { properties?: Record<string, unknown>; required?: string[] } | undefined;
  const answer = pair?.properties?.refresh_token
    ? { ...pair, required: pair.required?.filter((p) => p !== 'refresh_token'), properties: Object.fromEntries(Object.entries(pair.properties).filter(([p]) => p !== 'refresh_token')) }
    : pair;
  return {
    ...rest,
    tags: ['portal'],
    summary: `Portal: ${rest.summary ?? name}, as POST /api/v1/auth/${name}; the refresh token in the portal's cookie (X-Gateway-Portal: 1, Origin publicUrl)`,
    ...(FROM_COOKIE.has(name) || body === undefined ? {} : { body }),
    response: { ...response, ...(answer ? { 200: answer } : {}) },
  };
}

/**
 * The pair's refresh token moved from the answer to the cookie: every endpoint that answers a pair
 * (a sign-in, a second factor, a rotation, a password change) does so through here.
 */
function tokenToCookie(cookie: PortalCookie) {
  return async function refreshTokenToCookie(_request: FastifyRequest, reply: FastifyReply, payload: unknown): Promise<unknown> {
    // Only an object with a refresh token has one (an error, a message or a string answer has none).
    if (typeof (payload as { refresh_token?: unknown } | null)?.refresh_token !== 'string') return payload;
    const { refresh_token: token, ...rest } = payload as { refresh_token: string };
    cookie.set(reply, token);
    return rest;
  };
}

export interface SessionRoutesDeps {
  /** `{path}api/`. */
  api: string;
  cookie: PortalCookie;
  endpoints: ReadonlyMap<PortalSessionEndpoint, SessionEndpoint>;
}

/** Each registered namesake again under `api` (a feature off has no namesake, and so no portal endpoint: 404). */
export function sessionRoutes(scope: FastifyInstance, { api, cookie, endpoints }: SessionRoutesDeps): void {
  scope.addHook('preSerialization', tokenToCookie(cookie));
  for (const [name, namesake] of endpoints) {
    const handler = namesake.handler as RouteHandlerMethod;
    const options = { schema: portalSchema(name, namesake.schema as Schema | undefined), ...(namesake.preHandler ? { preHandler: namesake.preHandler } : {}) };
    scope.post(`${api}${name}`, options, function portalSession(request, reply) {
      if (FROM_COOKIE.has(name)) {
        // The token is the cookie's, whatever the body holds: a token in a body is never read here.
        request.body = { refresh_token: cookie.value(request) };
        // Signing out clears the cookie whatever the token was (logout always answers 200).
        if (name === 'logout') cookie.clear(reply);
      }
      return handler.call(this, request, reply);
    });
  }
}

// `auth-gateway/verify`: what an upstream imports to trust the identity headers only when the
// gateway vouches for them. Without it, anyone who reaches the upstream another way (a
// misconfigured network, a pod next door) can send `x-user-id: 1` and be user 1.
// It checks x-gateway-assertion (CONTRACT §3) against the gateway's published keys and that the
// identity headers say the same as the assertion. Standalone on purpose: jose (and fastify-plugin
// for the plugin) only, nothing else from the gateway.
import type { IncomingHttpHeaders } from 'node:http';
import type { FastifyPluginAsync } from 'fastify';
import fp from 'fastify-plugin';
import { createLocalJWKSet, createRemoteJWKSet, decodeProtectedHeader, errors, jwtVerify, type JSONWebKeySet, type JWTPayload, type JWTVerifyGetKey } from 'jose';

export const ASSERTION_HEADER = 'x-gateway-assertion';
export const ASSERTION_TYP = 'gateway-assertion+jwt';
/** Where the gateway publishes the assertion keys, and only them (never the access-token key). */
export const ASSERTION_KEYS_PATH = '/.well-known/gateway-assertion-keys.json';
/** The `iss` the gateway uses when auth.jwt.issuer is not set. */
export const DEFAULT_ISSUER = 'auth-gateway';
/** What the plugin answers (the gateway's own error texts are French too). */
export const ASSERTION_REJECTED_MESSAGE = 'Assertion de passerelle absente ou invalide';
export const KEYS_UNAVAILABLE_MESSAGE = 'Service temporairement indisponible';

// The gateway signs assertions valid 60 s; a longer-lived one did not come from it.
const MAX_LIFETIME_SEC = 60;
const DEFAULT_TOLERANCE_SEC = 5;
const VERIFIED_CACHE_SIZE = 10_000;

export interface GatewayIdentity {
  userId: number;
  plan: string;
  email: string;
  authMethod: string;
  /** An API key's request (CONTRACT §21): the key's id, and its scopes (null: its owner's every right). */
  keyId?: number;
  scopes?: string[] | null;
}

export interface VerifyOptions {
  /** The gateway's ASSERTION_KEYS_PATH (`https://gateway/.well-known/gateway-assertion-keys.json`); fetched once, cached, refetched on an unknown kid. Never the access-token key set (/.well-known/jwks.json). */
  jwksUrl?: string | URL;
  /** A key set given directly (no fetching). */
  jwks?: JSONWebKeySet;
  /** This upstream's name in the gateway's `upstreams:`; assertions for other upstreams are refused. */
  audience: string;
  /** The gateway's auth.jwt.issuer; default 'auth-gateway'. */
  issuer?: string;
  /** Clock skew allowed on exp and iat, in seconds; default 5. */
  clockToleranceSec?: number;
  /** Least time between two fetches caused by unknown kids (ms); default 30 s. */
  jwksCooldownMs?: number;
  /** Age after which the cached key set is fetched again (ms); default 5 min. */
  jwksCacheMaxAgeMs?: number;
}

/**
 * missing: no assertion; invalid: bad signature, unknown key, expired, other audience or issuer,
 * malformed; mismatch: identity headers that disagree with it; keys-unavailable: the key set
 * could not be fetched (the fault is not the caller's).
 */
export type AssertionFailure = 'missing' | 'invalid' | 'mismatch' | 'keys-unavailable';

export class GatewayAssertionError extends Error {
  constructor(readonly reason: AssertionFailure, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'GatewayAssertionError';
  }
}

/** Node's req.headers, a fetch Headers, or any record of header names to values. */
export type HeaderSource = IncomingHttpHeaders | Headers | Record<string, string | string[] | undefined>;

export type AssertionVerifier = (headers: HeaderSource) => Promise<GatewayIdentity>;

// Token-side failures: the request is refused (401). Anything else (network, a JWKS that does not
// parse) is the key set being unavailable (503), so a gateway outage is not mistaken for an attack.
const TOKEN_ERRORS = new Set<string>([
  errors.JWSInvalid.code, errors.JWTInvalid.code, errors.JWSSignatureVerificationFailed.code,
  errors.JWTExpired.code, errors.JWTClaimValidationFailed.code, errors.JOSEAlgNotAllowed.code,
  errors.JOSENotSupported.code, errors.JWKSNoMatchingKey.code, errors.JWKSMultipleMatchingKeys.code,
]);

// One fetched key set per URL for the whole process, whichever verifier asks.
const remoteKeySets = new Map<string, JWTVerifyGetKey>();

function keySet(options: VerifyOptions): JWTVerifyGetKey {
  if (options.jwks) return createLocalJWKSet(options.jwks);
  if (!options.jwksUrl) throw new TypeError('verifyGatewayAssertion: jwksUrl or jwks is required');
  const url = new URL(String(options.jwksUrl));
  const cooldownDuration = options.jwksCooldownMs ?? 30_000;
  const cacheMaxAge = options.jwksCacheMaxAgeMs ?? 300_000;
  const id = `${url.href} ${cooldownDuration} ${cacheMaxAge}`;
  let set = remoteKeySets.get(id);
  if (!set) {
    // jose refetches on an unknown kid at most once per cooldown: a flood of forged kids costs the
    // gateway one JWKS request per cooldown, not one per request.
    set = createRemoteJWKSet(url, { cooldownDuration, cacheMaxAge, timeoutDuration: 5000 });
    remoteKeySets.set(id, set);
  }
  return set;
}

function header(headers: HeaderSource, name: string): string | undefined {
  if (typeof (headers as Headers).get === 'function') return (headers as Headers).get(name) ?? undefined;
  const record = headers as Record<string, string | string[] | undefined>;
  let value = record[name];
  if (value === undefined) {
    const key = Object.keys(record).find((k) => k.toLowerCase() === name);
    value = key === undefined ? undefined : record[key];
  }
  // Repeated headers never equal one claim: joined as Node joins them.
  return Array.isArray(value) ? value.join(', ') : value;
}

function identityOf(payload: JWTPayload): GatewayIdentity {
  const { sub, plan, email, auth_method: authMethod, iat, exp, key_id: keyId, scopes } = payload;
  if (typeof sub !== 'string' || !DECIMAL_ID.test(sub) || typeof plan !== 'string' || typeof email !== 'string'
    || typeof authMethod !== 'string' || typeof iat !== 'number' || typeof exp !== 'number' || exp - iat > MAX_LIFETIME_SEC) {
    throw new GatewayAssertionError('invalid', 'assertion claims are malformed');
  }
  const identity: GatewayIdentity = { userId: Number(sub), plan, email, authMethod };
  if (keyId === undefined) return identity;
  const scopesFit = scopes === null || (Array.isArray(scopes) && scopes.every((s) => typeof s === 'string'));
  if (typeof keyId !== 'string' || !DECIMAL_ID.test(keyId) || !scopesFit) throw new GatewayAssertionError('invalid', 'assertion claims are malformed');
  return { ...identity, keyId: Number(keyId), scopes: scopes as string[] | null };
}

const DECIMAL_ID = /^[1-9]\d{0,15}$/;

/** A verifier bound to its options, with a small cache of assertions already verified. */
export function createAssertionVerifier(options: VerifyOptions): AssertionVerifier {
  const getKey = keySet(options);
  const tolerance = options.clockToleranceSec ?? DEFAULT_TOLERANCE_SEC;
  const checks = {
    algorithms: ['EdDSA'], // pinned: no `none`, no HMAC keyed with the public key
    typ: ASSERTION_TYP,
    audience: options.audience,
    issuer: options.issuer ?? DEFAULT_ISSUER,
    clockTolerance: tolerance,
    maxTokenAge: MAX_LIFETIME_SEC,
    requiredClaims: ['sub', 'iat', 'exp'],
  };
  // The gateway reuses an assertion for about 30 s, so most requests carry one already verified:
  // skip the signature check for it (the bytes are identical) but still check exp and the headers.
  const verified = new Map<string, { identity: GatewayIdentity; exp: number }>();

  async function verifyToken(token: string): Promise<{ identity: GatewayIdentity; exp: number }> {
    let kid: unknown;
    try {
      kid = decodeProtectedHeader(token).kid;
    } catch (cause) {
      throw new GatewayAssertionError('invalid', 'assertion is not a compact JWS', { cause });
    }
    // Without a kid the key set cannot pick one key; the gateway always sends it.
    if (typeof kid !== 'string' || !kid) throw new GatewayAssertionError('invalid', 'assertion has no kid');
    let payload: JWTPayload;
    try {
      payload = (await jwtVerify(token, getKey, checks)).payload;
    } catch (cause) {
      if (cause instanceof errors.JOSEError && TOKEN_ERRORS.has(cause.code)) {
        throw new GatewayAssertionError('invalid', `assertion refused: ${cause.code}`, { cause });
      }
      throw new GatewayAssertionError('keys-unavailable', 'the gateway key set could not be fetched', { cause });
    }
    return { identity: identityOf(payload), exp: payload.exp! };
  }

  return async (headers) => {
    const token = header(headers, ASSERTION_HEADER);
    if (!token) throw new GatewayAssertionError('missing', 'no x-gateway-assertion header');
    const now = Date.now() / 1000;
    let entry = verified.get(token);
    if (entry && entry.exp + tolerance <= now) {
      verified.delete(token);
      throw new GatewayAssertionError('invalid', `assertion refused: ${errors.JWTExpired.code}`);
    }
    if (!entry) {
      entry = await verifyToken(token);
      if (verified.size >= VERIFIED_CACHE_SIZE) verified.delete(verified.keys().next().value!);
      verified.set(token, entry);
    }
    const { identity } = entry;
    // The assertion is only proof if the headers the upstream reads are the ones it signs.
    const email = header(headers, 'x-user-email');
    const method = header(headers, 'x-auth-method');
    // x-user-key-id is the key's id exactly when the assertion names a key, else absent or empty
    // (a decisions proxy may copy the empty value the gateway answers for a bearer request).
    const keyId = header(headers, 'x-user-key-id');
    const keyFits = identity.keyId === undefined ? !keyId : keyId === String(identity.keyId);
    if (header(headers, 'x-user-id') !== String(identity.userId) || header(headers, 'x-user-plan') !== identity.plan
      || (email !== undefined && email !== identity.email) || (method !== undefined && method !== identity.authMethod) || !keyFits) {
      throw new GatewayAssertionError('mismatch', 'identity headers disagree with the assertion');
    }
    return { ...identity };
  };
}

const verifiers = new WeakMap<VerifyOptions, AssertionVerifier>();

/**
 * The verified identity of a request that came through the gateway, or a GatewayAssertionError.
 * Pass the same options object each time to keep its cache of verified assertions.
 */
export function verifyGatewayAssertion(headers: HeaderSource, options: VerifyOptions): Promise<GatewayIdentity> {
  let verifier = verifiers.get(options);
  if (!verifier) {
    verifier = createAssertionVerifier(options);
    verifiers.set(options, verifier);
  }
  return verifier(headers);
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by gatewayAssertionPlugin: who the gateway says sent this request. */
    gatewayIdentity: GatewayIdentity | null;
  }
}

export type GatewayAssertionPluginOptions = VerifyOptions;

const plugin: FastifyPluginAsync<GatewayAssertionPluginOptions> = async (app, options) => {
  const verify = createAssertionVerifier(options);
  app.decorateRequest('gatewayIdentity', null);
  app.addHook('onRequest', async (request, reply) => {
    try {
      request.gatewayIdentity = await verify(request.headers);
    } catch (err) {
      if (!(err instanceof GatewayAssertionError)) throw err;
      const unavailable = err.reason === 'keys-unavailable';
      request.log[unavailable ? 'error' : 'info']({ reason: err.reason, detail: err.message }, 'gateway assertion refused');
      return reply.code(unavailable ? 503 : 401).type('application/json; charset=utf-8')
        .send({ error: unavailable ? KEYS_UNAVAILABLE_MESSAGE : ASSERTION_REJECTED_MESSAGE });
    }
  });
};

/**
 * Refuses every request in its scope without a valid assertion: 401 with a JSON error body
 * (503 when the key set cannot be fetched), and sets request.gatewayIdentity on the others.
 * Register it inside a plugin to protect only that plugin's routes.
 */
export const gatewayAssertionPlugin = fp(plugin, { name: 'gateway-assertion', fastify: '5.x' });

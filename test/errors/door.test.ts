// The errors room's door (src/errors/index.ts) in one small fastify app: a 401's challenge (RFC 6750
// §3), Vary, the texts' parameters (the spec's noun, the plural), the names telemetry gives two split
// codes, and the errors thrown where a handler cannot go on.
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  bearerChallenge, dailyLimitParams, DEFAULT_STYLE, errorAnswer, errorBody, GatewayError, passwordTooShortParams, planUnknownParams, sendDenial, sendError,
  SPEC_UPGRADE_URL, StorageUnavailableError, successBody, telemetryName, type ErrorStyle,
} from '../../src/errors/index.js';

const NEGOTIATING: ErrorStyle = { ...DEFAULT_STYLE, codes: true, language: 'negotiate', languages: ['fr', 'en'] };

describe('the errors door', () => {
  let app: FastifyInstance;
  beforeAll(async () => {
    app = Fastify();
    app.decorate('errorStyle', NEGOTIATING);
    app.get('/missing', async (_request, reply) => sendError(reply, 'tokenMissing'));
    app.get('/challenged', async (_request, reply) => sendDenial(reply, { code: 'tokenInvalid', headers: bearerChallenge(true) }));
    app.get('/forbidden', async (_request, reply) => sendError(reply, 'roleInsufficient', { required_roles: ['admin'] }));
    app.get('/cors', async (_request, reply) => sendError(reply.header('vary', 'Origin'), 'tokenMissing'));
    app.get('/welcome', async (_request, reply) => successBody(reply, 'loggedOut', { id: 1 }));
    await app.ready();
  });
  afterAll(() => app.close());

  it('a 401 says how to authenticate: the plain challenge, or the denial\'s own when it has one (error="invalid_token")', async () => {
    const plain = await app.inject({ url: '/missing' });
    expect([plain.statusCode, plain.headers['www-authenticate']]).toEqual([401, 'Bearer realm="gateway"']);
    const refused = await app.inject({ url: '/challenged' });
    expect([refused.statusCode, refused.headers['www-authenticate']]).toEqual([401, 'Bearer realm="gateway", error="invalid_token"']);
    const forbidden = await app.inject({ url: '/forbidden' });
    expect(forbidden.statusCode).toBe(403);
    expect(forbidden.headers['www-authenticate']).toBeUndefined();
    expect(forbidden.json()).toEqual({ error: 'Rôle insuffisant', code: 'role_insufficient', required_roles: ['admin'] });
  });

  it('Vary names what the answer depends on, after what CORS put there; a success negotiates its language too', async () => {
    expect((await app.inject({ url: '/missing' })).headers.vary).toBe('Accept, Accept-Language');
    expect((await app.inject({ url: '/cors' })).headers.vary).toBe('Origin, Accept, Accept-Language');
    const welcome = await app.inject({ url: '/welcome', headers: { 'accept-language': 'en' } });
    expect([welcome.headers.vary, welcome.json()]).toEqual(['Accept-Language', { message: 'Logged out', id: 1 }]);
    expect(errorAnswer(DEFAULT_STYLE, undefined, { code: 'tokenMissing' }).vary).toBe('Accept');
    // The spec's style (one language): a success's body varies with nothing.
    const plain = Fastify();
    plain.get('/welcome', async (_request, reply) => successBody(reply, 'loggedOut'));
    const answered = await plain.inject({ url: '/welcome', headers: { 'accept-language': 'en' } });
    expect([answered.headers.vary, answered.json()]).toEqual([undefined, { message: 'Déconnexion réussie' }]);
    await plain.close();
  });

  it('the texts\' parameters: the spec\'s noun in both languages and its plural, the configured minimum, the plans listed', () => {
    const daily = (limit: number, language: 'fr' | 'en') => errorAnswer({ ...NEGOTIATING, language }, undefined, { code: 'dailyLimitReached', params: dailyLimitParams('free', limit) }).body.error;
    expect([daily(1, 'fr'), daily(100, 'fr')]).toEqual(['Limite quotidienne atteinte (plan free: 1 course/jour)', 'Limite quotidienne atteinte (plan free: 100 courses/jour)']);
    expect([daily(1, 'en'), daily(2, 'en')]).toEqual(['Daily limit reached (plan free: 1 request/day)', 'Daily limit reached (plan free: 2 requests/day)']);
    const short = (min: number, language: 'fr' | 'en') => errorAnswer({ ...NEGOTIATING, language }, undefined, { code: 'passwordTooShort', params: passwordTooShortParams(min) }).body.error;
    expect([short(1, 'fr'), short(12, 'fr'), short(1, 'en'), short(12, 'en')]).toEqual([
      'Mot de passe trop court (min 1 caractère)', 'Mot de passe trop court (min 12 caractères)', 'Password too short (min 1 character)', 'Password too short (min 12 characters)',
    ]);
    expect(errorAnswer({ ...NEGOTIATING, language: 'en' }, undefined, { code: 'planUnknown', params: planUnknownParams(['free', 'pro']) }).body.error).toBe('Unknown plan (free or pro)');
    expect(SPEC_UPGRADE_URL).toBe('/api/v1/subscription/upgrade');
  });

  it('the spec\'s body outside a listener; telemetry keeps the names alerts match for two split codes', () => {
    expect(errorBody('tokenMissing', { hint: 1 })).toEqual({ error: 'Token invalide ou expiré', hint: 1 });
    expect(['tokenMissing', 'userInactive', 'tokenInvalid', 'userNotFound', 'roleInsufficient'].map((c) => telemetryName(c as Parameters<typeof telemetryName>[0])))
      .toEqual(['tokenInvalid', 'userNotFound', 'tokenInvalid', 'userNotFound', 'roleInsufficient']);
  });

  it('what a handler throws: a GatewayError carries its code and the French text; a storage fault names its cause', () => {
    const thrown = new GatewayError('roleInsufficient', { required_roles: ['owner'] });
    expect([thrown.name, thrown.message, thrown.code, thrown.extra]).toEqual(['GatewayError', 'Rôle insuffisant', 'roleInsufficient', { required_roles: ['owner'] }]);
    const cause = new Error('connect ECONNREFUSED 127.0.0.1:5432');
    const fault = new StorageUnavailableError(cause);
    expect([fault.name, fault.message, fault.cause]).toEqual(['StorageUnavailableError', 'storage unavailable: connect ECONNREFUSED 127.0.0.1:5432', cause]);
    expect(new StorageUnavailableError('timeout').message).toBe('storage unavailable: timeout');
  });
});

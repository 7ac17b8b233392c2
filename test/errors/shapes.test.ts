// Issue 49 as an operator and a client see it: docs/errors.md's example run as written, the
// spec's body untouched by default, the catalog served, success messages in English, the
// decisions listener's header, and the operator's message files checked and used.
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkFiles } from '../../src/config/files.js';
import { CATALOG } from '../../src/errors/catalog.js';
import {
  bearer, closeSql, configProblems, describeWithServices, makeUser, newEmail, newPassword, startDecidingGateway, startTestGateway, testConfig, testConfigFromFile,
  testConfigFromYaml, type TestGateway,
} from '../helpers/gateway.js';
import { docsExample } from '../helpers/docs.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';

const EN = { 'accept-language': 'en-US,en;q=0.9' };
const PROBLEM = { accept: 'application/problem+json' };

describeWithServices('errors any client can read (issue 49)', () => {
  let upstream: EchoUpstream;
  let documented: TestGateway;
  let plain: TestGateway;
  let dir: string;

  beforeAll(async () => {
    upstream = await startEchoUpstream();
    documented = await startTestGateway(testConfigFromYaml(docsExample('errors', 'errors'), { WEATHER_URL: upstream.url }));
    plain = await startTestGateway(testConfig({ upstreams: { app: { url: upstream.url } }, routes: [{ path: '/forecast', upstream: 'app', dailyLimit: true }] }));
    dir = mkdtempSync(path.join(os.tmpdir(), 'gateway-messages-'));
  });
  afterAll(async () => {
    await documented?.close();
    await plain?.close();
    await upstream?.close();
    rmSync(dir, { recursive: true, force: true });
    await closeSql();
  });

  it('the documented example: the quota refusal in the client\'s language, with its code, noun and upgrade URL', async () => {
    const user = await makeUser(documented);
    expect((await documented.get('/forecast', { headers: bearer(user.access) })).status).toBe(200);
    const en = await documented.get('/forecast', { headers: { ...bearer(user.access), ...EN } });
    expect(en.status).toBe(429);
    expect(en.json).toEqual({ error: 'Daily limit reached (plan free: 1 forecast/day)', code: 'daily_limit_reached', upgrade_url: 'https://weather.example.com/pricing' });
    expect(en.headers.vary).toBe('Accept, Accept-Language');
    expect(en.headers['retry-after']).toMatch(/^\d+$/);
    // French keeps the spec's noun: usageNoun names English only.
    const fr = await documented.get('/forecast', { headers: bearer(user.access) });
    expect(fr.json).toEqual({ error: 'Limite quotidienne atteinte (plan free: 1 course/jour)', code: 'daily_limit_reached', upgrade_url: 'https://weather.example.com/pricing' });
    const problem = await documented.get('/forecast', { headers: { ...bearer(user.access), ...PROBLEM, 'accept-language': 'en' } });
    expect(problem.headers['content-type']).toBe('application/problem+json; charset=utf-8');
    expect(problem.json).toEqual({
      type: 'urn:gateway:error:daily_limit_reached', title: 'Daily limit reached', status: 429, code: 'daily_limit_reached',
      detail: 'Daily limit reached (plan free: 1 forecast/day)', error: 'Daily limit reached (plan free: 1 forecast/day)', upgrade_url: 'https://weather.example.com/pricing',
    });
    expect(upstream.hits.filter((h) => h.path === '/forecast')).toHaveLength(1);
  });

  it('by default: the spec\'s body byte for byte, whatever the client asks in Accept-Language, and no catalog endpoint', async () => {
    const res = await plain.get('/forecast', { headers: EN });
    expect(res.status).toBe(401);
    expect(res.text).toBe('{"error":"Token invalide ou expiré"}');
    expect(res.headers.vary).toBe('Accept');
    const register = await plain.post('/api/v1/auth/register', { email: newEmail(), password: newPassword() }, { headers: EN });
    expect(register.json.message).toBe('Utilisateur créé');
    const catalog = await plain.get('/api/v1/errors');
    expect(catalog.status).toBe(404);
    // Problem details are the client's to ask for, even here.
    const problem = await plain.get('/forecast', { headers: PROBLEM });
    expect(problem.json).toMatchObject({ type: 'urn:gateway:error:token_missing', title: 'Token manquant', status: 401, code: 'token_missing', error: 'Token invalide ou expiré' });
  });

  it('media types are compared without regard to case: APPLICATION/PROBLEM+JSON asks for problem details (issue 68)', async () => {
    for (const accept of ['APPLICATION/PROBLEM+JSON', 'Application/Problem+Json; Q=1', 'application/JSON;q=0.5, Application/Problem+JSON']) {
      const res = await plain.get('/forecast', { headers: { accept } });
      expect(res.headers['content-type'], accept).toBe('application/problem+json; charset=utf-8');
      expect(res.json, accept).toMatchObject({ type: 'urn:gateway:error:token_missing', status: 401, error: 'Token invalide ou expiré' });
    }
    const ranked = await plain.get('/forecast', { headers: { accept: 'APPLICATION/JSON, APPLICATION/PROBLEM+JSON;Q=0.5' } });
    expect(ranked.headers['content-type']).toBe('application/json; charset=utf-8');
  });

  it('a browser\'s Accept (*/* and application/*) or problem details ranked below JSON keep the plain body', async () => {
    for (const accept of ['*/*', 'application/*', 'application/json, application/problem+json;q=0.5', 'application/problem+json;q=0', 'text/html,application/xhtml+xml,*/*;q=0.8']) {
      const res = await plain.get('/forecast', { headers: { accept } });
      expect(res.headers['content-type'], accept).toBe('application/json; charset=utf-8');
      expect(res.text, accept).toBe('{"error":"Token invalide ou expiré"}');
    }
  });

  it('serves the catalog, public and cacheable, and success messages in the negotiated language', async () => {
    const res = await documented.get('/api/v1/errors');
    expect(res.status).toBe(200);
    expect(res.headers['cache-control']).toBe('public, max-age=3600');
    expect(res.json).toHaveLength(Object.keys(CATALOG).length);
    expect(res.json).toContainEqual({ code: 'token_missing', name: 'tokenMissing', status: 401, messages: { fr: 'Token invalide ou expiré', en: 'No token was sent' }, fields: [] });
    expect(res.json).toContainEqual({
      code: 'plan_insufficient', name: 'planInsufficient', status: 403, messages: { fr: 'Plan insuffisant', en: 'Insufficient plan' }, fields: ['required', 'current_plan', 'upgrade_url'],
    });
    const register = await documented.post('/api/v1/auth/register', { email: newEmail(), password: newPassword() }, { headers: EN });
    expect(register.status).toBe(201);
    expect(register.json).toMatchObject({ message: 'User created' });
    expect(register.headers.vary).toMatch(/Accept-Language/);
  });

  it('a route on the catalog\'s path is a configuration error while the catalog is served, and fine otherwise', () => {
    const base = 'upstreams: { app: { url: "http://127.0.0.1:1" } }\nroutes:\n  - { path: /api/v1/errors/mine, upstream: app }\n';
    expect(configProblems(`errors: { codes: true }\n${base}`).join('\n')).toMatch(/\/api\/v1\/errors\/mine is the gateway's own endpoint \/api\/v1\/errors/);
    expect(configProblems(base)).toEqual([]);
  });

  describe('the decisions listener', () => {
    let deciding: TestGateway;
    beforeAll(async () => {
      deciding = await startDecidingGateway({ errors: { codes: true }, upstreams: { app: { url: upstream.url } }, routes: [{ path: '/orders', upstream: 'app' }] });
    });
    afterAll(() => deciding?.close());

    it('repeats the answer\'s body, problem details included, in x-gateway-error', async () => {
      const res = await deciding.decide('GET', '/decisions', { headers: { 'x-forwarded-uri': '/orders/1', 'x-forwarded-method': 'GET', ...PROBLEM } });
      expect(res.status).toBe(401);
      expect(res.headers['content-type']).toBe('application/problem+json; charset=utf-8');
      expect(JSON.parse(String(res.headers['x-gateway-error']))).toEqual(res.json);
      expect(res.json.code).toBe('token_missing');
    });
  });

  describe('the operator\'s message files', () => {
    const write = (name: string, text: string) => {
      mkdirSync(path.join(dir, 'messages'), { recursive: true });
      writeFileSync(path.join(dir, 'messages', name), text);
    };
    const configWith = (language: string) => testConfigFromFile(`errors: { language: ${language}, messages: ./messages }\n`, dir);

    it('gateway check refuses invalid JSON, an unknown code and a lost or unknown placeholder, naming file and code', async () => {
      write('de.json', JSON.stringify({ token_invalid: 'Token ungültig', nope: 'x', daily_limit_reached: 'Tageslimit erreicht ({plan})', email_taken: 'E-Mail {who} vergeben' }));
      write('it.json', '{ not json');
      const problems = (await checkFiles(configWith('negotiate'))).join('\n');
      expect(problems).toMatch(/de\.json: unknown code "nope"/);
      expect(problems).toMatch(/de\.json: daily_limit_reached: the placeholder \{limit\} is missing/);
      expect(problems).toMatch(/de\.json: email_taken: unknown placeholder \{who\}/);
      expect(problems).toMatch(/it\.json: not JSON/);
      rmSync(path.join(dir, 'messages'), { recursive: true });
    });

    it('adds a language for negotiate and overrides a built-in one, the rest in English', async () => {
      write('de.json', JSON.stringify({ token_invalid: 'Token ungültig oder abgelaufen', user_created: 'Benutzer angelegt' }));
      write('en.json', JSON.stringify({ token_invalid: 'Your token is not valid' }));
      expect(await checkFiles(configWith('negotiate'))).toEqual([]);
      const gw = await startTestGateway(configWith('negotiate'));
      try {
        const de = await gw.get('/api/v1/user/me', { headers: { authorization: 'Bearer x.y.z', 'accept-language': 'de-DE' } });
        expect(de.json).toEqual({ error: 'Token ungültig oder abgelaufen' });
        const en = await gw.get('/api/v1/user/me', { headers: { authorization: 'Bearer x.y.z', 'accept-language': 'en' } });
        expect(en.json).toEqual({ error: 'Your token is not valid' });
        const missing = await gw.post('/api/v1/auth/login', {}, { headers: { 'accept-language': 'de' } });
        expect(missing.json).toEqual({ error: 'Email and password required' });
        const created = await gw.post('/api/v1/auth/register', { email: newEmail(), password: newPassword() }, { headers: { 'accept-language': 'de' } });
        expect(created.json.message).toBe('Benutzer angelegt');
        const list = await gw.get('/api/v1/errors');
        const listed = list.json.find((e: { code: string }) => e.code === 'token_invalid');
        expect(listed.messages).toEqual({ fr: 'Token invalide ou expiré', en: 'Your token is not valid', de: 'Token ungültig oder abgelaufen' });
      } finally {
        await gw.close();
      }
    });
  });
});

// organizations and mail.invitationUrl (CONTRACT §22): the configuration's rules, and that without
// organizations enabled /api/v1/orgs is not the gateway's: a route may take it, else 404 as any
// path nobody serves. Without mail.smtp, inviting answers 503; creating is under the auth rate limit.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { docsExample } from '../helpers/docs.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import { bearer, closeSql, configProblems, describeWithServices, makeUser, ownRedisPrefix, startTestGateway, testConfig, testConfigFromYaml, type TestGateway } from '../helpers/gateway.js';
import { createOrg } from './helpers.js';

// Mail settings without a relay: links are made, no mail is sent.
const NO_SMTP = { smtp: '', from: 'x', resetUrl: 'https://a.example/r?token={token}', verifyUrl: 'https://a.example/v?token={token}', invitationUrl: 'https://a.example/j?token={token}' };
const MAIL = 'mail:\n  resetUrl: https://app.example.com/reset?token={token}\n  verifyUrl: https://app.example.com/verify?token={token}\n';

describe('organizations in gateway.yaml', () => {
  it('docs/organizations.md\'s example is valid, with the defaults it states', () => {
    const config = testConfigFromYaml(docsExample('organizations', 'organizations'), { SMTP_URL: 'smtp://127.0.0.1:2525' });
    expect(config.organizations).toEqual({ enabled: true, invitationTtl: 7 * 24 * 3_600_000, maxOwnedPerUser: 3 });
    expect(testConfigFromYaml('organizations:\n  enabled: true\n' + MAIL + '  invitationUrl: https://app.example.com/join?token={token}\n').organizations)
      .toEqual({ enabled: true, invitationTtl: 7 * 24 * 3_600_000, maxOwnedPerUser: 3 });
  });

  it('enabled organizations need mail.invitationUrl, a link template like the others: {token}, https (http on loopback only)', () => {
    expect(configProblems('organizations:\n  enabled: true\n' + MAIL)).toEqual([
      'mail.invitationUrl: required with organizations.enabled: an invitation goes out by email as a link to the application\'s page (a URL with {token})',
    ]);
    expect(configProblems('organizations:\n  enabled: true\n')).toEqual([expect.stringMatching(/^mail\.invitationUrl: required/)]);
    expect(configProblems(`organizations:\n  enabled: true\n${MAIL}  invitationUrl: http://app.example.com/join?token={token}\n`)).toEqual([
      'mail.invitationUrl: expected an https:// URL (http:// only on 127.0.0.1, ::1 or localhost: the link\'s token would cross the network in clear), got "http://app.example.com/join?token={token}"',
    ]);
    expect(configProblems(`organizations:\n  enabled: true\n${MAIL}  invitationUrl: https://app.example.com/join\n`)).toEqual([
      'mail.invitationUrl: expected a URL containing {token}, where the link\'s token goes',
    ]);
    expect(configProblems(`organizations:\n  enabled: true\n${MAIL}  invitationUrl: http://localhost:3000/join?token={token}\n`)).toEqual([]);
    // Disabled (or absent): nothing is required.
    expect(configProblems('organizations:\n  enabled: false\n')).toEqual([]);
    expect(configProblems('organizations:\n  enabled: true\n  maxOwnedPerUser: 0\n' + MAIL + '  invitationUrl: https://a.example/j?token={token}\n'))
      .toEqual([expect.stringMatching(/^organizations\.maxOwnedPerUser: /)]);
  });

  it('a route\'s org and roles: roles imply org: required; required and roles need auth: required, optional an auth other than none', () => {
    const ORGS = `organizations:\n  enabled: true\n${MAIL}  invitationUrl: https://a.example/j?token={token}\nupstreams:\n  app:\n    url: http://127.0.0.1:3000\n`;
    const route = (fields: string) => `${ORGS}routes:\n  - path: /r\n    upstream: app\n${fields}`;
    expect(configProblems(route('    org: required\n    roles: [owner, admin]\n'))).toEqual([]);
    expect(configProblems(route('    roles: [member]\n'))).toEqual([]);
    expect(configProblems(route('    auth: optional\n    org: optional\n'))).toEqual([]);
    expect(configProblems(route('    org: optional\n    roles: [owner]\n'))).toEqual(['routes[0].org: roles imply org: required']);
    expect(configProblems(route('    auth: optional\n    org: required\n'))).toEqual(['routes[0].auth: org: required and roles need auth: required']);
    expect(configProblems(route('    auth: optional\n    roles: [admin]\n'))).toEqual(['routes[0].auth: org: required and roles need auth: required']);
    expect(configProblems(route('    auth: none\n    org: optional\n'))).toEqual(['routes[0].auth: org: optional needs auth: required or optional (auth: none reads no credential)']);
    expect(configProblems(route('    roles: [boss]\n'))).toEqual([expect.stringMatching(/^routes\[0\]\.roles\[0\]: /)]);
    expect(configProblems(route('    org: always\n'))).toEqual([expect.stringMatching(/^routes\[0\]\.org: /)]);
  });

  it('with organizations enabled, a route cannot take /api/v1/orgs; disabled, it may', () => {
    const routes = 'upstreams:\n  app:\n    url: http://127.0.0.1:3000\nroutes:\n  - path: /api/v1/orgs\n    upstream: app\n';
    expect(configProblems(`organizations:\n  enabled: true\n${MAIL}  invitationUrl: https://a.example/j?token={token}\n${routes}`)).toEqual([
      'routes[0].path: path /api/v1/orgs is the gateway\'s own endpoint /api/v1/orgs (organizations.enabled): choose another path',
    ]);
    expect(configProblems(routes)).toEqual([]);
  });
});

describeWithServices('organizations switched off, without mail.smtp, under the auth rate limit', () => {
  let upstream: EchoUpstream;
  let off: TestGateway;
  let routed: TestGateway;
  let noSmtp: TestGateway;
  let limited: TestGateway;

  beforeAll(async () => {
    upstream = await startEchoUpstream();
    // With mail.invitationUrl set: the organizations section alone decides, not the links.
    off = await startTestGateway(testConfig({ errors: { codes: true }, mail: NO_SMTP }));
    routed = await startTestGateway(testConfig({ organizations: { enabled: false }, upstreams: { app: { url: upstream.url } }, routes: [{ path: '/api/v1/orgs', upstream: 'app', auth: 'none' }] }));
    noSmtp = await startTestGateway(testConfig({
      errors: { codes: true }, organizations: { enabled: true },
      mail: NO_SMTP,
    }));
  });
  afterAll(async () => {
    await Promise.all([off, routed, noSmtp, limited].map((gw) => gw?.close()));
    await upstream?.close();
    await closeSql();
  });

  it('absent: /api/v1/orgs is 404 Route introuvable, as any path nobody serves', async () => {
    for (const [method, path] of [['GET', '/api/v1/orgs'], ['POST', '/api/v1/orgs'], ['POST', '/api/v1/orgs/invitations/accept'], ['GET', '/api/v1/orgs/1']]) {
      expect(await off.request(method!, path!, { json: {} }), `${method} ${path}`).toMatchObject({ status: 404, json: { error: 'Route introuvable', code: 'route_not_found' } });
    }
  });

  it('disabled: a route may take /api/v1/orgs, and its upstream answers', async () => {
    const res = await routed.post('/api/v1/orgs', { name: 'Acme' });
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({ method: 'POST', path: '/api/v1/orgs', body: JSON.stringify({ name: 'Acme' }) });
  });

  it('creating an organization is under the auth rate limit (with register and login); reading is not', async () => {
    limited = await startTestGateway(testConfig({
      organizations: { enabled: true, maxOwnedPerUser: 10 }, mail: NO_SMTP, auth: { rateLimit: { max: 4, window: '1m' } }, storage: { redisKeyPrefix: ownRedisPrefix('orgs-limit') },
    }));
    const user = await verifiedUserBySql(limited);
    const create = () => limited.post('/api/v1/orgs', { name: 'Limited' }, { headers: bearer(user.access) });
    expect([(await create()).status, (await create()).status]).toEqual([201, 201]);
    expect(await create()).toMatchObject({ status: 429, json: { error: 'Trop de tentatives, réessayez plus tard' } });
    expect((await limited.get('/api/v1/orgs', { headers: bearer(user.access) })).json.orgs).toHaveLength(2);
  });

  it('without mail.smtp, an invitation nobody could receive is 503 Envoi d’emails non configuré', async () => {
    // The gateway sends no verification mail here: the address is verified as an operator would.
    const user = await verifiedUserBySql(noSmtp);
    const id = await createOrg(noSmtp, user);
    expect(await noSmtp.post(`/api/v1/orgs/${id}/invitations`, { email: 'guest@example.test', role: 'member' }, { headers: bearer(user.access) })).toMatchObject({
      status: 503, json: { error: 'Envoi d’emails non configuré', code: 'mail_unavailable' },
    });
  });

  async function verifiedUserBySql(gw: TestGateway) {
    const user = await makeUser(gw);
    await gw.services.db.query('UPDATE users SET email_verified_at = now() WHERE id = $1', [user.id]);
    return user;
  }
});

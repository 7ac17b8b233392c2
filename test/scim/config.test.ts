// Where SCIM's paths are the gateway's (CONTRACT §31), a route cannot take them; elsewhere it may.
import { describe, expect, it } from 'vitest';
import { configProblems } from '../helpers/gateway.js';

const MAIL = 'mail:\n  resetUrl: https://app.example.com/reset?token={token}\n  verifyUrl: https://app.example.com/verify?token={token}\n';

describe('SCIM\'s paths and routes', () => {
  it('with organizations.sso, a route cannot take /scim/v2; without it, it may', () => {
    const routes = 'upstreams:\n  app:\n    url: http://127.0.0.1:3000\nroutes:\n  - path: /scim/v2/orgs\n    upstream: app\n';
    expect(configProblems(`organizations:\n  enabled: true\n  sso: {}\n${MAIL}  invitationUrl: https://a.example/j?token={token}\n${routes}`)).toEqual([
      'routes[0].path: path /scim/v2/orgs is the gateway\'s own endpoint /scim/v2 (organizations.sso: SCIM): choose another path',
    ]);
    expect(configProblems(routes)).toEqual([]);
    expect(configProblems(`organizations:\n  enabled: true\n${MAIL}  invitationUrl: https://a.example/j?token={token}\n${routes}`)).toEqual([]);
  });
});

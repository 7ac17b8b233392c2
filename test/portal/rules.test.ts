// The portal's rules as pure functions and configuration checks (CONTRACT §30): the CSRF rule,
// the host rule, hashed asset names, the mail links that lead to the portal, the passkey rule and
// the warnings of `gateway check`, and docs/portal.md's example as the loader reads it.
import { describe, expect, it } from 'vitest';
import { checkWarnings } from '../../src/cli/check.js';
import { parseConfig } from '../../src/config/load.js';
import { mailLinks } from '../../src/config/schema/portal.js';
import { fixedSettings, shownSso } from '../../src/portal/config.js';
import { isHashedName } from '../../src/portal/files.js';
import { refusedAsCrossSite } from '../../src/portal/guard.js';
import { decisionForPortalHost, hostnameOf, portalHostRule } from '../../src/routing/portalHost.js';
import { docsExample } from '../helpers/docs.js';
import { configProblems } from '../helpers/gateway.js';

const URL_ = 'https://portal.example.com';
const PORTAL = `portal:\n  enabled: true\n  publicUrl: ${URL_}\n  product: { name: Acme }\n`;
const PAGE = { 'x-gateway-portal': '1', origin: URL_ };

describe('the portal\'s CSRF rule', () => {
  it.each([
    ['POST', PAGE, false],
    ['POST', { ...PAGE, 'sec-fetch-site': 'same-origin' }, false],
    ['GET', { 'x-gateway-portal': '1' }, false],
    ['POST', { 'x-gateway-portal': '1' }, true],
    ['POST', { origin: URL_ }, true],
    ['POST', { ...PAGE, 'x-gateway-portal': 'true' }, true],
    ['POST', { ...PAGE, origin: 'https://portal.example.com.evil.example' }, true],
    ['POST', { ...PAGE, origin: 'null' }, true],
    ['POST', { ...PAGE, 'sec-fetch-site': 'cross-site' }, true],
    ['POST', { ...PAGE, 'sec-fetch-site': 'same-site' }, true],
    ['GET', { ...PAGE, origin: 'https://evil.example' }, true],
    ['GET', {}, true],
  ] as const)('%s with %j: refused %s', (method, headers, refused) => {
    expect(refusedAsCrossSite(method, headers, URL_)).toBe(refused);
  });
});

describe('the portal\'s host', () => {
  it('reads a host without its port, in lower case, without a trailing dot', () => {
    expect(['Portal.Example.com', 'portal.example.com:8443', 'portal.example.com.', '[::1]:80'].map(hostnameOf)).toEqual(['portal.example.com', 'portal.example.com', 'portal.example.com', '[::1]']);
  });

  it('reads X-Forwarded-Host only from a trusted proxy, its last entry', () => {
    const settings = { enabled: true, publicUrl: URL_, sharedOrigin: false };
    const forwarded = { host: 'internal:8080', 'x-forwarded-host': 'evil.example, portal.example.com' };
    expect(portalHostRule(settings, true)!(forwarded)).toBe(true);
    expect(portalHostRule(settings, false)!(forwarded)).toBe(false);
    expect(portalHostRule({ ...settings, sharedOrigin: true }, true)).toBeUndefined();
    expect(decisionForPortalHost(settings, { host: 'gw:9000', 'x-forwarded-host': 'portal.example.com' })).toBe(true);
    expect(decisionForPortalHost(settings, { host: 'gw:9000', 'x-forwarded-host': 'api.example.com' })).toBe(false);
  });
});

it('caches for good only names that carry a hash', () => {
  expect(['app.3f9a1c07.js', 'app-0123abcd99.css', 'logo.1a2b3c4d5e.svg'].map(isHashedName)).toEqual([true, true, true]);
  expect(['app.js', 'overview.js', 'index-overview.js', 'app.deadbeef.js', 'index.html'].map(isHashedName)).toEqual([false, false, false, false, false]);
});

describe('the portal in gateway.yaml', () => {
  it('lets the mail links be left out, then opening the portal\'s pages; set, they win', () => {
    const config = parseConfig(`mail: { smtp: '', from: '' }\nauth: { magicLink: {} }\norganizations: { enabled: true }\n${PORTAL}`, 'gateway.yaml');
    expect(mailLinks(config)).toEqual({
      verify: `${URL_}/portal/verify-email?token={token}`, reset: `${URL_}/portal/reset-password?token={token}`,
      invitation: `${URL_}/portal/join?token={token}`, magic: `${URL_}/portal/magic?token={token}`,
    });
    const own = parseConfig(`mail: { smtp: '', from: '', resetUrl: 'https://app.example.com/r?token={token}' }\n${PORTAL}`, 'gateway.yaml');
    expect(mailLinks(own).reset).toBe('https://app.example.com/r?token={token}');
  });

  it('still requires them without the portal', () => {
    expect(configProblems("mail: { smtp: '', from: '' }\nauth: { magicLink: {} }\n").join('\n')).toMatch(/mail\.resetUrl[\s\S]*mail\.verifyUrl[\s\S]*auth\.magicLink\.url/);
  });

  it('refuses passkeys that cannot work on the portal\'s origin', () => {
    const passkeys = (rpId: string, origins: string) => `auth: { passkeys: { rpId: ${rpId}, rpName: Acme, origins: [${origins}] } }\n${PORTAL}`;
    expect(configProblems(passkeys('example.com', `${URL_}, https://app.example.com`))).toEqual([]);
    expect(configProblems(passkeys('portal.example.com', URL_))).toEqual([]);
    expect(configProblems(passkeys('example.com', 'https://app.example.com')).join('\n')).toContain('auth.passkeys.origins');
    expect(configProblems(passkeys('app.example.com', `https://app.example.com, ${URL_}`)).join('\n')).toContain('auth.passkeys.rpId');
  });

  it('warns when sharedOrigin is on, and says why provider buttons are hidden', () => {
    const oidc = (publicUrl: string) => `auth:\n  oidc:\n    publicUrl: ${publicUrl}\n    returnTo: [https://app.example.com/]\n    providers: { gh: { kind: github, clientId: c, clientSecret: s } }\n`;
    const hidden = checkWarnings(parseConfig(`${oidc('https://gw.example.com')}${PORTAL}  sharedOrigin: true\n`, 'gateway.yaml'));
    expect(hidden.join('\n')).toContain('portal.sharedOrigin: true serves the portal on every host');
    expect(hidden.join('\n')).toContain('the portal shows no provider buttons: auth.oidc.publicUrl (https://gw.example.com) is not portal.publicUrl');
    expect(checkWarnings(parseConfig(`${oidc(URL_)}${PORTAL}`, 'gateway.yaml')).filter((w) => w.includes('portal'))).toEqual([]);
  });

  it('says why "sign in with your organization" is hidden: SAML\'s publicUrl is not the portal\'s', () => {
    const sso = (ssoUrl: string) => `auth:\n  oidc:\n    publicUrl: ${URL_}\n    returnTo: [https://app.example.com/]\n    providers: {}\n`
      + `organizations:\n  enabled: true\n  sso: { publicUrl: ${ssoUrl} }\nmail:\n  smtp: smtp://127.0.0.1:2525\n  from: a@example.com\n`;
    const hiddenConfig = parseConfig(`${sso('https://gw.example.com')}${PORTAL}`, 'gateway.yaml');
    expect(shownSso(hiddenConfig, hiddenConfig.portal!)).toBe(false);
    const hidden = checkWarnings(hiddenConfig);
    expect(hidden.join('\n')).toContain('the portal shows no "sign in with your organization": organizations.sso.publicUrl (or auth.oidc.publicUrl, https://gw.example.com)');
    const shown = parseConfig(`${sso(URL_)}${PORTAL}`, 'gateway.yaml');
    expect(checkWarnings(shown).filter((w) => w.includes('portal'))).toEqual([]);
    expect(shownSso(shown, shown.portal!)).toBe(true);
  });

  it('reads docs/portal.md\'s example', () => {
    const config = parseConfig(docsExample('portal', 'portal'), 'gateway.yaml', { SMTP_URL: 'smtp://127.0.0.1:2525' });
    expect(config.portal).toMatchObject({ enabled: true, path: '/portal/', publicUrl: 'https://portal.acme.example', sharedOrigin: false, returnTo: ['https://app.acme.example/'] });
    expect(mailLinks(config).verify).toBe('https://portal.acme.example/portal/verify-email?token={token}');
  });
});

describe('what {path}api/config tells the pages (but the scopes, which follow the routes)', () => {
  const EVERYTHING = `errors: { language: en }
mail:
  smtp: smtp://127.0.0.1:2525
  from: a@example.com
auth:
  passwordMinLength: 12
  magicLink: {}
  passkeys: { rpId: portal.example.com, rpName: Acme, origins: [${URL_}] }
  oidc:
    publicUrl: ${URL_}
    returnTo: [https://app.example.com/]
    providers:
      google: { issuer: https://accounts.google.com, clientId: a, clientSecret: b }
      entra: { issuer: https://login.microsoftonline.com, clientId: a, clientSecret: b }
      github: { kind: github, clientId: a, clientSecret: b }
      corp: { issuer: https://idp.corp.example, clientId: a, clientSecret: b }
organizations: { enabled: true }
billing:
  stripe:
    secretKey: rk_test_portal
    webhookSecrets: [whsec_portal]
    prices: { price_pro: pro }
    successUrl: https://app.example.com/ok
    cancelUrl: https://app.example.com/back
plans:
  limits: { free: {}, pro: {} }
apiKeys: { plans: [pro], maxPerOwner: 3 }
portal:
  enabled: true
  publicUrl: ${URL_}
  returnTo: [https://app.example.com/]
  docs: https://docs.example.com
  product: { name: Acme, accent: "#112233", support: help@example.com, terms: https://example.com/terms, privacy: https://example.com/privacy }
`;

  it('every feature on, English by default, each provider by its issuer\'s name or its id', () => {
    const config = parseConfig(EVERYTHING, 'gateway.yaml');
    expect(fixedSettings(config, config.portal!)).toEqual({
      product: { name: 'Acme', accent: '#112233', logo: null, support: 'help@example.com', terms: 'https://example.com/terms', privacy: 'https://example.com/privacy' },
      docs: 'https://docs.example.com', path: '/portal/', publicUrl: URL_,
      language: { available: ['fr', 'en'], default: 'en', negotiate: false },
      features: {
        registration: true, mail: true, billing: true, passkeys: true, magicLink: true, organizations: true, sso: false,
        providers: [{ id: 'google', name: 'Google' }, { id: 'entra', name: 'Microsoft' }, { id: 'github', name: 'GitHub' }, { id: 'corp', name: 'corp' }],
      },
      signedIn: `${URL_}/portal/signed-in`, apiKeys: { plans: ['pro'], maxPerOwner: 3 }, passwordMinLength: 12, returnTo: ['https://app.example.com/'],
    });
  });

  it('nothing on: French, no feature, no provider; negotiate: French by default, the browser\'s language when it asks', () => {
    const config = parseConfig(PORTAL, 'gateway.yaml');
    expect(fixedSettings(config, config.portal!)).toMatchObject({
      product: { name: 'Acme', logo: null, support: null, terms: null, privacy: null }, docs: null,
      language: { available: ['fr', 'en'], default: 'fr', negotiate: false },
      features: { registration: true, mail: false, billing: false, passkeys: false, magicLink: false, organizations: false, sso: false, providers: [] },
      apiKeys: { plans: ['pro'], maxPerOwner: 10 }, returnTo: [],
    });
    const negotiate = parseConfig(`errors: { language: negotiate }\n${PORTAL}`, 'gateway.yaml');
    expect(fixedSettings(negotiate, negotiate.portal!).language).toEqual({ available: ['fr', 'en'], default: 'fr', negotiate: true });
    const off = parseConfig(`organizations: { enabled: false }\n${PORTAL}`, 'gateway.yaml');
    expect(fixedSettings(off, off.portal!).features.organizations).toBe(false);
  });

  it('no provider button when auth.oidc.publicUrl is another origin', () => {
    const config = parseConfig(EVERYTHING.replace(`    publicUrl: ${URL_}`, '    publicUrl: https://gw.example.com'), 'gateway.yaml');
    expect(fixedSettings(config, config.portal!).features.providers).toEqual([]);
  });
});

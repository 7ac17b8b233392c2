// auth.oidc (CONTRACT §15) as `gateway check` reads it: https:// issuers and public URL except on
// loopback hosts, return_to entries without query or fragment, provider names fit for a URL
// segment, openid among the scopes.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ensureBuilt, gateway } from '../helpers/cli.js';
import { configWarnings, parseConfig } from '../../src/config/load.js';
import { configProblems } from '../helpers/gateway.js';

const oidc = (publicUrl: string, issuer: string, extra = '') => `
auth:
  oidc:
    publicUrl: ${publicUrl}
    returnTo: ["https://app.example.com/"]
    providers:
      google:
        issuer: ${issuer}
        clientId: an-id
        clientSecret: a-secret
${extra}`;
// The return page posts the exchange with the gw_oidc cookie (bindToBrowser, on by default for one site).
const CORS = `
cors:
  origins: ["https://app.example.com"]
  credentials: true
`;

describe('auth.oidc', () => {
  it('accepts https:// anywhere and http:// on 127.0.0.1, ::1 and localhost only', () => {
    expect(configProblems(oidc('https://gw.example.com', 'https://accounts.google.com', CORS))).toEqual([]);
    for (const host of ['127.0.0.1:8080', '[::1]:8080', 'localhost:8080']) expect(configProblems(oidc(`http://${host}`, `http://${host}/realms/x`)), host).toEqual([]);
    const problems = configProblems(oidc('http://gw.example.com', 'http://idp.example.com'));
    expect(problems).toEqual([
      'auth.oidc.publicUrl: expected an https:// URL such as https://gw.example.com (http:// only on 127.0.0.1, ::1 or localhost)',
      'auth.oidc.providers.google.issuer: expected an https:// URL such as https://accounts.google.com (http:// only on 127.0.0.1, ::1 or localhost)',
    ]);
    // 127.0.0.2 and a name that merely starts with localhost are not this machine's loopback as the contract lists it.
    expect(configProblems(oidc('https://gw.example.com', 'http://localhost.example.com'))).toHaveLength(1);
  });

  it('refuses a return_to with a query, a provider name that is no URL segment, and scopes without openid', () => {
    const text = `
auth:
  oidc:
    publicUrl: https://gw.example.com
    returnTo: ["https://app.example.com/?next=x"]
    providers:
      Google/Workspace:
        issuer: https://accounts.google.com
        clientId: an-id
        clientSecret: a-secret
      okta:
        issuer: https://example.okta.com
        clientId: an-id
        clientSecret: a-secret
        scopes: [email, profile]
`;
    const problems = configProblems(text);
    expect(problems.some((p) => p.startsWith('auth.oidc.returnTo[0]: expected an http:// or https:// URL without query or fragment'))).toBe(true);
    expect(problems).toContain('auth.oidc.providers.Google/Workspace: expected a provider name of lower-case letters, digits, - and _ (it is a URL segment)');
    expect(problems).toContain('auth.oidc.providers.okta.scopes: expected openid among the scopes');
  });

  it('takes return_to entries as exact URLs written as browsers write them (CONTRACT §26)', () => {
    const entry = (url: string) => configProblems(oidc('https://gw.example.com', 'https://accounts.google.com', CORS).replace('["https://app.example.com/"]', JSON.stringify([url])));
    expect(entry('https://app.example.com/signed-in')).toEqual([]);
    expect(entry('https://app.example.com')).toEqual(['auth.oidc.returnTo[0]: expected the exact URL as browsers write it: https://app.example.com/, got "https://app.example.com"']);
    expect(entry('HTTPS://App.example.com:443/x')).toEqual(['auth.oidc.returnTo[0]: expected the exact URL as browsers write it: https://app.example.com/x, got "HTTPS://App.example.com:443/x"']);
    for (const url of ['https://app.example.com/x?', 'https://app.example.com/x#', 'https://u@app.example.com/x']) {
      expect(entry(url)[0], url).toMatch(/^auth\.oidc\.returnTo\[0\]: expected an http:\/\/ or https:\/\/ URL without query or fragment/);
    }
  });

  it('bindToBrowser: true by default when every returnTo origin is same-site with publicUrl, false otherwise (CONTRACT §26)', () => {
    const parsed = (yaml: string) => parseConfig(yaml, 'gateway.yaml').auth.oidc!.bindToBrowser;
    expect(parsed(oidc('https://gw.example.com', 'https://accounts.google.com', CORS))).toBe(true);
    expect(parsed(oidc('https://gw.example.com', 'https://accounts.google.com').replace('https://app.example.com/', 'https://gw.example.com/signed-in'))).toBe(true);
    for (const other of ['https://app.example.org/', 'http://app.example.com/', 'https://app.example.com/", "https://other.test/']) {
      expect(parsed(oidc('https://gw.example.com', 'https://accounts.google.com').replace('https://app.example.com/', other)), other).toBe(false);
    }
    // An address is a site of its own, whatever the port; localhost is another site.
    const loopback = (publicUrl: string) => parsed(oidc(publicUrl, 'https://accounts.google.com', CORS).replaceAll('https://app.example.com', 'http://127.0.0.1:5173'));
    expect(loopback('http://127.0.0.1:8080')).toBe(true);
    expect(loopback('http://localhost:8080')).toBe(false);
  });

  it('bindToBrowser: true needs every returnTo origin same-site, and each other origin allowed by cors with credentials', () => {
    const bound = (returnTo: string, extra = '') => configProblems(oidc('https://gw.example.com', 'https://accounts.google.com', extra).replace('"https://app.example.com/"', `"${returnTo}"`).replace('    providers:', '    bindToBrowser: true\n    providers:'));
    expect(bound('https://app.example.com/', CORS)).toEqual([]);
    expect(bound('https://gw.example.com/signed-in')).toEqual([]);
    expect(bound('https://app.example.org/', CORS.replace('example.com', 'example.org'))).toEqual([
      'auth.oidc.bindToBrowser: true needs every returnTo origin same-site with publicUrl: browsers send the gw_oidc cookie to the exchange from the gateway\'s site only',
    ]);
    const needsCors = 'auth.oidc.bindToBrowser: true needs cors to allow https://app.example.com with credentials: true, so that its page\'s exchange carries the gw_oidc cookie; or set bindToBrowser: false to bind by the application\'s PKCE verifier alone';
    for (const extra of ['', CORS.replace('  credentials: true\n', ''), CORS.replace('https://app.example.com', 'https://www.example.com')]) {
      expect(bound('https://app.example.com/', extra), extra).toEqual([needsCors]);
    }
  });

  it('bindToBrowser on by default where cors would keep the cookie from the exchange: valid, with a warning (a file valid before stays valid)', () => {
    const text = oidc('https://gw.example.com', 'https://accounts.google.com');
    expect(configProblems(text)).toEqual([]);
    const config = parseConfig(text, 'gateway.yaml');
    expect(config.auth.oidc!.bindToBrowser).toBe(true);
    expect(configWarnings(config)).toEqual(['auth.oidc.bindToBrowser: on by default (every returnTo origin is same-site with publicUrl), but cors does not allow https://app.example.com with credentials: true, so its page\'s exchange cannot carry the gw_oidc cookie and is refused; allow it in cors, or set bindToBrowser: false to bind by the application\'s PKCE verifier alone']);
    expect(configWarnings(parseConfig(oidc('https://gw.example.com', 'https://accounts.google.com', CORS), 'gateway.yaml'))).toEqual([]);
  });

  it('gateway check warns for an entry that was a prefix under CONTRACT §15 (a path ending in "/" other than the root)', { timeout: 60_000 }, async () => {
    ensureBuilt();
    const dir = mkdtempSync(path.join(tmpdir(), 'gw-oidc-'));
    try {
      const file = path.join(dir, 'gateway.yaml');
      writeFileSync(file, `${oidc('https://gw.example.com', 'https://accounts.google.com', CORS)}\napiKeys: { prefix: acme }\n`.replace('["https://app.example.com/"]', '["https://app.example.com/", "https://app.example.com/app/", "https://app.example.com/signed-in"]'));
      const { code, stdout, stderr } = await gateway(['check', '--config', file]);
      expect(code).toBe(0);
      expect(stdout.split('\n')[0]).toBe(`${file}: valid`);
      expect(stderr).toBe(`${file}: warning: auth.oidc.returnTo[1]: https://app.example.com/app/ is an exact URL, no longer a prefix (CONTRACT §26): a return_to under it is refused; list each page the browser comes back to\n`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('gateway check accepts a configuration with providers', { timeout: 60_000 }, async () => {
    ensureBuilt();
    const dir = mkdtempSync(path.join(tmpdir(), 'gw-oidc-'));
    try {
      const file = path.join(dir, 'gateway.yaml');
      writeFileSync(file, `${oidc('https://gw.example.com', 'https://accounts.google.com', CORS)}\napiKeys: { prefix: acme }\n`);
      const { code, stdout, stderr } = await gateway(['check', '--config', file]);
      expect([code, stderr]).toEqual([0, '']);
      expect(stdout.split('\n')[0]).toBe(`${file}: valid`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

// The portal block as `gateway check` reads it (CONTRACT §30): what it refuses (an accent that is
// not #rrggbb, terms, privacy or docs not https://, a support that is not one mailbox, publicUrl
// other than an origin or plain http:// off loopback, a route under portal.path, a logo that is
// not a PNG or SVG file under 100 KB) and the warning of sharedOrigin.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { checkWarnings } from '../../src/cli/check.js';
import { checkFiles } from '../../src/config/files.js';
import { parseConfig } from '../../src/config/load.js';
import { configProblems } from '../helpers/gateway.js';

const APP = 'upstreams: { app: { url: http://127.0.0.1:3000 } }\n';
const portal = (fields: Record<string, string> = {}, product: Record<string, string> = {}) => {
  const all = { enabled: 'true', publicUrl: 'https://portal.example.com', ...fields };
  const prod = { name: 'Acme API', ...product };
  return `${APP}portal:\n${Object.entries(all).map(([k, v]) => `  ${k}: ${v}\n`).join('')}  product:\n${Object.entries(prod).map(([k, v]) => `    ${k}: ${v}\n`).join('')}`;
};
const problems = (yaml: string) => configProblems(yaml).join('\n');

describe('portal in gateway.yaml', () => {
  it('takes §30\'s example, with /portal/ by default', () => {
    const yaml = portal({ returnTo: '[https://app.example.com/]', docs: 'https://docs.example.com', sharedOrigin: 'false' },
      { accent: '"#3b5bdb"', support: 'help@example.com', terms: 'https://example.com/terms', privacy: 'https://example.com/privacy', logo: './logo.svg' });
    expect(configProblems(yaml)).toEqual([]);
    const config = parseConfig(yaml, 'gateway.yaml');
    expect(config.portal).toMatchObject({ enabled: true, path: '/portal/', publicUrl: 'https://portal.example.com', sharedOrigin: false });
    expect(checkWarnings(config).filter((w) => w.includes('portal'))).toEqual([]);
  });

  it('refuses an accent, links, a support address and a logo name the pages could not use as they are', () => {
    expect(problems(portal({}, { accent: 'blue' }))).toMatch(/portal\.product\.accent: expected a colour as #rrggbb/);
    expect(problems(portal({}, { accent: '"#3b5bd"' }))).toMatch(/portal\.product\.accent/);
    expect(problems(portal({}, { terms: 'http://example.com/terms' }))).toMatch(/portal\.product\.terms: expected an https:\/\/ URL/);
    expect(problems(portal({}, { privacy: 'javascript:alert(1)' }))).toMatch(/portal\.product\.privacy: expected an https:\/\/ URL/);
    expect(problems(portal({ docs: 'ftp://docs.example.com' }))).toMatch(/portal\.docs: expected an https:\/\/ URL/);
    expect(problems(portal({}, { support: '"a@example.com, b@example.com"' }))).toMatch(/portal\.product\.support: expected one email address/);
    expect(problems(portal({}, { support: 'help' }))).toMatch(/portal\.product\.support/);
    expect(problems(portal({}, { logo: './logo.gif' }))).toMatch(/portal\.product\.logo: expected a PNG or SVG file/);
  });

  it('takes publicUrl as an origin only, https:// except on loopback', () => {
    for (const url of ['https://portal.example.com/', 'http://127.0.0.1:8080', 'http://localhost:3000', 'http://[::1]:8080']) {
      expect(configProblems(portal({ publicUrl: url })), url).toEqual([]);
    }
    for (const url of ['http://portal.example.com', 'https://portal.example.com/portal', 'https://portal.example.com/?x=1', 'https://portal.example.com/#top',
      'https://user@portal.example.com', 'portal.example.com']) {
      expect(problems(portal({ publicUrl: url })), url).toMatch(/portal\.publicUrl: expected the portal's origin/);
    }
    expect(problems(`${APP}portal: { enabled: true, product: { name: Acme } }\n`)).toMatch(/portal\.publicUrl/);
  });

  it('keeps portal.path for the portal: a route under it is an error, whatever its case', () => {
    const route = (p: string) => `routes: [{ path: ${p}, upstream: app }]\n`;
    expect(problems(`${portal()}${route('/portal/pages')}`)).toMatch(/routes\[0\]\.path: path \/portal\/pages is the gateway's own endpoint \/portal \(portal\.enabled\)/);
    expect(problems(`${portal()}${route('/Portal')}`)).toMatch(/own endpoint \/portal/);
    expect(problems(`${portal({ path: '/customers/' })}${route('/customers/x')}`)).toMatch(/own endpoint \/customers/);
    expect(configProblems(`${portal({ path: '/customers/' })}${route('/portal/x')}`)).toEqual([]);
    // Off, it takes nothing.
    expect(configProblems(`${portal({ enabled: 'false' })}${route('/portal/x')}`)).toEqual([]);
    expect(problems(portal({ path: '/' }))).toMatch(/portal\.path/);
    expect(problems(portal({ path: 'portal' }))).toMatch(/portal\.path: expected a path that begins and ends with \//);
  });

  it('warns that sharedOrigin trusts every upstream on the origin with customers\' sessions', () => {
    const config = parseConfig(portal({ sharedOrigin: 'true' }), 'gateway.yaml');
    expect(checkWarnings(config).filter((w) => w.startsWith('portal.'))).toEqual([expect.stringMatching(/^portal\.sharedOrigin: true serves the portal on every host.*every upstream reachable on that origin is trusted/)]);
  });

  it('reads the logo: a PNG or an SVG under 100 KB', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'portal-logo-'));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    const file = (name: string, bytes: Buffer | string) => { writeFileSync(path.join(dir, name), bytes); return path.join(dir, name); };
    const logoProblems = (logo: string) => checkFiles(parseConfig(portal({}, { logo }), 'gateway.yaml'));
    const png = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), Buffer.alloc(64)]);
    expect(await logoProblems(file('logo.png', png))).toEqual([]);
    expect(await logoProblems(file('logo.svg', '<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1"/>'))).toEqual([]);
    const big = file('big.png', Buffer.concat([png, Buffer.alloc(100 * 1024)]));
    expect(await logoProblems(big)).toEqual([`portal.product.logo: ${big}: ${png.length + 100 * 1024} bytes; expected a logo under 100 KB`]);
    const fake = file('fake.png', 'GIF89a');
    expect(await logoProblems(fake)).toEqual([`portal.product.logo: ${fake}: expected a PNG or SVG image`]);
    const html = file('page.svg', '<html><script>alert(1)</script></html>');
    expect(await logoProblems(html)).toEqual([`portal.product.logo: ${html}: expected a PNG or SVG image`]);
    expect((await logoProblems(path.join(dir, 'missing.svg')))[0]).toMatch(/cannot read the file: ENOENT/);
  });
});

// A real SAML identity provider for the system tier (CONTRACT §31): Debian's SimpleSAMLphp 1.19
// served by `php -S` on a spare loopback port, its whole configuration in a temporary directory of
// the test's own (SIMPLESAMLPHP_CONFIG_DIR). SimpleSAMLphp reads no environment variable for its
// metadata or certificate directories: config.php's metadatadir and certdir are absolute paths
// into that directory (a relative one would resolve under /usr/share/simplesamlphp). config.php,
// authsources.php and the metadata files are read again on every request, so users and service
// providers added after the start count at once.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { newIdpKeys } from './samlIdp.js';
import { sparePort } from './ports.js';

export const SIMPLESAMLPHP_WWW = '/usr/share/simplesamlphp/www';

/** A service provider as SimpleSAMLphp's saml20-sp-remote knows it. */
export interface RemoteSp {
  entityId: string;
  acsUrl: string;
  /** The SP's certificate (PEM): what SimpleSAMLphp encrypts the assertion to. */
  certificatePem: string;
  signResponse: boolean;
  signAssertion: boolean;
  encryptAssertion: boolean;
}

export interface SimpleSamlPhp {
  url: string;
  entityId: string;
  metadataUrl: string;
  /** What php wrote (SimpleSAMLphp logs to stderr): for a failing test's message. */
  logs: string[];
  addUser(username: string, password: string, attributes: Record<string, string[]>): void;
  addSp(sp: RemoteSp): void;
  stop(): Promise<void>;
}

/** A PHP literal of a string, a boolean or an array of them (single quotes: no interpolation). */
function php(value: unknown): string {
  if (typeof value === 'boolean') return value ? 'true' : 'false';
  if (typeof value === 'string') return `'${value.replaceAll('\\', '\\\\').replaceAll('\'', '\\\'')}'`;
  if (Array.isArray(value)) return `[${value.map(php).join(', ')}]`;
  if (value && typeof value === 'object') return `[${Object.entries(value).map(([k, v]) => `${php(k)} => ${php(v)}`).join(', ')}]`;
  throw new Error(`no PHP literal for ${String(value)}`);
}

const phpFile = (variable: string, entries: Record<string, unknown>) =>
  `<?php\n${Object.entries(entries).map(([k, v]) => `$${variable}[${php(k)}] = ${php(v)};`).join('\n')}\n`;

const certBody = (pem: string) => pem.replace(/-----[^-]+-----/g, '').replace(/\s+/g, '');

function writeConfig(dir: string, url: string): void {
  const config = {
    baseurlpath: `${url}/`,
    certdir: `${dir}/cert/`, metadatadir: `${dir}/metadata/`, datadir: `${dir}/data/`, tempdir: `${dir}/tmp`, loggingdir: `${dir}/`,
    secretsalt: randomBytes(24).toString('hex'),
    'auth.adminpassword': randomBytes(12).toString('hex'),
    timezone: 'UTC', technicalcontact_email: 'na@example.test', 'language.default': 'en',
    'enable.saml20-idp': true,
    'module.enable': { exampleauth: true, core: true, saml: true },
    'logging.handler': 'stderr',
    // The test's client speaks plain http to the loopback: a Secure cookie would still be sent
    // back by it, but a browser would drop it.
    'session.cookie.secure': false,
    'session.phpsession.savepath': `${dir}/sessions`,
    'store.type': 'phpsession',
  };
  writeFileSync(path.join(dir, 'config.php'), `<?php\n$config = ${php(config)};\n`);
}

async function listening(url: string, child: ChildProcess): Promise<boolean> {
  for (let i = 0; i < 100 && child.exitCode === null; i++) {
    const ok = await fetch(`${url}/saml2/idp/metadata.php`).then((r) => r.ok, () => false);
    if (ok) return true;
    await new Promise((r) => setTimeout(r, 100));
  }
  return false;
}

/** SimpleSAMLphp as an IdP (exampleauth:UserPass users) with a key pair and certificate of its own. */
export async function startSimpleSamlPhp(): Promise<SimpleSamlPhp> {
  const dir = mkdtempSync(path.join(tmpdir(), 'gw-simplesamlphp-'));
  for (const sub of ['cert', 'metadata', 'data', 'tmp', 'sessions']) mkdirSync(path.join(dir, sub));
  const keys = newIdpKeys();
  writeFileSync(path.join(dir, 'cert', 'idp.key'), keys.privateKeyPem, { mode: 0o600 });
  writeFileSync(path.join(dir, 'cert', 'idp.crt'), keys.certificatePem);
  writeFileSync(path.join(dir, 'metadata', 'saml20-idp-hosted.php'),
    phpFile('metadata', { '__DYNAMIC:1__': { host: '__DEFAULT__', privatekey: 'idp.key', certificate: 'idp.crt', auth: 'users' } }));
  const users: Record<string, unknown> = {};
  const sps: Record<string, unknown> = {};
  // PHP reads the key '0' as 0: the auth source's class, where SimpleSAMLphp expects it. A whole
  // assignment: SimpleSAMLphp requires the file where $config already names something else.
  const writeUsers = () => writeFileSync(path.join(dir, 'authsources.php'),
    `<?php\n$config = ${php({ admin: ['core:AdminPassword'], users: { 0: 'exampleauth:UserPass', ...users } })};\n`);
  const writeSps = () => writeFileSync(path.join(dir, 'metadata', 'saml20-sp-remote.php'), phpFile('metadata', sps));
  writeUsers();
  writeSps();
  const logs: string[] = [];
  for (let attempt = 1; ; attempt++) {
    const url = `http://127.0.0.1:${await sparePort()}`;
    writeConfig(dir, url);
    const child = spawn('php', ['-S', new URL(url).host, '-t', SIMPLESAMLPHP_WWW], {
      env: { ...process.env, SIMPLESAMLPHP_CONFIG_DIR: dir }, stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout!.on('data', (d) => logs.push(String(d)));
    child.stderr!.on('data', (d) => logs.push(String(d)));
    if (await listening(url, child)) {
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      return {
        url, entityId: `${url}/saml2/idp/metadata.php`, metadataUrl: `${url}/saml2/idp/metadata.php`, logs,
        addUser(username, password, attributes) { users[`${username}:${password}`] = attributes; writeUsers(); },
        addSp(sp) {
          sps[sp.entityId] = {
            AssertionConsumerService: sp.acsUrl,
            NameIDFormat: 'urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress',
            'simplesaml.nameidattribute': 'mail',
            'saml20.sign.response': sp.signResponse,
            'saml20.sign.assertion': sp.signAssertion,
            'assertion.encryption': sp.encryptAssertion,
            certData: certBody(sp.certificatePem),
          };
          writeSps();
        },
        async stop() {
          if (child.exitCode === null) { child.kill('SIGTERM'); await exited; }
          rmSync(dir, { recursive: true, force: true });
        },
      };
    }
    child.kill('SIGKILL');
    // A spare port taken in between (php: "Failed to listen"): another one.
    if (attempt >= 3) {
      rmSync(dir, { recursive: true, force: true });
      throw new Error(`SimpleSAMLphp did not start: ${logs.join('')}`);
    }
  }
}

/** The few HTML entities SimpleSAMLphp's htmlspecialchars writes in form values. */
const unescapeHtml = (s: string) => s.replace(/&(#x[0-9a-f]+|#\d+|amp|lt|gt|quot|apos);/gi, (_, e: string) => {
  const named: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: '\'' };
  if (e[0] !== '#') return named[e.toLowerCase()]!;
  return String.fromCodePoint(e[1]?.toLowerCase() === 'x' ? parseInt(e.slice(2), 16) : parseInt(e.slice(1), 10));
});

/** A page's form to post (the login form, or the Response's): its action, resolved against the page, and its named inputs' values. */
function formOf(html: string, pageUrl: string): { action: string; fields: Record<string, string> } | undefined {
  const attr = (tag: string, name: string) => unescapeHtml(new RegExp(`\\b${name}\\s*=\\s*"([^"]*)"`, 'i').exec(tag)?.[1] ?? '');
  for (const form of html.matchAll(/<form\b([^>]*)>([\s\S]*?)<\/form>/gi)) {
    const fields: Record<string, string> = {};
    for (const [input] of form[2]!.matchAll(/<input\b[^>]*>/gi)) {
      const name = attr(input, 'name');
      if (name) fields[name] = attr(input, 'value');
    }
    if ('password' in fields || 'SAMLResponse' in fields) return { action: new URL(attr(form[1]!, 'action') || pageUrl, pageUrl).toString(), fields };
  }
  return undefined;
}

/**
 * A browser's walk from `startUrl` (the gateway's /auth/sso) through SimpleSAMLphp's login form
 * to the ACS: redirects followed, cookies kept per origin, the login form filled, the auto-posting
 * Response form posted. Stops at the first redirect to `stopAt`: its Location, and the
 * SAMLResponse posted on the way (the XML, for what the IdP signed or encrypted).
 */
export async function browseSignIn(startUrl: string, username: string, password: string, stopAt: string): Promise<{ location: string; samlResponse: string }> {
  let samlResponse = '';
  const jar = new Map<string, Map<string, string>>();
  let next: { url: string; method: 'GET' | 'POST'; body?: string } = { url: startUrl, method: 'GET' };
  const trail: string[] = [];
  for (let step = 0; step < 12; step++) {
    const origin = new URL(next.url).origin;
    const cookies = jar.get(origin) ?? new Map<string, string>();
    jar.set(origin, cookies);
    const res = await fetch(next.url, {
      method: next.method, redirect: 'manual', body: next.body,
      headers: { cookie: [...cookies].map(([k, v]) => `${k}=${v}`).join('; '), ...(next.body ? { 'content-type': 'application/x-www-form-urlencoded' } : {}) },
    });
    for (const set of res.headers.getSetCookie()) {
      const [pair] = set.split(';');
      const at = pair!.indexOf('=');
      cookies.set(pair!.slice(0, at).trim(), pair!.slice(at + 1).trim());
    }
    trail.push(`${next.method} ${next.url.slice(0, 120)} → ${res.status}`);
    const location = res.headers.get('location');
    if (res.status >= 300 && res.status < 400 && location) {
      const target = new URL(location, next.url).toString();
      if (target.startsWith(stopAt)) return { location: target, samlResponse };
      next = { url: target, method: 'GET' };
      continue;
    }
    const html = await res.text();
    const form = res.status === 200 ? formOf(html, next.url) : undefined;
    if (!form) throw new Error(`no redirect and no form:\n${trail.join('\n')}\n${html.slice(0, 2000)}`);
    if (form.fields.SAMLResponse) samlResponse = Buffer.from(form.fields.SAMLResponse, 'base64').toString('utf8');
    const fields = 'password' in form.fields ? { ...form.fields, username, password } : form.fields;
    next = { url: form.action, method: 'POST', body: new URLSearchParams(fields).toString() };
  }
  throw new Error(`no redirect to ${stopAt} after 12 steps:\n${trail.join('\n')}`);
}

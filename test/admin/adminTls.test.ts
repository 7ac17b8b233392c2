// HTTPS on the admin listener (admin.tls, docs/tls.md's example as written): the admin API and
// /metrics over TLS only (the CLI's --admin too), the console served off loopback with a Secure cookie and its https://
// origin accepted for changes, and the certificate renewed by a reload like the public listener's.
import { X509Certificate } from 'node:crypto';
import { copyFileSync, readFileSync, rmSync } from 'node:fs';
import https from 'node:https';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { checkFiles } from '../../src/config/files.js';
import { exampleCertificateDir, makePki, servedCn, type Pki } from '../helpers/certs.js';
import { gateway } from '../helpers/cli.js';
import { docsExample } from '../helpers/docs.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import { ADMIN_KEY, closeSql, describeWithServices, makeUser, startTestGateway, testConfigFromFile, type TestGateway } from '../helpers/gateway.js';
import { rawExchange } from '../helpers/http.js';
import { consoleSignIn } from '../helpers/adminApi.js';
import { sparePort } from '../helpers/ports.js';

interface Answer { status: number; headers: Record<string, string | string[] | undefined>; json: unknown }

describeWithServices('admin listener over HTTPS (admin.tls)', () => {
  let pki: Pki;
  let dir: string;
  let upstream: EchoUpstream;
  let gw: TestGateway;
  let base: string;

  /** A request to the admin listener, trusting the test's CA only. */
  function admin(method: string, path: string, options: { headers?: Record<string, string>; json?: unknown } = {}): Promise<Answer> {
    return new Promise((resolve, reject) => {
      const body = options.json === undefined ? undefined : JSON.stringify(options.json);
      const req = https.request(`${base}${path}`, { method, ca: pki.ca, headers: { ...(body ? { 'content-type': 'application/json' } : {}), ...options.headers } }, (res) => {
        let text = '';
        res.setEncoding('utf8').on('data', (c: string) => { text += c; });
        res.on('end', () => {
          let json: unknown;
          try { json = JSON.parse(text); } catch { json = text; }
          resolve({ status: res.statusCode ?? 0, headers: res.headers, json });
        });
      });
      req.on('error', reject);
      req.end(body);
    });
  }

  beforeAll(async () => {
    pki = makePki('Admin CA');
    dir = exampleCertificateDir(pki.issue('admin', { cn: 'admin-1', names: ['localhost', '127.0.0.1'] }), 'admin');
    upstream = await startEchoUpstream();
    // The docs' example as written; the test's storage, and a spare port for the admin listener
    // (the test settings turn it off).
    const config = testConfigFromFile(docsExample('tls', 'admin-https'), dir, { APP_URL: upstream.url, GATEWAY_ADMIN_KEY: ADMIN_KEY });
    expect(config.admin.host).toBe('0.0.0.0');
    expect(config.admin.publicUrl).toBe('https://gateway-admin.internal:9443');
    config.admin.port = await sparePort();
    base = `https://localhost:${config.admin.port}`;
    // On every address the console's origin is admin.publicUrl (CONTRACT §26): here, where the test reaches it.
    config.admin.publicUrl = base;
    gw = await startTestGateway(config);
  });

  afterAll(async () => {
    await gw?.close();
    await upstream?.close();
    pki?.remove();
    if (dir) rmSync(dir, { recursive: true, force: true });
    await closeSql();
  });

  it('answers over TLS only: metrics and the admin API with the key; plain HTTP gets no answer', async () => {
    expect((await admin('GET', '/healthz')).status).toBe(200);
    expect((await admin('GET', '/metrics')).status).toBe(200);
    const user = await makeUser(gw);
    const found = await admin('GET', `/admin/v1/users?email=${encodeURIComponent(user.email)}`, { headers: { authorization: `Bearer ${ADMIN_KEY}` } });
    expect(found).toMatchObject({ status: 200, json: { id: user.id, email: user.email } });
    // A client speaking plain HTTP to it gets none of it.
    const plain = await rawExchange(`http://127.0.0.1:${new URL(base).port}`, Buffer.from(`GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n`));
    expect(plain).not.toContain('gateway_');
    expect(plain).not.toMatch(/^HTTP\/1\.1 200/);
  });

  it('serves the CLI\'s --admin https:// URL, trusting the operator\'s CA through NODE_EXTRA_CA_CERTS', async () => {
    const user = await makeUser(gw);
    const args = ['users', 'set-plan', user.email, 'pro', '--admin', base];
    const untrusted = await gateway(args, { env: { GATEWAY_ADMIN_KEY: ADMIN_KEY } });
    expect(untrusted.code).toBe(1);
    const run = await gateway(args, { env: { GATEWAY_ADMIN_KEY: ADMIN_KEY, NODE_EXTRA_CA_CERTS: pki.caFile } });
    expect(run).toMatchObject({ code: 0, stdout: expect.stringContaining('plan free → pro') });
    const found = await admin('GET', `/admin/v1/users/${user.id}`, { headers: { authorization: `Bearer ${ADMIN_KEY}` } });
    expect(found.json).toMatchObject({ plan: 'pro' });
  });

  it('serves the console off loopback, with a Secure cookie, and takes changes from its https:// origin only', async () => {
    expect((await admin('GET', '/console/')).status).toBe(200);
    const { cookie, csrf, answer } = await consoleSignIn(admin);
    expect(answer.headers['set-cookie']).toEqual([expect.stringMatching(/^gw_console=[\w-]{43}; HttpOnly; Secure; SameSite=Strict; Path=\/console\/; Max-Age=28800$/)]);
    const user = await makeUser(gw);
    const change = (origin: string) => admin('PUT', `/console/api/v1/users/${user.id}/plan`, { headers: { cookie, 'x-csrf-token': csrf, origin }, json: { plan: 'pro' } });
    // The page's own origin is https://: the http:// one is another origin.
    expect((await change(`http://localhost:${new URL(base).port}`)).status).toBe(403);
    const done = await change(base);
    expect(done).toMatchObject({ status: 200, json: { plan: 'pro' } });
    // A one-time sign-in link names the https:// origin it works on.
    const minted = await admin('POST', '/console/tickets', { headers: { authorization: `Bearer ${ADMIN_KEY}` } });
    expect(minted).toMatchObject({ status: 201, json: { url: expect.stringMatching(new RegExp(`^${base}/console/#ticket=[\\w-]{43}$`)) } });
    const ticket = (minted.json as { url: string }).url.split('#ticket=')[1];
    expect((await admin('POST', '/console/session', { headers: { origin: base }, json: { ticket } })).status).toBe(200);
    // Signing out clears the cookie with the attributes it was set with.
    const out = await admin('DELETE', '/console/session', { headers: { cookie, 'x-csrf-token': csrf, origin: base } });
    expect(out.headers['set-cookie']).toEqual(['gw_console=; HttpOnly; Secure; SameSite=Strict; Path=/console/; Max-Age=0']);
  });

  it('takes a renewed certificate on reload; a key that is not the certificate\'s is refused before anything changes', async () => {
    expect(await servedCn(base, pki.ca)).toBe('admin-1');
    const first = new X509Certificate(readFileSync(path.join(dir, 'certs/admin.pem')));
    const renewed = pki.issue('admin-2', { cn: 'admin-2', names: ['localhost', '127.0.0.1'] });
    copyFileSync(renewed.certFile, path.join(dir, 'certs/admin.pem'));
    // Half renewed (the old key beside the new certificate): gateway check and the reload both refuse it.
    expect(await checkFiles(gw.services.config)).toEqual([expect.stringMatching(/^admin\.tls\.keyFile: /)]);
    expect(() => gw.certificates!.reread()).toThrow();
    expect(await servedCn(base, pki.ca)).toBe('admin-1');
    copyFileSync(renewed.keyFile, path.join(dir, 'certs/admin-key.pem'));
    const expiry = async () => Number(/^gateway_tls_certificate_expiry_timestamp_seconds\{listener="admin"\} (\S+)$/m.exec(String((await admin('GET', '/metrics')).json))?.[1]);
    // What the certificate alert reads (deploy/monitoring/): the served certificate's end, not the file's.
    expect(await expiry()).toBe(Date.parse(first.validTo) / 1000);
    gw.certificates!.reread()();
    expect(await servedCn(base, pki.ca)).toBe('admin-2');
    expect(await expiry()).toBe(Date.parse(new X509Certificate(readFileSync(renewed.certFile)).validTo) / 1000);
  });
});

// Self-signed certificates made by openssl in a temporary directory: the one every test gateway
// trusts for webhook deliveries (made once per run by globalSetup.ts, see webhookReceiver.ts), and
// throwaway ones for tests of webhooks.caFile itself.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

export interface TestCertificate {
  certFile: string;
  keyFile: string;
  cert: string;
  key: string;
  remove(): void;
}

/** A certificate for localhost, 127.0.0.1 and the extra names given, valid one day. */
export function makeCertificate(extraNames: string[] = []): TestCertificate {
  const dir = mkdtempSync(path.join(tmpdir(), 'gw-webhook-cert-'));
  const keyFile = path.join(dir, 'key.pem');
  const certFile = path.join(dir, 'cert.pem');
  const san = ['IP:127.0.0.1', 'DNS:localhost', ...extraNames.map((n) => `DNS:${n}`)].join(',');
  execFileSync('openssl', [
    'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
    '-subj', '/CN=localhost', '-addext', `subjectAltName=${san}`, '-days', '1',
    '-keyout', keyFile, '-out', certFile,
  ], { stdio: 'ignore' });
  return { certFile, keyFile, cert: readFileSync(certFile, 'utf8'), key: readFileSync(keyFile, 'utf8'), remove: () => rmSync(dir, { recursive: true, force: true }) };
}

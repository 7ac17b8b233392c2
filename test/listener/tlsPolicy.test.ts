// The HTTPS listener's policy (issue 27, CONTRACT §19): TLS 1.3, and TLS 1.2 with forward-secret
// AEAD suites only; server.tls.ciphers / minVersion override it. Checked with openssl s_client, as
// a scanner (testssl.sh, sslyze) would.
import { execFile } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makePki, type Issued, type Pki } from '../helpers/certs.js';
import { closeSql, describeWithServices, rawTestConfig, startTestGateway, testConfig, type TestGateway } from '../helpers/gateway.js';

/** The protocol and cipher openssl s_client negotiated, or undefined when the handshake failed. */
function handshake(port: number, caFile: string, args: string[]): Promise<{ protocol: string; cipher: string } | undefined> {
  return new Promise((resolve) => {
    const child = execFile('openssl', ['s_client', '-connect', `127.0.0.1:${port}`, '-servername', 'localhost', '-CAfile', caFile, ...args], { timeout: 10_000 }, (_err, stdout) => {
      const protocol = /Protocol\s*:\s*(\S+)/.exec(stdout)?.[1] ?? /New, (TLSv[\d.]+), Cipher is/.exec(stdout)?.[1];
      const cipher = /Cipher is (\S+)/.exec(stdout)?.[1];
      resolve(cipher && cipher !== '(NONE)' && protocol ? { protocol, cipher } : undefined);
    });
    child.stdin?.end('');
  });
}

describeWithServices('TLS policy of the HTTPS listener', () => {
  let pki: Pki;
  let cert: Issued;
  beforeAll(() => {
    pki = makePki('Policy CA');
    cert = pki.issue('gateway', { cn: 'gateway', names: ['localhost', '127.0.0.1'] });
  });
  afterAll(async () => { pki?.remove(); await closeSql(); });

  async function gatewayWith(tls: Record<string, unknown>): Promise<TestGateway> {
    const base = rawTestConfig();
    return startTestGateway(testConfig({ server: { ...(base.server as object), tls: { certFile: cert.certFile, keyFile: cert.keyFile, ...tls } } }));
  }

  describe('by default', () => {
    let gw: TestGateway;
    let port: number;
    beforeAll(async () => { gw = await gatewayWith({}); port = Number(new URL(gw.url).port); });
    afterAll(async () => { await gw?.close(); });

    it('speaks TLS 1.3', async () => {
      expect(await handshake(port, pki.caFile, ['-tls1_3'])).toMatchObject({ protocol: 'TLSv1.3' });
    });

    it('offers TLS 1.2 with ECDHE and AES-GCM or ChaCha20-Poly1305', async () => {
      for (const cipher of ['ECDHE-ECDSA-AES128-GCM-SHA256', 'ECDHE-ECDSA-AES256-GCM-SHA384', 'ECDHE-ECDSA-CHACHA20-POLY1305']) {
        expect(await handshake(port, pki.caFile, ['-tls1_2', '-cipher', cipher]), cipher).toEqual({ protocol: 'TLSv1.2', cipher });
      }
    });

    it('refuses TLS 1.2 CBC, CCM and ARIA suites, and anything older than TLS 1.2', async () => {
      for (const cipher of ['ECDHE-ECDSA-AES128-SHA', 'ECDHE-ECDSA-AES256-SHA384', 'ECDHE-ECDSA-AES128-CCM', 'ECDHE-ECDSA-ARIA128-GCM-SHA256', 'ECDHE-ECDSA-CAMELLIA128-SHA256']) {
        expect(await handshake(port, pki.caFile, ['-tls1_2', '-cipher', `${cipher}:@SECLEVEL=0`]), cipher).toBeUndefined();
      }
      expect(await handshake(port, pki.caFile, ['-tls1_1', '-cipher', 'DEFAULT:@SECLEVEL=0'])).toBeUndefined();
    });
  });

  it('server.tls.ciphers and minVersion override the policy', async () => {
    const cbc = await gatewayWith({ ciphers: 'ECDHE-ECDSA-AES128-SHA:ECDHE-ECDSA-AES128-GCM-SHA256' });
    try {
      const port = Number(new URL(cbc.url).port);
      expect(await handshake(port, pki.caFile, ['-tls1_2', '-cipher', 'ECDHE-ECDSA-AES128-SHA'])).toEqual({ protocol: 'TLSv1.2', cipher: 'ECDHE-ECDSA-AES128-SHA' });
    } finally {
      await cbc.close();
    }
    const only13 = await gatewayWith({ minVersion: 'TLSv1.3' });
    try {
      const port = Number(new URL(only13.url).port);
      expect(await handshake(port, pki.caFile, ['-tls1_2'])).toBeUndefined();
      expect(await handshake(port, pki.caFile, ['-tls1_3'])).toMatchObject({ protocol: 'TLSv1.3' });
    } finally {
      await only13.close();
    }
  });
});

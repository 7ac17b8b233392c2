// A throwaway PKI for TLS tests, made with the openssl command line: a CA of the test's own, and
// certificates it signs for servers (the HTTPS listener, HTTPS upstreams) and clients (mTLS).
// P-256 keys: quick to make. Everything lives in one temporary directory, removed by remove().
import { execFileSync } from 'node:child_process';
import tls from 'node:tls';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

export interface Issued {
  certFile: string;
  keyFile: string;
  cert: string;
  key: string;
}

export interface Pki {
  dir: string;
  /** The CA certificate (PEM) and its file. */
  ca: string;
  caFile: string;
  /** A certificate signed by this CA, for `names` (DNS names or IP addresses) and CN `cn`. */
  issue(file: string, options: { cn: string; names?: string[] }): Issued;
  remove(): void;
}

const openssl = (args: string[], cwd: string) => execFileSync('openssl', args, { cwd, stdio: 'pipe' });
const NEW_KEY = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

export function makePki(label = 'Test CA'): Pki {
  const dir = mkdtempSync(path.join(tmpdir(), 'gw-pki-'));
  openssl(['req', '-x509', ...NEW_KEY, '-subj', `/CN=${label}`, '-days', '2', '-keyout', 'ca-key.pem', '-out', 'ca.pem',
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign'], dir);
  const caFile = path.join(dir, 'ca.pem');
  let serial = 1;
  return {
    dir,
    caFile,
    ca: readFileSync(caFile, 'utf8'),
    issue(file, { cn, names = [] }) {
      const keyFile = path.join(dir, `${file}-key.pem`);
      const certFile = path.join(dir, `${file}.pem`);
      const ext = path.join(dir, `${file}.ext`);
      const san = names.map((n) => (/^[\d.]+$|:/.test(n) ? `IP:${n}` : `DNS:${n}`)).join(',');
      writeFileSync(ext, `${san ? `subjectAltName=${san}\n` : ''}extendedKeyUsage=serverAuth,clientAuth\nbasicConstraints=CA:FALSE\n`);
      openssl(['req', ...NEW_KEY, '-subj', `/CN=${cn}`, '-keyout', keyFile, '-out', `${file}.csr`], dir);
      openssl(['x509', '-req', '-in', `${file}.csr`, '-CA', 'ca.pem', '-CAkey', 'ca-key.pem', '-set_serial', String(serial++ + Date.now()), '-days', '2', '-extfile', ext, '-out', certFile], dir);
      return { certFile, keyFile, cert: readFileSync(certFile, 'utf8'), key: readFileSync(keyFile, 'utf8') };
    },
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** The subject CN of the certificate a new TLS connection to `url` is shown (SNI localhost), trusting `ca`. */
export function servedCn(url: string, ca: string): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: hostname, port: Number(port), ca, servername: 'localhost' }, () => {
      resolve(String(socket.getPeerCertificate().subject.CN));
      socket.end();
    });
    socket.on('error', reject);
  });
}

/**
 * A temporary directory laid out as the docs' TLS examples name their files: a copy of `issued`
 * as `certs/<name>.pem` and `certs/<name>-key.pem`. The caller removes it.
 */
export function exampleCertificateDir(issued: Issued, name: string): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'gw-tls-example-'));
  mkdirSync(path.join(dir, 'certs'));
  copyFileSync(issued.certFile, path.join(dir, `certs/${name}.pem`));
  copyFileSync(issued.keyFile, path.join(dir, `certs/${name}-key.pem`));
  return dir;
}

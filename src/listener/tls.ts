// HTTPS (with HTTP/2 over ALPN) for a listener that has certificates, its cipher policy
// (CONTRACT §19), and the certificates a SIGHUP reads again.
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createSecureContext, type Server as TlsServer } from 'node:tls';
import type { Config } from '../config/schema.js';
import { SERVER_OPTIONS } from './basics.js';

type TlsSettings = NonNullable<Config['server']['tls']>;

/**
 * TLS 1.3, and TLS 1.2 with forward-secret AEAD suites only (CONTRACT §19): Node's defaults also
 * offer CBC, CCM and ARIA suites and RSA key exchange on TLS 1.2. In the server's order of
 * preference; TLS 1.3's three suites are named too, as OpenSSL takes them from the same list.
 */
export const TLS_CIPHERS = [
  'TLS_AES_128_GCM_SHA256', 'TLS_AES_256_GCM_SHA384', 'TLS_CHACHA20_POLY1305_SHA256',
  'ECDHE-ECDSA-AES128-GCM-SHA256', 'ECDHE-RSA-AES128-GCM-SHA256', 'ECDHE-ECDSA-AES256-GCM-SHA384', 'ECDHE-RSA-AES256-GCM-SHA384',
  'ECDHE-ECDSA-CHACHA20-POLY1305', 'ECDHE-RSA-CHACHA20-POLY1305',
  'DHE-RSA-AES128-GCM-SHA256', 'DHE-RSA-AES256-GCM-SHA384', 'DHE-RSA-CHACHA20-POLY1305',
].join(':');

/** The listener's secure context: the certificate chain and key of `server.tls`, read now, and its policy. */
function secureContextOptions(tls: TlsSettings) {
  return {
    cert: readFileSync(tls.certFile, 'utf8'),
    key: readFileSync(tls.keyFile, 'utf8'),
    ciphers: tls.ciphers ?? TLS_CIPHERS,
    minVersion: tls.minVersion,
    honorCipherOrder: true,
  };
}

/**
 * fastify's options for HTTPS with `tls`, and HTTP/2 over ALPN with `http2: true`, where HTTP/1.1
 * clients are still served on the same port (allowHTTP1). Node's own Host check stays off, as on
 * plain HTTP (registerCommon answers it from the catalog); fastify only passes it to plain servers.
 */
export function httpsOptions(tls: TlsSettings | undefined): { https?: object; http2?: true } {
  if (!tls) return {};
  const https = { ...secureContextOptions(tls), ...SERVER_OPTIONS };
  return tls.http2 ? { http2: true, https: { ...https, allowHTTP1: true } } : { https };
}

/** Reloading the listener's certificate (SIGHUP): connections already open keep theirs. */
export interface Certificates {
  /** Reads the files and checks them now (throws when they cannot be used); returns the swap. */
  reread(): () => void;
  /** When the certificate each listener serves expires (ms since the epoch), by listener: what the alert on expiry reads. */
  expiries(): Record<string, number>;
}

/** When the first certificate of a PEM chain (the server's own) expires, in ms since the epoch. */
function expiryOf(pem: string): number {
  return Date.parse(new X509Certificate(pem).validTo);
}

export function listenerCertificates(server: TlsServer, tls: TlsSettings, listener: string): Certificates {
  // The file the listener was just built from: what it serves until a SIGHUP swaps it.
  let expiresAt = expiryOf(readFileSync(tls.certFile, 'utf8'));
  return {
    reread() {
      // The policy too: a new secure context starts from Node's defaults.
      const options = secureContextOptions(tls);
      createSecureContext(options); // throws on a bad file or a key that is not the certificate's
      const next = expiryOf(options.cert);
      return () => {
        server.setSecureContext(options);
        expiresAt = next;
      };
    },
    expiries: () => ({ [listener]: expiresAt }),
  };
}

/** The certificates of every HTTPS listener as one: all are read and checked before any is swapped. */
export function allCertificates(listeners: Array<Certificates | undefined>): Certificates | undefined {
  const present = listeners.filter((c) => c !== undefined);
  if (present.length === 0) return undefined;
  return {
    reread() {
      const swaps = present.map((certificates) => certificates.reread());
      return () => swaps.forEach((swap) => swap());
    },
    expiries: () => Object.assign({}, ...present.map((certificates) => certificates.expiries())) as Record<string, number>,
  };
}

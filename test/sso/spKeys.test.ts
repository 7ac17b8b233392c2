// The gateway's own SAML key pair and certificate (src/auth/providers/saml/spKeys.ts), read back by
// node:crypto's X509Certificate as an IdP's library would read it: a version 3 certificate whose
// subject and issuer are the common name, valid ten years from now (UTCTime before 2050,
// GeneralizedTime from then on), a positive serial, signed by its own key with SHA-256 and RSA.
import { createPrivateKey, createPublicKey, X509Certificate } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { newSpKeyPair } from '../../src/auth/providers/saml/spKeys.js';

const NOW = new Date('2026-11-28T12:34:56.789Z');

/**
 * Whether every length in the DER is written as DER requires (X.690 §10.1): the short form below
 * 128, else the long form in as few bytes as the length needs. Walks constructed values (SEQUENCE,
 * SET, the explicit [0]) down to their primitives; true when the whole buffer is read exactly.
 */
function minimalDer(der: Buffer, from = 0, to = der.length): boolean {
  let at = from;
  while (at < to) {
    const tag = der[at]!;
    let length = der[at + 1]!;
    let header = 2;
    if (length === 0x80) return false;
    if (length > 0x80) {
      const bytes = length & 0x7f;
      if (der[at + 2] === 0) return false;
      length = der.subarray(at + 2, at + 2 + bytes).reduce((n, b) => n * 256 + b, 0);
      if (length < 0x80) return false;
      header += bytes;
    }
    const end = at + header + length;
    if (end > to) return false;
    if ((tag & 0x20) !== 0 && !minimalDer(der, at + header, end)) return false;
    at = end;
  }
  return at === to;
}
const TEN_YEARS_MS = 10 * 365.25 * 24 * 3600_000;

describe('a SAML connection\'s own certificate', () => {
  it('is a self-signed v3 certificate of its key, named by the common name, for ten years', () => {
    const pair = newSpKeyPair('auth-gateway org 42', NOW);
    const cert = new X509Certificate(pair.certificatePem);
    expect(cert.subject).toBe('CN=auth-gateway org 42');
    expect(cert.issuer).toBe('CN=auth-gateway org 42');
    expect(cert.verify(cert.publicKey)).toBe(true);
    expect(cert.checkPrivateKey(createPrivateKey(pair.privateKeyPem))).toBe(true);
    expect(cert.publicKey.asymmetricKeyType).toBe('rsa');
    expect(cert.publicKey.asymmetricKeyDetails?.modulusLength).toBe(2048);
    expect(cert.ca).toBe(false);
    // Validity to the second (certificates keep no milliseconds).
    expect(new Date(cert.validFrom).toISOString()).toBe('2026-11-28T12:34:56.000Z');
    expect(new Date(cert.validTo).getTime()).toBe(Math.floor((NOW.getTime() + TEN_YEARS_MS) / 1000) * 1000);
    // A positive serial of 16 bytes (its first byte's high bit clear, never a zero byte in front).
    expect(cert.serialNumber).toMatch(/^[0-7][0-9A-F]{31}$/);
    expect(Number.parseInt(cert.serialNumber.slice(0, 2), 16)).toBeGreaterThan(0);
    // PEM lines of 64 characters, the last one shorter (RFC 7468).
    const lines = pair.certificatePem.split('\n').slice(1, -2);
    expect(lines.slice(0, -1).every((line) => line.length === 64)).toBe(true);
    expect(lines.at(-1)!.length).toBeGreaterThan(0);
    expect(lines.at(-1)!.length).toBeLessThanOrEqual(64);
    expect(minimalDer(Buffer.from(cert.raw))).toBe(true);
    expect(pair.certificatePem).toMatch(/^-----BEGIN CERTIFICATE-----\n[\s\S]+\n-----END CERTIFICATE-----\n$/);
    expect(pair.privateKeyPem).toMatch(/^-----BEGIN PRIVATE KEY-----\n/);
    expect(createPublicKey(pair.privateKeyPem).export({ type: 'spki', format: 'pem' })).toBe(cert.publicKey.export({ type: 'spki', format: 'pem' }));
  });

  it('each pair its own key and serial', () => {
    const [a, b] = [newSpKeyPair('a', NOW), newSpKeyPair('a', NOW)];
    expect(a.privateKeyPem).not.toBe(b.privateKeyPem);
    expect(new X509Certificate(a.certificatePem).serialNumber).not.toBe(new X509Certificate(b.certificatePem).serialNumber);
  });

  it('dates from 2050 on as GeneralizedTime, which every reader takes', () => {
    const late = new X509Certificate(newSpKeyPair('late', new Date('2049-12-31T23:59:59Z')).certificatePem);
    expect(new Date(late.validFrom).toISOString()).toBe('2049-12-31T23:59:59.000Z');
    expect(new Date(late.validTo).toISOString()).toBe('2060-01-01T11:59:59.000Z');
    const later = new X509Certificate(newSpKeyPair('later', new Date('2050-01-01T00:00:00Z')).certificatePem);
    expect(new Date(later.validFrom).toISOString()).toBe('2050-01-01T00:00:00.000Z');
    // UTCTime would read 50 as 1950: GeneralizedTime keeps the century.
    const raw = Buffer.from(later.raw).toString('latin1');
    expect(raw).toContain('20500101000000Z');
    expect(Buffer.from(late.raw).toString('latin1')).toContain('491231235959Z');
    expect(Buffer.from(late.raw).toString('latin1')).not.toContain('20491231235959Z');
  });

  it('names of any length, in UTF-8: lengths written in one, two or three bytes', () => {
    // 127 and 128 bytes: the short form's last length and the long form's first.
    for (const name of ['x'.repeat(100), 'é'.repeat(100), 'a'.repeat(127), 'b'.repeat(128), 'y'.repeat(255), 'y'.repeat(256), 'w'.repeat(65_535), 'z'.repeat(70_000)]) {
      const cert = new X509Certificate(newSpKeyPair(name, NOW).certificatePem);
      expect(cert.subject).toBe(`CN=${name}`);
      expect(cert.verify(cert.publicKey)).toBe(true);
      expect(minimalDer(Buffer.from(cert.raw)), `${name.length} characters`).toBe(true);
    }
  });
});

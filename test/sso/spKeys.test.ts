// The gateway's own SAML key pair and certificate (src/auth/providers/saml/spKeys.ts), read back by
// node:crypto's X509Certificate as an IdP's library would read it: a version 3 certificate whose
// subject and issuer are the common name, valid ten years from now (UTCTime before 2050,
// GeneralizedTime from then on), a positive serial, signed by its own key with SHA-256 and RSA.
import { createPrivateKey, createPublicKey, X509Certificate } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { newSpKeyPair } from '../../src/auth/providers/saml/spKeys.js';

const NOW = new Date('2026-11-28T12:34:56.789Z');
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
    // Each PEM line of the certificate is 64 characters at most.
    expect(pair.certificatePem.split('\n').slice(1, -2).every((line) => line.length > 0 && line.length <= 64)).toBe(true);
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
    for (const name of ['x'.repeat(100), 'é'.repeat(100), 'y'.repeat(300), 'z'.repeat(70_000)]) {
      const cert = new X509Certificate(newSpKeyPair(name, NOW).certificatePem);
      expect(cert.subject).toBe(`CN=${name}`);
      expect(cert.verify(cert.publicKey)).toBe(true);
    }
  });
});

// The gateway's own key pair per SAML connection (CONTRACT §31): the IdP encrypts assertions to its
// certificate (encryptAssertions) and checks signed AuthnRequests with it. SAML metadata carries a
// key as an X.509 certificate, and Node makes keys but not certificates: this file writes the one
// self-signed certificate a key needs in DER (RFC 5280: version 3, SHA-256 with RSA, a common
// name, ten years), signed by node:crypto. Nothing here verifies anything: IdPs read the
// certificate for its public key alone, and the private key never leaves the gateway but
// encrypted at rest (the TOTP secrets' AES-256-GCM key, auth/mfa/totp.ts).
import { createSign, generateKeyPairSync, randomBytes } from 'node:crypto';

export interface SpKeyPair {
  privateKeyPem: string;
  certificatePem: string;
}

const SHA256_WITH_RSA = Buffer.from('300d06092a864886f70d01010b0500', 'hex');
const COMMON_NAME = Buffer.from('0603550403', 'hex');
const TEN_YEARS_MS = 10 * 365.25 * 24 * 3600_000;

function tlv(tag: number, content: Buffer): Buffer {
  const n = content.length;
  const length = n < 0x80 ? Buffer.from([n]) : (() => {
    const bytes = Buffer.from(n.toString(16).padStart(n > 0xff ? (n > 0xffff ? 6 : 4) : 2, '0'), 'hex');
    return Buffer.concat([Buffer.from([0x80 | bytes.length]), bytes]);
  })();
  return Buffer.concat([Buffer.from([tag]), length, content]);
}

const sequence = (...parts: Buffer[]) => tlv(0x30, Buffer.concat(parts));

function name(commonName: string): Buffer {
  return sequence(tlv(0x31, sequence(COMMON_NAME, tlv(0x0c, Buffer.from(commonName)))));
}

/** UTCTime before 2050, GeneralizedTime from then on (RFC 5280 §4.1.2.5). */
function time(at: Date): Buffer {
  const iso = at.toISOString().replace(/[-:T]/g, '').slice(0, 14);
  return at.getUTCFullYear() < 2050 ? tlv(0x17, Buffer.from(`${iso.slice(2)}Z`)) : tlv(0x18, Buffer.from(`${iso}Z`));
}

/** A new RSA 2048 key pair with its self-signed certificate, both PEM. */
export function newSpKeyPair(commonName: string, now: Date): SpKeyPair {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const serial = randomBytes(16);
  serial[0] = serial[0]! & 0x7f | 0x01;
  const subject = name(commonName);
  const tbs = sequence(
    tlv(0xa0, tlv(0x02, Buffer.from([2]))),
    tlv(0x02, serial),
    SHA256_WITH_RSA,
    subject,
    sequence(time(now), time(new Date(now.getTime() + TEN_YEARS_MS))),
    subject,
    publicKey.export({ type: 'spki', format: 'der' }),
  );
  const signature = createSign('sha256').update(tbs).sign(privateKey);
  const der = sequence(tbs, SHA256_WITH_RSA, tlv(0x03, Buffer.concat([Buffer.from([0]), signature])));
  const certificatePem = `-----BEGIN CERTIFICATE-----\n${der.toString('base64').match(/.{1,64}/g)!.join('\n')}\n-----END CERTIFICATE-----\n`;
  return { privateKeyPem: privateKey.export({ type: 'pkcs8', format: 'pem' }) as string, certificatePem };
}

// A WebAuthn authenticator in software (P-256, attestation "none"), for the HTTP tests of passkeys:
// it answers the gateway's options as a browser with a platform authenticator would, and can be
// made to misbehave (another origin, no user verification, an old counter, a userHandle left out
// or naming someone else). The browser test
// (test/browser/passkeys.test.ts) uses Chromium's own virtual authenticator instead.
import { createHash, createPublicKey, generateKeyPairSync, randomBytes, sign, type KeyObject } from 'node:crypto';

export interface SoftCredential {
  id: string;
  privateKey: KeyObject;
  userHandle: string;
  counter: number;
}

export interface CeremonyOptions {
  origin: string;
  /** The user-verified flag (default true). */
  verified?: boolean;
  /** The counter to report (default: one more than the last). */
  counter?: number;
  /** The rpId whose hash goes in the authenticator data (default: the options'). */
  rpId?: string;
  /**
   * The sign-in's `userHandle` (default: the one the registration gave the credential). Given as
   * undefined, the member is left out; any other value is sent as it is. It is outside what the
   * authenticator signs, so whoever relays the answer can change it.
   */
  userHandle?: unknown;
  /** Registration only: answer with this credential again (its id and key) instead of a new one. */
  again?: SoftCredential;
}

const b64url = (bytes: Uint8Array | string) => Buffer.from(bytes).toString('base64url');
const sha256 = (data: Uint8Array | string) => createHash('sha256').update(data).digest();
const FLAG_UP = 0x01;
const FLAG_UV = 0x04;
const FLAG_AT = 0x40;

/** Answers `navigator.credentials.create()` with the gateway's creation options. */
export function register(options: { challenge: string; rp: { id?: string }; user: { id: string } }, ceremony: CeremonyOptions): { response: Record<string, unknown>; credential: SoftCredential } {
  const { privateKey, publicKey } = ceremony.again
    ? { privateKey: ceremony.again.privateKey, publicKey: createPublicKey(ceremony.again.privateKey) }
    : generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const jwk = publicKey.export({ format: 'jwk' });
  const credentialId = ceremony.again ? Buffer.from(ceremony.again.id, 'base64url') : randomBytes(16);
  // COSE_Key: kty EC2 (2), alg ES256 (-7), crv P-256 (1), x, y.
  const coseKey = cbor(new Map<number, unknown>([[1, 2], [3, -7], [-1, 1], [-2, Buffer.from(jwk.x!, 'base64url')], [-3, Buffer.from(jwk.y!, 'base64url')]]));
  const attested = Buffer.concat([Buffer.alloc(16), u16(credentialId.length), credentialId, coseKey]);
  const authData = authenticatorData(ceremony.rpId ?? options.rp.id!, FLAG_AT | flags(ceremony), ceremony.counter ?? 0, attested);
  const clientData = clientDataJson('webauthn.create', options.challenge, ceremony.origin);
  const attestationObject = cbor(new Map<string, unknown>([['fmt', 'none'], ['attStmt', new Map()], ['authData', authData]]));
  const id = b64url(credentialId);
  return {
    credential: { id, privateKey, userHandle: options.user.id, counter: ceremony.counter ?? 0 },
    response: {
      id, rawId: id, type: 'public-key', clientExtensionResults: {}, authenticatorAttachment: 'platform',
      response: { clientDataJSON: b64url(clientData), attestationObject: b64url(attestationObject), transports: ['internal'] },
    },
  };
}

/** Answers `navigator.credentials.get()` with the gateway's request options, signing with the credential. */
export function authenticate(options: { challenge: string; rpId?: string }, credential: SoftCredential, ceremony: CeremonyOptions): Record<string, unknown> {
  const counter = ceremony.counter ?? credential.counter + 1;
  credential.counter = counter;
  const authData = authenticatorData(ceremony.rpId ?? options.rpId!, flags(ceremony), counter);
  const clientData = clientDataJson('webauthn.get', options.challenge, ceremony.origin);
  const signature = sign('sha256', Buffer.concat([authData, sha256(clientData)]), credential.privateKey);
  const userHandle = 'userHandle' in ceremony ? ceremony.userHandle : credential.userHandle;
  return {
    id: credential.id, rawId: credential.id, type: 'public-key', clientExtensionResults: {}, authenticatorAttachment: 'platform',
    response: { clientDataJSON: b64url(clientData), authenticatorData: b64url(authData), signature: b64url(signature), userHandle },
  };
}

function flags(ceremony: CeremonyOptions): number {
  return FLAG_UP | (ceremony.verified === false ? 0 : FLAG_UV);
}

function authenticatorData(rpId: string, flagBits: number, counter: number, attested: Buffer = Buffer.alloc(0)): Buffer {
  const count = Buffer.alloc(4);
  count.writeUInt32BE(counter);
  return Buffer.concat([sha256(rpId), Buffer.from([flagBits]), count, attested]);
}

function clientDataJson(type: string, challenge: string, origin: string): Buffer {
  return Buffer.from(JSON.stringify({ type, challenge, origin, crossOrigin: false }));
}

function u16(n: number): Buffer {
  const b = Buffer.alloc(2);
  b.writeUInt16BE(n);
  return b;
}

/** The CBOR (RFC 8949) of what WebAuthn needs: integers, byte and text strings, maps. */
function cbor(value: unknown): Buffer {
  if (typeof value === 'number') return value >= 0 ? head(0, value) : head(1, -1 - value);
  if (Buffer.isBuffer(value)) return Buffer.concat([head(2, value.length), value]);
  if (typeof value === 'string') {
    const bytes = Buffer.from(value);
    return Buffer.concat([head(3, bytes.length), bytes]);
  }
  if (value instanceof Map) return Buffer.concat([head(5, value.size), ...[...value].flatMap(([k, v]) => [cbor(k), cbor(v)])]);
  throw new Error(`cbor: cannot encode ${typeof value}`);
}

function head(major: number, n: number): Buffer {
  if (n < 24) return Buffer.from([(major << 5) | n]);
  if (n < 256) return Buffer.from([(major << 5) | 24, n]);
  return Buffer.concat([Buffer.from([(major << 5) | 25]), u16(n)]);
}

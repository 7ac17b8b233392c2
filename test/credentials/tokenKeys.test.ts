// Unit tests of src/credentials/tokenKeys.ts (CONTRACT §25): the key set that signs and verifies
// access and refresh tokens, from auth.jwt and the database's secrets. What a token sees of it: the
// kid in its header (stable across restarts, so tokens outlive an upgrade), which keys verify it,
// the length its signature has (isOwn cuts glued characters there) and the published JWKs.
import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { calculateJwkThumbprint, compactVerify, SignJWT, type JWK } from 'jose';
import { afterAll, describe, expect, it } from 'vitest';
import { configSchema } from '../../src/config/schema.js';
import {
  buildKeySet, hmacKey, isDatabaseKept, PreviousKeyError, SigningKeyError, thumbprint, type JwtSettings, type SignKey, type VerifyKey,
} from '../../src/credentials/tokenKeys.js';

const SECRET = 'a-secret-of-at-least-32-characters-for-hs256';
const OTHER = 'another-secret-of-at-least-32-characters-too';
const dir = mkdtempSync(path.join(tmpdir(), 'gw-token-keys-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const jwtOf = (over: Partial<JwtSettings>): JwtSettings => ({ ...configSchema.parse({}).auth.jwt, ...over });

let files = 0;
function pemFile(text: string): string {
  const file = path.join(dir, `key-${files++}.pem`);
  writeFileSync(file, text);
  return file;
}

const pkcs8 = (key: KeyObject) => key.export({ format: 'pem', type: 'pkcs8' }) as string;
const spki = (key: KeyObject) => key.export({ format: 'pem', type: 'spki' }) as string;

const PAIRS = {
  EdDSA: () => generateKeyPairSync('ed25519'),
  ES256: () => generateKeyPairSync('ec', { namedCurve: 'P-256' }),
  RS256: () => generateKeyPairSync('rsa', { modulusLength: 2048 }),
} as const;

/** A token signed with the key, and whether `verifier` takes it; its signature's length. */
async function signed(key: SignKey, alg: string): Promise<string> {
  return new SignJWT({}).setProtectedHeader({ alg, kid: key.kid }).setSubject('1').sign(key.sign);
}
async function verifies(token: string, key: VerifyKey, alg: string): Promise<boolean> {
  return compactVerify(token, key.verify, { algorithms: [alg] }).then(() => true, () => false);
}
const signatureOf = (token: string) => token.slice(token.lastIndexOf('.') + 1);

describe('HS256 keys', () => {
  it('have a kid that is a fixed digest of the secret (the same after a restart), and a 43-character signature', async () => {
    const key = hmacKey(SECRET);
    // sha256('auth-gateway jwt kid\0' + secret), base64url, 22 characters (printf … | openssl dgst -sha256).
    expect(key.kid).toBe('bkQoPKy083L9QfWUw0mDpa');
    expect(hmacKey(SECRET).kid).toBe(key.kid);
    expect(hmacKey(OTHER).kid).not.toBe(key.kid);
    const token = await signed(key, 'HS256');
    expect(key.signatureLength).toBe(signatureOf(token).length);
    expect(key.signatureLength).toBe(43);
    expect(await verifies(token, hmacKey(SECRET), 'HS256')).toBe(true);
    expect(await verifies(token, hmacKey(OTHER), 'HS256')).toBe(false);
    expect(key.publicJwk).toBeUndefined();
    // The secret never leaves its CryptoKey: WebCrypto refuses to export it.
    expect(key.sign.extractable).toBe(false);
    await expect(crypto.subtle.exportKey('raw', key.sign)).rejects.toThrow();
  });

  it('sign with auth.jwt.secret, verify with it and its previous secrets; the stored ones only when the database keeps the key', async () => {
    const set = buildKeySet(jwtOf({ secret: SECRET, previous: [OTHER] }), { current: 'stored-current', previous: 'stored-previous' });
    expect(set.algorithm).toBe('HS256');
    expect(set.current.kid).toBe(hmacKey(SECRET).kid);
    expect(set.all.map((k) => k.kid)).toEqual([hmacKey(SECRET).kid, hmacKey(OTHER).kid]);
    expect(set.publicJwks).toEqual([]);

    const kept = buildKeySet(jwtOf({ secret: '', previous: [OTHER] }), { current: SECRET, previous: 'stored-previous' });
    expect(kept.current.kid).toBe(hmacKey(SECRET).kid);
    expect(kept.all.map((k) => k.kid)).toEqual([hmacKey(SECRET).kid, hmacKey('stored-previous').kid, hmacKey(OTHER).kid]);
    expect(buildKeySet(jwtOf({ secret: '' }), { current: SECRET }).all.map((k) => k.kid)).toEqual([hmacKey(SECRET).kid]);
    expect(() => buildKeySet(jwtOf({ secret: '' }), undefined)).toThrow('no HS256 secret: neither auth.jwt.secret nor a stored one');
  });

  it('count a previous secret equal to the current one once, as the current one', () => {
    const set = buildKeySet(jwtOf({ secret: SECRET, previous: [SECRET, OTHER, OTHER] }), undefined);
    expect(set.all.map((k) => k.kid)).toEqual([hmacKey(SECRET).kid, hmacKey(OTHER).kid]);
    expect(set.all[0]).toBe(set.current);
  });

  it('are kept in the database only for HS256 without a secret', () => {
    expect(isDatabaseKept(jwtOf({ secret: '' }))).toBe(true);
    expect(isDatabaseKept(jwtOf({ secret: SECRET }))).toBe(false);
    expect(isDatabaseKept(jwtOf({ algorithm: 'EdDSA', secret: '', privateKeyFile: 'k.pem' }))).toBe(false);
  });
});

describe('the candidates of a token', () => {
  it('are the key its kid names, none for an unknown kid, every key for a token without one', () => {
    const set = buildKeySet(jwtOf({ secret: SECRET, previous: [OTHER] }), undefined);
    expect(set.candidates(hmacKey(OTHER).kid).map((k) => k.kid)).toEqual([hmacKey(OTHER).kid]);
    expect(set.candidates(hmacKey(SECRET).kid)).toEqual([set.current]);
    expect(set.candidates('unknown')).toEqual([]);
    expect(set.candidates(undefined)).toEqual(set.all);
    expect(set.candidates(undefined)).toHaveLength(2);
  });
});

describe.each(['EdDSA', 'ES256', 'RS256'] as const)('%s keys', (alg) => {
  const pair = PAIRS[alg]();
  const previous = PAIRS[alg]();
  const privateKeyFile = pemFile(pkcs8(pair.privateKey));

  it('sign with auth.jwt.privateKeyFile; kid the RFC 7638 thumbprint; the signature length what a signature takes', async () => {
    const set = buildKeySet(jwtOf({ algorithm: alg, privateKeyFile }), { current: 'ignored' });
    const jwk = pair.publicKey.export({ format: 'jwk' }) as JWK;
    const kid = await calculateJwkThumbprint(jwk);
    expect(set.current.kid).toBe(kid);
    expect(thumbprint(jwk)).toBe(kid);
    expect(set.publicJwks).toEqual([{ ...jwk, kid, alg, use: 'sig' }]);
    const token = await signed(set.current, alg);
    expect(set.current.signatureLength).toBe(signatureOf(token).length);
    expect(await verifies(token, set.current, alg)).toBe(true);
    expect(set.current.sign.extractable).toBe(false);
    await expect(crypto.subtle.exportKey('jwk', set.current.sign)).rejects.toThrow();
  });

  it('verify with previous public keys, inline PEM or file, published after the current one; a duplicate of the current one once', async () => {
    const inline = spki(previous.publicKey);
    const set = buildKeySet(jwtOf({ algorithm: alg, privateKeyFile, previous: [inline, pemFile(spki(pair.publicKey)), pemFile(inline)] }), undefined);
    const kid = await calculateJwkThumbprint(previous.publicKey.export({ format: 'jwk' }) as JWK);
    expect(set.all.map((k) => k.kid)).toEqual([set.current.kid, kid]);
    expect(set.publicJwks.map((k) => k.kid)).toEqual([set.current.kid, kid]);
    expect(set.publicJwks[1]).toMatchObject({ alg, use: 'sig' });
    const old = buildKeySet(jwtOf({ algorithm: alg, privateKeyFile: pemFile(pkcs8(previous.privateKey)) }), undefined);
    const token = await signed(old.current, alg);
    expect(await verifies(token, set.candidates(kid)[0]!, alg)).toBe(true);
    expect(set.all[1]!.signatureLength).toBe(signatureOf(token).length);
  });

  it('refuse a previous key of another type, naming its entry', () => {
    const wrong = alg === 'EdDSA' ? PAIRS.ES256() : PAIRS.EdDSA();
    const build = () => buildKeySet(jwtOf({ algorithm: alg, privateKeyFile, previous: [spki(previous.publicKey), spki(wrong.publicKey)] }), undefined);
    expect(build).toThrow(PreviousKeyError);
    expect(build).toThrow(/^auth\.jwt\.previous\[1\]: an (ec|ed25519) (prime256v1 )?key, not an/);
    const missing = () => buildKeySet(jwtOf({ algorithm: alg, privateKeyFile, previous: [path.join(dir, 'missing.pem')] }), undefined);
    expect(missing).toThrow(/^auth\.jwt\.previous\[0\]: ENOENT/);
    try {
      build();
    } catch (err) {
      expect((err as Error).name).toBe('PreviousKeyError');
    }
  });

  it('refuse a private key file that cannot sign, naming the file and the algorithm', () => {
    const wrong = alg === 'EdDSA' ? PAIRS.ES256() : PAIRS.EdDSA();
    const wrongFile = pemFile(pkcs8(wrong.privateKey));
    const build = (file: string) => () => buildKeySet(jwtOf({ algorithm: alg, privateKeyFile: file }), undefined);
    expect(build(wrongFile)).toThrow(SigningKeyError);
    expect(build(wrongFile)).toThrow(new RegExp(`^${wrongFile}: cannot sign ${alg} with it: an (ec|ed25519) (prime256v1 )?key, not an`));
    const publicOnly = pemFile(spki(pair.publicKey));
    expect(build(publicOnly)).toThrow(`${publicOnly}: cannot sign ${alg} with it: not a PEM PKCS#8 private key (-----BEGIN PRIVATE KEY-----)`);
    const missing = path.join(dir, 'missing.pem');
    expect(build(missing)).toThrow(`${missing}: cannot sign ${alg} with it: ENOENT`);
    try {
      build(missing)();
    } catch (err) {
      expect((err as Error).name).toBe('SigningKeyError');
    }
  });
});

describe('RSA keys', () => {
  it('have a signature as long as their modulus', async () => {
    const pair = generateKeyPairSync('rsa', { modulusLength: 3072 });
    const set = buildKeySet(jwtOf({ algorithm: 'RS256', privateKeyFile: pemFile(pkcs8(pair.privateKey)) }), undefined);
    const token = await signed(set.current, 'RS256');
    expect(signatureOf(token)).toHaveLength(512);
    expect(set.current.signatureLength).toBe(512);
  });
});

describe('errors thrown for the CLI', () => {
  it('say which setting and why, a non-Error cause as text', () => {
    const jwt = jwtOf({ algorithm: 'EdDSA', privateKeyFile: 'keys/jwt.pem' });
    expect(new SigningKeyError(jwt, 'plain').message).toBe('keys/jwt.pem: cannot sign EdDSA with it: plain');
    expect(new PreviousKeyError(2, 'a problem').message).toBe('auth.jwt.previous[2]: a problem');
  });
});

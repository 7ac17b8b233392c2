// The signing-key check of `gateway check` (config/files.ts) is written apart from the loading of
// the key at start (credentials/tokens.ts: jose's importPKCS8), so that configuration depends on nothing
// of auth/. This holds the two to the same answer for every kind of key an operator may hand over.
import { generateKeyPairSync } from 'node:crypto';
import { SignJWT } from 'jose';
import { describe, expect, it } from 'vitest';
import { loadKeyFile } from '../../src/credentials/tokens.js';
import { signingKeyProblem } from '../../src/config/files.js';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

const pkcs8 = { type: 'pkcs8', format: 'pem' } as const;
const KEYS: Record<string, string> = {
  ed25519: generateKeyPairSync('ed25519').privateKey.export(pkcs8).toString(),
  ed448: generateKeyPairSync('ed448').privateKey.export(pkcs8).toString(),
  'ec P-256': generateKeyPairSync('ec', { namedCurve: 'prime256v1' }).privateKey.export(pkcs8).toString(),
  'ec P-384': generateKeyPairSync('ec', { namedCurve: 'secp384r1' }).privateKey.export(pkcs8).toString(),
  'ec P-256 as SEC1': generateKeyPairSync('ec', { namedCurve: 'prime256v1' }).privateKey.export({ type: 'sec1', format: 'pem' }).toString(),
  'rsa 2048': generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export(pkcs8).toString(),
  'rsa 1024': generateKeyPairSync('rsa', { modulusLength: 1024 }).privateKey.export(pkcs8).toString(),
  'rsa 2048 as PKCS#1': generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs1', format: 'pem' }).toString(),
  'a public key': generateKeyPairSync('ed25519').publicKey.export({ type: 'spki', format: 'pem' }).toString(),
  garbage: '-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5\n-----END PRIVATE KEY-----\n',
};
const ALGORITHMS = ['EdDSA', 'ES256', 'RS256'] as const;

describe('signing key check', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'gw-keys-'));
  const rows = Object.keys(KEYS).flatMap((name) => ALGORITHMS.map((algorithm) => [name, algorithm] as const));

  it.each(rows)('%s for %s: gateway check accepts it exactly when start can sign a token with it', async (name, algorithm) => {
    const file = path.join(dir, `${name.replace(/\W/g, '_')}.pem`);
    writeFileSync(file, KEYS[name]!);
    const startSigns = await loadKeyFile({ algorithm, privateKeyFile: file, secret: '' } as never)
      .then((keys) => new SignJWT({}).setProtectedHeader({ alg: algorithm }).sign(keys.sign))
      .then(() => true, () => false);
    expect(signingKeyProblem(KEYS[name]!, algorithm) === undefined).toBe(startSigns);
  });

  it('accepts each algorithm\'s own key (the table above is not all refusals)', () => {
    expect(signingKeyProblem(KEYS.ed25519!, 'EdDSA')).toBeUndefined();
    expect(signingKeyProblem(KEYS['ec P-256']!, 'ES256')).toBeUndefined();
    expect(signingKeyProblem(KEYS['rsa 2048']!, 'RS256')).toBeUndefined();
    rmSync(dir, { recursive: true, force: true });
  });
});

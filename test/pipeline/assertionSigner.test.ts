// Unit tests of src/pipeline/assertionSigner.ts (CONTRACT §3): the x-gateway-assertion an upstream
// receives, verified with the public key as an upstream would, and when one is reused: for the same
// key, upstream and identity while more than half its life is left, never across a change of what it
// says, never "from the future" after the clock went back. The keyring is a stand-in holding a real
// Ed25519 key (the database-backed one is driven end to end in test/assertion/).
import { decodeProtectedHeader, importJWK, jwtVerify, type CryptoKey } from 'jose';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { AssertionKeyring, SigningKey } from '../../src/credentials/assertionKeyring.js';
import { generateAssertionKey } from '../../src/credentials/assertionKeys.js';
import type { KeyFacts } from '../../src/pipeline/identityHeaders.js';
import type { ActingOrg } from '../../src/pipeline/subject.js';
import { AssertionSigner } from '../../src/pipeline/assertionSigner.js';
import type { User } from '../../src/storage/accounts/users.js';
import type { TestClock } from '../helpers/gateway.js';

const USER: User = {
  id: 42, email: 'ada@example.test', plan: 'pro', is_active: 1, daily_usage: 0, last_usage_date: null, created_at: new Date(), email_verified_at: null, credential_generation: 0,
};
const START = new Date('2026-03-01T10:00:00.000Z');

async function keyPair(): Promise<{ signing: SigningKey; verify: CryptoKey }> {
  const { kid, privateJwk, publicJwk } = await generateAssertionKey();
  return { signing: { kid, key: (await importJWK(privateJwk, 'EdDSA')) as CryptoKey }, verify: (await importJWK(publicJwk, 'EdDSA')) as CryptoKey };
}

/**
 * A clock that moves only when told. The reuse window's bounds are tested to the millisecond
 * (29,999 ms reuses, 30,000 does not), which testClock, moving with real time, turns into a race a
 * loaded machine loses (CI, Node 22: a millisecond passed between set() and the signer's read).
 */
function stillClock(): TestClock {
  let now = 0;
  const clock = (() => new Date(now)) as TestClock;
  clock.advance = (ms) => { now += ms; };
  clock.set = (date) => { now = date.getTime(); };
  return clock;
}

async function setUp(issuer?: string) {
  const pair = await keyPair();
  const ring = { current: pair.signing };
  const clock = stillClock();
  clock.set(START);
  const signer = new AssertionSigner(ring as unknown as AssertionKeyring, clock, issuer);
  return { signer, clock, ring, verify: pair.verify };
}

afterEach(() => { vi.restoreAllMocks(); });

describe('the assertion', () => {
  it('is a JWS an upstream verifies: EdDSA, its typ and kid, issuer, audience the upstream, subject, 60 s of life', async () => {
    const { signer, verify, ring } = await setUp();
    const headers = await signer.headerFor(USER, 'bearer', 'billing');
    expect(Object.keys(headers)).toEqual(['x-gateway-assertion']);
    const token = headers['x-gateway-assertion']!;
    expect(decodeProtectedHeader(token)).toEqual({ alg: 'EdDSA', typ: 'gateway-assertion+jwt', kid: ring.current.kid });
    const { payload } = await jwtVerify(token, verify, { issuer: 'auth-gateway', audience: 'billing', currentDate: START });
    const iat = START.getTime() / 1000;
    expect(payload).toEqual({ plan: 'pro', email: 'ada@example.test', auth_method: 'bearer', iss: 'auth-gateway', aud: 'billing', sub: '42', iat, exp: iat + 60 });
  });

  it('names the configured issuer', async () => {
    const { signer, verify } = await setUp('https://gw.example.test');
    const token = await signer.assertionFor(USER, 'bearer', 'billing');
    expect((await jwtVerify(token, verify, { currentDate: START })).payload.iss).toBe('https://gw.example.test');
  });

  it('says which API key and its scopes for a key’s request, and the organization acted for', async () => {
    const { signer, verify } = await setUp();
    const key: KeyFacts = { id: 7, scopes: ['read'] };
    const org: ActingOrg = { id: 3, role: 'admin', plan: 'enterprise' };
    const token = await signer.assertionFor(USER, 'api-key', 'billing', key, org);
    expect((await jwtVerify(token, verify, { currentDate: START })).payload).toMatchObject({
      plan: 'pro', auth_method: 'api-key', key_id: '7', scopes: ['read'], org: { id: '3', role: 'admin', plan: 'enterprise' },
    });
    const all = await signer.assertionFor(USER, 'api-key', 'billing', { id: 8, scopes: null });
    const claims = (await jwtVerify(all, verify, { currentDate: START })).payload;
    expect(claims).toMatchObject({ key_id: '8', scopes: null });
    expect(claims).not.toHaveProperty('org');
  });

  it('leaves out an email stored before the one-mailbox rule', async () => {
    const { signer, verify } = await setUp();
    const token = await signer.assertionFor({ ...USER, email: 'ceo@bank.test <attacker@evil.test>' }, 'bearer', 'billing');
    const { payload } = await jwtVerify(token, verify, { currentDate: START });
    expect(payload.plan).toBe('pro');
    expect(payload).not.toHaveProperty('email');
  });
});

describe('reuse', () => {
  it('gives the same assertion for 30 s (its iat unchanged), a new one from half its life on', async () => {
    const { signer, clock } = await setUp();
    const first = await signer.assertionFor(USER, 'bearer', 'billing');
    clock.set(new Date(START.getTime() + 29_999));
    expect(await signer.assertionFor(USER, 'bearer', 'billing')).toBe(first);
    clock.set(new Date(START.getTime() + 30_000));
    const second = await signer.assertionFor(USER, 'bearer', 'billing');
    expect(second).not.toBe(first);
    clock.set(new Date(START.getTime() + 45_000));
    expect(await signer.assertionFor(USER, 'bearer', 'billing')).toBe(second);
  });

  it('never reuses an assertion from the future: a clock set back gets a new one', async () => {
    const { signer, clock, verify } = await setUp();
    const first = await signer.assertionFor(USER, 'bearer', 'billing');
    clock.set(new Date(START.getTime() - 1));
    const earlier = await signer.assertionFor(USER, 'bearer', 'billing');
    expect(earlier).not.toBe(first);
    expect((await jwtVerify(earlier, verify, { currentDate: START })).payload.iat).toBe(START.getTime() / 1000 - 1);
    clock.set(START);
    expect(await signer.assertionFor(USER, 'bearer', 'billing')).toBe(earlier);
  });

  it('gives a new assertion when anything it says changes, or the signing key', async () => {
    const { signer, clock, ring } = await setUp();
    const base = await signer.assertionFor(USER, 'api-key', 'billing', { id: 7, scopes: ['a', 'b'] }, { id: 3, role: 'member', plan: 'team' });
    clock.set(new Date(START.getTime() + 5000)); // a new signature would carry a new iat
    const again = (user: User, method: 'bearer' | 'api-key', audience: string, key?: KeyFacts, org?: ActingOrg) => signer.assertionFor(user, method, audience, key, org);
    expect(await again(USER, 'api-key', 'billing', { id: 7, scopes: ['a', 'b'] }, { id: 3, role: 'member', plan: 'team' })).toBe(base);
    const variants = [
      again(USER, 'api-key', 'search', { id: 7, scopes: ['a', 'b'] }, { id: 3, role: 'member', plan: 'team' }),
      again({ ...USER, id: 43 }, 'api-key', 'billing', { id: 7, scopes: ['a', 'b'] }, { id: 3, role: 'member', plan: 'team' }),
      again({ ...USER, plan: 'free' }, 'api-key', 'billing', { id: 7, scopes: ['a', 'b'] }, { id: 3, role: 'member', plan: 'team' }),
      again({ ...USER, email: 'ada2@example.test' }, 'api-key', 'billing', { id: 7, scopes: ['a', 'b'] }, { id: 3, role: 'member', plan: 'team' }),
      again(USER, 'bearer', 'billing', { id: 7, scopes: ['a', 'b'] }, { id: 3, role: 'member', plan: 'team' }),
      again(USER, 'api-key', 'billing', { id: 8, scopes: ['a', 'b'] }, { id: 3, role: 'member', plan: 'team' }),
      again(USER, 'api-key', 'billing', { id: 7, scopes: ['a,b'] }, { id: 3, role: 'member', plan: 'team' }),
      again(USER, 'api-key', 'billing', { id: 7, scopes: null }, { id: 3, role: 'member', plan: 'team' }),
      again(USER, 'api-key', 'billing', undefined, { id: 3, role: 'member', plan: 'team' }),
      again(USER, 'api-key', 'billing', { id: 7, scopes: ['a', 'b'] }, { id: 4, role: 'member', plan: 'team' }),
      again(USER, 'api-key', 'billing', { id: 7, scopes: ['a', 'b'] }, { id: 3, role: 'admin', plan: 'team' }),
      again(USER, 'api-key', 'billing', { id: 7, scopes: ['a', 'b'] }, { id: 3, role: 'member', plan: 'business' }),
      again(USER, 'api-key', 'billing', { id: 7, scopes: ['a', 'b'] }),
    ];
    for (const token of await Promise.all(variants)) expect(token).not.toBe(base);
    ring.current = (await keyPair()).signing;
    const rotated = await again(USER, 'api-key', 'billing', { id: 7, scopes: ['a', 'b'] }, { id: 3, role: 'member', plan: 'team' });
    expect(rotated).not.toBe(base);
    expect(decodeProtectedHeader(rotated).kid).toBe(ring.current.kid);
  });

  it('costs one signature for a burst of requests, and signs again once the reuse window is over', async () => {
    const { signer, clock } = await setUp();
    const sign = vi.spyOn(crypto.subtle, 'sign');
    const burst = await Promise.all(Array.from({ length: 5 }, () => signer.assertionFor(USER, 'bearer', 'billing')));
    expect(new Set(burst).size).toBe(1);
    expect(sign).toHaveBeenCalledTimes(1);
    clock.set(new Date(START.getTime() + 31_000));
    const later = await Promise.all(Array.from({ length: 3 }, () => signer.assertionFor(USER, 'bearer', 'billing')));
    expect(later[0]).not.toBe(burst[0]);
    expect(new Set(later).size).toBe(1);
    expect(sign).toHaveBeenCalledTimes(2);
  });

  it('reuses an assertion at the very millisecond of its iat (a clock that does not move)', async () => {
    const { signing } = await keyPair();
    const signer = new AssertionSigner({ current: signing } as unknown as AssertionKeyring, () => START, undefined);
    const sign = vi.spyOn(crypto.subtle, 'sign');
    const first = await signer.assertionFor(USER, 'bearer', 'billing');
    expect(await signer.assertionFor(USER, 'bearer', 'billing')).toBe(first);
    expect(sign).toHaveBeenCalledTimes(1);
  });
});

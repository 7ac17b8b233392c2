// Unit tests of src/auth/providers/signInProvider.ts, the pieces every provider's sign-in shares: the flow's
// secrets derived from the browser's cookie, their constant-time comparison, PKCE's S256, and the
// provider's error in the callback. The threats: one flow's state, nonce or verifier accepted in
// another (each must differ per browser and from each other), and a near miss passing for a secret.
import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { callbackError, flowSecrets, reasonOf, s256, sameSecret, SignInFailed } from '../../src/auth/providers/signInProvider.js';

describe('flowSecrets', () => {
  it('derives state, nonce and verifier from the browser secret, each with its own label', () => {
    const mac = (label: string) => createHmac('sha256', 'browser-secret').update(label).digest('base64url');
    expect(flowSecrets('browser-secret')).toEqual({ state: mac('state'), nonce: mac('nonce'), verifier: mac('pkce') });
  });

  it('gives another browser secret three other values, and the same secret the same three', () => {
    const a = flowSecrets('one');
    expect(flowSecrets('one')).toEqual(a);
    const b = flowSecrets('two');
    for (const key of ['state', 'nonce', 'verifier'] as const) expect(b[key]).not.toBe(a[key]);
    expect(new Set([a.state, a.nonce, a.verifier]).size).toBe(3);
  });
});

describe('sameSecret', () => {
  // A fixed value of the shape flowSecrets gives (base64url of 32 bytes). Derived while the file is
  // collected, a broken derivation would fail the file before any test, which Stryker's vitest
  // runner does not count as a failed test.
  const secret = 'q3Wd0E9x2kTfP1mZ7rYb5LcN8vHs4aJg6uKe0oIy_-A';

  it('is true for the secret itself', () => {
    expect(sameSecret(secret, `${secret}`)).toBe(true);
  });

  it.each([
    ['one character changed', `${secret.slice(0, -1)}${secret.endsWith('A') ? 'B' : 'A'}`],
    ['another case', secret.toUpperCase() === secret ? secret.toLowerCase() : secret.toUpperCase()],
    ['one character short', secret.slice(0, -1)],
    ['one character more', `${secret}A`],
    ['empty', ''],
  ])('is false for a near miss: %s', (_why, presented) => {
    expect(sameSecret(secret, presented)).toBe(false);
    expect(sameSecret(presented, secret)).toBe(false);
  });
});

describe('s256', () => {
  it('computes the RFC 7636 appendix B challenge', () => {
    expect(s256('dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk')).toBe('E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM');
  });
});

describe('callbackError', () => {
  it('reads a declined sign-in as access_denied, and names what the provider said', () => {
    const failure = callbackError(new URLSearchParams('error=access_denied&state=s'));
    expect(failure).toBeInstanceOf(SignInFailed);
    expect(failure?.code).toBe('access_denied');
    expect(failure?.message).toBe('the provider answered access_denied');
    expect(failure?.name).toBe('SignInFailed');
  });

  it('reads any other error as provider_error', () => {
    const failure = callbackError(new URLSearchParams('error=server_error'));
    expect(failure?.code).toBe('provider_error');
    expect(failure?.message).toBe('the provider answered server_error');
  });

  it('is undefined for a callback with a code, or an empty error', () => {
    expect(callbackError(new URLSearchParams('code=abc&state=s'))).toBeUndefined();
    expect(callbackError(new URLSearchParams('error=&code=abc'))).toBeUndefined();
  });
});

describe('reasonOf', () => {
  const coded = (message: string, code: string) => Object.assign(new Error(message), { code });

  it('gives fetch\'s failure with the cause it wraps: its message, and its code where the message lacks it', () => {
    expect(reasonOf(new TypeError('fetch failed', { cause: coded('connect ECONNREFUSED 127.0.0.1:1', 'ECONNREFUSED') })))
      .toBe('fetch failed (connect ECONNREFUSED 127.0.0.1:1)');
    expect(reasonOf(new TypeError('fetch failed', { cause: coded('self-signed certificate', 'DEPTH_ZERO_SELF_SIGNED_CERT') })))
      .toBe('fetch failed (DEPTH_ZERO_SELF_SIGNED_CERT: self-signed certificate)');
    // A connection tried on several addresses: an AggregateError, its code and no message.
    expect(reasonOf(new TypeError('fetch failed', { cause: Object.assign(new AggregateError([], ''), { code: 'ECONNREFUSED' }) }))).toBe('fetch failed (ECONNREFUSED)');
    expect(reasonOf(new TypeError('fetch failed', { cause: new Error('other side closed') }))).toBe('fetch failed (other side closed)');
    // A code that is not a string (an errno) is not a name: the message alone.
    expect(reasonOf(new TypeError('fetch failed', { cause: Object.assign(new Error('other side closed'), { code: 35 }) }))).toBe('fetch failed (other side closed)');
  });

  it('gives the message alone otherwise: no cause, one that is not an Error, one with nothing to say, or another error than a TypeError', () => {
    expect(reasonOf(new TypeError('fetch failed'))).toBe('fetch failed');
    expect(reasonOf(new TypeError('fetch failed', { cause: { access_token: 'never-logged' } }))).toBe('fetch failed');
    expect(reasonOf(new TypeError('fetch failed', { cause: new Error('') }))).toBe('fetch failed');
    expect(reasonOf(new Error('unexpected JWT claim value encountered', { cause: new Error('unexpected "nonce" claim value') }))).toBe('unexpected JWT claim value encountered');
    expect(reasonOf(new DOMException('The operation was aborted due to timeout', 'TimeoutError'))).toBe('The operation was aborted due to timeout');
    expect(reasonOf('a string')).toBe('a string');
  });
});

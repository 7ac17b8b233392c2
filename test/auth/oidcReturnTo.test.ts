// Where a sign-in may send the browser back (CONTRACT §26, "Sign-in redirects match exactly"; RFC
// 9700 §4.1.3): a return_to is allowed only when it is, character for character, an entry of
// auth.oidc.returnTo; on an http:// loopback entry any port. Issue 45: under §15's prefix rule any
// page under the entry, with any query, was allowed, so an ordinary open redirect of the
// application (…/go?to=https://evil/) carried #login_code to an attacker (browsers keep the
// fragment across a redirect), and encoded separators reached paths outside the entry.
import { describe, expect, it } from 'vitest';
import { SignInProviders } from '../../src/auth/providers/configured.js';
import { configSchema } from '../../src/config/schema.js';

function providersWith(returnTo: string[]): SignInProviders {
  const config = configSchema.parse({
    auth: { oidc: { publicUrl: 'https://gw.example.test', returnTo, providers: { idp: { issuer: 'https://idp.example.test', clientId: 'c', clientSecret: 's' } } } },
  });
  return new SignInProviders(config.auth.oidc!);
}

describe('return_to: exact URLs', () => {
  const providers = providersWith(['https://app.example.test/app/', 'https://app.example.test/signed-in', 'http://127.0.0.1:5173/cb', 'http://[::1]/back']);

  it('allows an entry as written, and on a loopback http:// entry the same URL on any port', () => {
    for (const allowed of [
      'https://app.example.test/app/', 'https://app.example.test/signed-in',
      'http://127.0.0.1:5173/cb', 'http://127.0.0.1:41234/cb', 'http://127.0.0.1:65535/cb', 'http://127.0.0.1:1/cb', 'http://127.0.0.1/cb', 'http://[::1]/back', 'http://[::1]:8080/back',
    ]) expect(providers.allowedReturnTo(allowed), allowed).toBe(allowed);
  });

  it('refuses a query, a path under an entry, encoded separators, and any other spelling of an entry', () => {
    for (const refused of [
      // An open redirect of the application under the old prefix: the code would follow it.
      'https://app.example.test/app/go?to=https://evil.test/', 'https://app.example.test/signed-in?next=https://evil.test/',
      'https://app.example.test/app/?x=1', 'https://app.example.test/signed-in?',
      // A page under an entry.
      'https://app.example.test/app/deep/page', 'https://app.example.test/signed-in/x',
      // Encoded separators and dot segments, which servers may read as another path.
      'https://app.example.test/app/..%2fadmin', 'https://app.example.test/app/%5c..%5cadmin', 'https://app.example.test/app/%2e%2e/admin',
      'https://app.example.test/app/../app/', 'https://app.example.test/app//', 'https://app.example.test/app/.',
      // Spellings a parser would take for the entry: no normalisation.
      'HTTPS://app.example.test/app/', 'https://APP.example.test/app/', 'https://app.example.test:443/app/', 'https://app.example.test/%61pp/',
      'https://app.example.test/app', 'https://app.example.test/app/#', 'https://app.example.test/app/#x', ' https://app.example.test/app/',
      'https://u@app.example.test/app/', 'https://app.example.test@evil.test/app/',
      // Loopback: any port, nothing else.
      'http://127.0.0.1:5173/cb/', 'http://127.0.0.1:5173/cb?x', 'http://127.0.0.1:99999/cb', 'http://127.0.0.1:65536/cb', 'http://127.0.0.1:123456/cb', 'http://127.0.0.1:0/cb', 'http://127.0.0.1:05173/cb',
      'http://127.0.0.1:5173@evil.test/cb', 'https://127.0.0.1:5173/cb', 'http://localhost:5173/cb', 'http://127.0.0.2:5173/cb', 'http://[::1]:8080/back/x',
      'http://[::1]:5173/cb', 'http://127.0.0.1/back', ' http://127.0.0.1:41234/cb', 'x:http://127.0.0.1:41234/cb',
      '', '/app/', 'javascript:alert(1)',
    ]) expect(providers.allowedReturnTo(refused), refused).toBeUndefined();
  });

  it('any port is for loopback entries only: another host\'s port is part of the URL', () => {
    const fixed = providersWith(['https://app.example.test:8443/cb', 'http://localhost:5173/cb']);
    expect(fixed.allowedReturnTo('https://app.example.test:8443/cb')).toBe('https://app.example.test:8443/cb');
    expect(fixed.allowedReturnTo('https://app.example.test:9443/cb')).toBeUndefined();
    expect(fixed.allowedReturnTo('http://localhost:5174/cb')).toBeUndefined();
  });
});

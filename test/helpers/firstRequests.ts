// A user's first requests on a gateway started as an operator would (the image, the release
// tarball) from the shipped gateway.yaml: its guarded route /api/v1/races refuses without a token
// and proxies with one. What the shipping tests check first, in one place.
import { expect } from 'vitest';
import type { EchoUpstream } from './echoUpstream.js';
import { newEmail, newPassword } from './gateway.js';
import { request } from './http.js';

/** A guarded route without a token (401, the spec's text), then register, log in, and the route with the token (200, proxied as the user). */
export async function guardedThenServed(base: string, upstream: EchoUpstream): Promise<void> {
  const refused = await request(base, 'GET', '/api/v1/races');
  expect(refused.status).toBe(401);
  expect(refused.json.error).toBe('Token invalide ou expiré');
  const [email, password] = [newEmail(), newPassword()];
  expect((await request(base, 'POST', '/api/v1/auth/register', { json: { email, password } })).status).toBe(201);
  const login = await request(base, 'POST', '/api/v1/auth/login', { json: { email, password } });
  expect(login.status).toBe(200);
  const served = await request(base, 'GET', '/api/v1/races', { headers: { authorization: `Bearer ${login.json.access_token}` } });
  expect(served.status).toBe(200);
  expect(upstream.hits.at(-1)?.headers['x-user-email']).toBe(email);
}

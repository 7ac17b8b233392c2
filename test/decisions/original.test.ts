// Which request a decision is for (CONTRACT §11): the path after /decisions, or the headers a
// proxy sets. Pure function on the security boundary: a client must never choose the path decided.
import { describe, expect, it } from 'vitest';
import { originalRequest } from '../../src/decisions/original.js';

describe('originalRequest: the path form', () => {
  it('decides for the path after /decisions, query and all, with the request\'s own method', () => {
    expect(originalRequest('POST', '/decisions/api/v1/races?x=1', [])).toEqual({ method: 'POST', url: '/api/v1/races?x=1' });
    expect(originalRequest('GET', '/decisions/', [])).toEqual({ method: 'GET', url: '/' });
  });

  it('keeps the path exactly as received (the pipeline normalizes it as the upstream will read it)', () => {
    expect(originalRequest('GET', '/decisions/public/../paid', [])).toEqual({ method: 'GET', url: '/public/../paid' });
  });

  it('ignores the forwarding headers: the path says it all', () => {
    expect(originalRequest('GET', '/decisions/paid', ['X-Forwarded-Uri', '/public', 'X-Forwarded-Method', 'OPTIONS'])).toEqual({ method: 'GET', url: '/paid' });
  });
});

describe('originalRequest: the headers form', () => {
  it('reads X-Forwarded-Uri and X-Forwarded-Method first', () => {
    const raw = ['Host', 'gw', 'X-Original-URI', '/public', 'X-Forwarded-Uri', '/paid?a=1', 'X-Original-Method', 'GET', 'X-Forwarded-Method', 'DELETE'];
    expect(originalRequest('GET', '/decisions', raw)).toEqual({ method: 'DELETE', url: '/paid?a=1' });
  });

  it('falls back to X-Original-URI and X-Original-Method, then to the request\'s own method', () => {
    expect(originalRequest('GET', '/decisions', ['x-original-uri', '/paid', 'x-original-method', 'PUT'])).toEqual({ method: 'PUT', url: '/paid' });
    expect(originalRequest('PATCH', '/decisions', ['x-original-uri', '/paid'])).toEqual({ method: 'PATCH', url: '/paid' });
  });

  it('reads header names in any case, and trims values', () => {
    expect(originalRequest('GET', '/decisions', ['X-FORWARDED-URI', ' /paid ', 'x-forwarded-METHOD', ' POST '])).toEqual({ method: 'POST', url: '/paid' });
  });

  it('applies to /decisions with a query string too', () => {
    expect(originalRequest('GET', '/decisions?from=caddy', ['X-Forwarded-Uri', '/paid'])).toEqual({ method: 'GET', url: '/paid' });
  });

  it('refuses to guess: no URI, an empty one, or a method that is not a token', () => {
    expect(originalRequest('GET', '/decisions', [])).toBeUndefined();
    expect(originalRequest('GET', '/decisions', ['X-Forwarded-Uri', ''])).toBeUndefined();
    expect(originalRequest('GET', '/decisions', ['X-Forwarded-Uri', '/paid', 'X-Forwarded-Method', 'GET /public'])).toBeUndefined();
    expect(originalRequest('GET', '/decisions', ['X-Forwarded-Uri', '/paid', 'X-Forwarded-Method', ''])).toBeUndefined();
  });

  it('refuses a header sent twice: a proxy that appends lets the client choose which one counts', () => {
    for (const name of ['X-Forwarded-Uri', 'X-Original-URI']) {
      expect(originalRequest('GET', '/decisions', [name, '/public', name.toLowerCase(), '/paid'])).toBeUndefined();
    }
    expect(originalRequest('GET', '/decisions', ['X-Forwarded-Uri', '/paid', 'X-Forwarded-Method', 'GET', 'X-Forwarded-Method', 'DELETE'])).toBeUndefined();
    expect(originalRequest('GET', '/decisions', ['X-Forwarded-Uri', '/paid', 'X-Original-Method', 'GET', 'x-original-method', 'DELETE'])).toBeUndefined();
  });
});

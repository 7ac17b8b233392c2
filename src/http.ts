// Small helpers for reading requests the way the spec asks.
import type { IncomingHttpHeaders } from 'node:http';

/** Bodies that are missing, not JSON, of another type, or JSON but not an object read as {}. */
export function lenientJson(text: string | undefined): Record<string, unknown> {
  if (!text) return {};
  try {
    const value: unknown = JSON.parse(text);
    return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

/** application/json or application/<anything>+json (RFC 6839 suffix), whatever the parameters. */
export function isJsonType(contentType: string | undefined): boolean {
  const type = (contentType ?? '').split(';', 1)[0]!.trim().toLowerCase();
  return type === 'application/json' || (type.startsWith('application/') && type.endsWith('+json'));
}

/** A body field as the spec reads it: a string, or '' when missing or of another type. */
export function textField(body: unknown, name: string): string {
  const value = body !== null && typeof body === 'object' ? (body as Record<string, unknown>)[name] : undefined;
  return typeof value === 'string' ? value : '';
}

// RFC 9110 §7.2: uri-host [ ":" port ], the host an IP literal, an IPv4 address or a registered
// name. Kept strict (no userinfo, no percent-escapes): the value is repeated to upstreams in
// X-Forwarded-Host, where frameworks build absolute URLs (redirects, password-reset links) from it.
const HOST = /^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._~-]+)(?::\d{1,5})?$/;

/** An empty Host is valid (RFC 9112 §3.2: a target without authority); it is then not repeated. */
export function isValidHost(value: string): boolean {
  return value === '' || (value.length <= 255 && HOST.test(value));
}

export function headerValue(headers: IncomingHttpHeaders, name: string): string {
  const value = headers[name];
  return (Array.isArray(value) ? value[0] : value) ?? '';
}

/** A cookie's value from the Cookie header, or undefined. */
export function cookieValue(headers: IncomingHttpHeaders, name: string): string | undefined {
  for (const pair of headerValue(headers, 'cookie').split(';')) {
    const [key, ...rest] = pair.trim().split('=');
    if (key === name) return rest.join('=');
  }
  return undefined;
}

// Small helpers for reading requests the way the spec asks.
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import type { Http2ServerRequest } from 'node:http2';
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';

/** A bearer credential in an Authorization header (the admin key, an operator token, the metrics token). */
export const BEARER = /^Bearer[ \t]+(\S+)[ \t]*$/i;

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

/** A Content-Type's media type, lower case, without its parameters ('' for none). */
export function mediaType(contentType: string | undefined): string {
  return (contentType ?? '').split(';', 1)[0]!.trim().toLowerCase();
}

/** application/json or application/<anything>+json (RFC 6839 suffix), whatever the parameters. */
export function isJsonType(contentType: string | undefined): boolean {
  const type = mediaType(contentType);
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

// A gateway is asked for a few names, on every request: those found valid are kept, up to this
// many (the values are the clients' to choose), so that each is tested once (issue 77).
const VALID_HOSTS_KEPT = 1_000;
const validHosts = new Set<string>();

/** An empty Host is valid (RFC 9112 §3.2: a target without authority); it is then not repeated. */
export function isValidHost(value: string): boolean {
  if (value === '' || validHosts.has(value)) return true;
  const valid = value.length <= 255 && HOST.test(value);
  if (valid && validHosts.size < VALID_HOSTS_KEPT) validHosts.add(value);
  return valid;
}

// RFC 9112 §3.2: a server MUST answer 400 to an HTTP/1.1 request without Host, with more than
// one, or with one that is not a host (`evil:1@127.0.0.1`). Node's own check (requireHostHeader,
// turned off in listenerOptions) answers with an empty body; Node keeps the first of two. HTTP/2
// says it in :authority (RFC 9113 §8.3.1), which goes upstream as X-Forwarded-Host all the same.
/** Whether the request's Host (or :authority) is refused; `headers` are req.headers, when the caller has them already. */
export function refusesHost(req: IncomingMessage | Http2ServerRequest, headers: IncomingHttpHeaders = req.headers): boolean {
  const { host, ':authority': authority } = headers as { host?: string; ':authority'?: string };
  if (host === undefined && authority === undefined) return req.httpVersion === '1.1';
  return (host !== undefined && !isValidHost(host)) || (authority !== undefined && !isValidHost(authority)) || hostHeaders(req.rawHeaders) > 1;
}

function hostHeaders(raw: string[]): number {
  let n = 0;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    // The two usual spellings compared as sent, before a lower-cased copy is made.
    if (name.length === 4 && (name === 'Host' || name === 'host' || name.toLowerCase() === 'host')) n++;
  }
  return n;
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

/** localhost and *.localhost: names RFC 6761 reserves for loopback, whatever DNS says. */
export function isLocalhostName(host: string): boolean {
  const name = host.toLowerCase().replace(/\.+$/, '');
  return name === 'localhost' || name.endsWith('.localhost');
}

/** An address in 127.0.0.0/8 or ::1 (an IPv4-mapped ::ffff:127.x counts as its IPv4 address). */
export function isLoopbackAddress(address: string): boolean {
  try {
    return ipaddr.process(address).range() === 'loopback';
  } catch {
    return false;
  }
}

/** A host (without an IPv6 literal's brackets) that can only mean this machine. */
export function isLoopbackHost(host: string): boolean {
  return isLocalhostName(host) || (isIP(host) !== 0 && isLoopbackAddress(host));
}

/** The host of a URL without the brackets of an IPv6 literal. */
export function bareHost(url: URL): string {
  return url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
}

const MAX_URL_LENGTH = 2048;

/**
 * The URL when it is a well-formed https URL with a host, else undefined (400 webhookUrlInvalid).
 * With `loopbackHttp` (hooks.allowPrivateNetworks: an operator's receiver on the same machine
 * during development, CONTRACT §28), a plain http URL whose host is a loopback address or name
 * passes too; the delivery then checks that every address it resolves to is loopback
 * (webhooks/sender.ts), so no cleartext request leaves the machine.
 */
export function parseWebhookUrl(text: string, { loopbackHttp = false } = {}): URL | undefined {
  if (!text || text.length > MAX_URL_LENGTH) return undefined;
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return undefined;
  }
  if (!url.hostname) return undefined;
  if (url.protocol === 'https:') return url;
  return loopbackHttp && url.protocol === 'http:' && isLoopbackHost(bareHost(url)) ? url : undefined;
}

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

export function headerValue(headers: IncomingHttpHeaders, name: string): string {
  const value = headers[name];
  return (Array.isArray(value) ? value[0] : value) ?? '';
}

/** Today as YYYY-MM-DD in UTC: the unit of the free plan's daily limit. */
export function utcDay(now: Date): string {
  return now.toISOString().slice(0, 10);
}

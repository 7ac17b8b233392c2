// The console's origin (CONTRACT §26): the one address browsers use for it. Its one-time sign-in
// links are built from it and its sign-ins and changes accepted only from a page of it, never from
// the request's Host: whoever sends a request writes its Host, so a link minted for
// `Host: evil.example` would hand its ticket to that site's page, and a DNS-rebinding page (a name
// of the attacker's resolved to 127.0.0.1) sends a Host and an Origin that agree with each other.
import { isIPv6 } from 'node:net';
import type { Config } from '../config/schema.js';

export type ConsoleSettings = Pick<Config['admin'], 'host' | 'apiKey' | 'tls' | 'publicUrl'>;

/** The names of this machine a browser may use for a loopback listener: one origin for the console. */
const LOOPBACK_ALIASES = ['127.0.0.1', 'localhost', '[::1]'];

const bare = (host: string) => host.replace(/^\[(.*)\]$/, '$1');

export function isLoopback(host: string): boolean {
  return host === 'localhost' || bare(host) === '::1' || /^127\./.test(host);
}

/** A listener on every address: it has no one name a link could carry. */
export function isWildcard(host: string): boolean {
  const ip = bare(host);
  return ip === '' || ip === '0.0.0.0' || (isIPv6(ip) && /^[0:]+$/.test(ip));
}

/** Why the console is not served (none: it is), for `gateway check` and the admin listener's start. */
export function consoleOffReasons({ host, apiKey, tls, publicUrl }: ConsoleSettings): string[] {
  const reasons: string[] = [];
  if (!apiKey) reasons.push('admin.apiKey is empty');
  // Off loopback without TLS, the admin key and the session cookie would cross the network in clear (§16).
  if (!tls && !isLoopback(host)) reasons.push(`admin.host ${JSON.stringify(host)} is not a loopback address and admin.tls is not set: the session cookie would cross the network in clear`);
  if (isWildcard(host) && !publicUrl) {
    reasons.push(`admin.host ${JSON.stringify(host)} is every address and admin.publicUrl is not set: the console has no origin to build its sign-in links from and to accept pages of (set admin.publicUrl to the address operators open, such as https://gateway-admin.example.com)`);
  }
  return reasons;
}

/** Whether the admin listener serves the console (CONTRACT §16, §26). */
export function consoleAllowed(admin: ConsoleSettings): boolean {
  return consoleOffReasons(admin).length === 0;
}

export interface ConsoleOrigin {
  /** What links are built from: admin.publicUrl, else the listener's own address. */
  link: string;
  /** The origins a page of the console may have (an Origin header is compared with these). */
  accepted: ReadonlySet<string>;
}

/** What links for operators are built from; none for a listener on every address without admin.publicUrl (no one name). */
export function linkOrigin(admin: Omit<ConsoleSettings, 'apiKey'>, port: number): string | undefined {
  return isWildcard(admin.host) && !admin.publicUrl ? undefined : consoleOrigin(admin, port).link;
}

/** The console's origin; `port` is the one the listener got (admin.port 0 takes any free port). */
export function consoleOrigin({ host, tls, publicUrl }: Omit<ConsoleSettings, 'apiKey'>, port: number): ConsoleOrigin {
  if (publicUrl) return { link: publicUrl, accepted: new Set([publicUrl]) };
  // As browsers serialize an Origin: lower case, IPv6 in brackets, no :443 for https.
  const origin = (name: string) => new URL(`${tls ? 'https' : 'http'}://${name}:${port}`).origin;
  const own = origin(isIPv6(host) ? `[${host}]` : host);
  return { link: own, accepted: new Set([own, ...(isLoopback(host) ? LOOPBACK_ALIASES.map(origin) : [])]) };
}

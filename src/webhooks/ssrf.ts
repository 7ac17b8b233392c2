// Webhook targets are URLs chosen by users, and the gateway calls them from inside the network:
// without these checks a user could make it POST to 127.0.0.1, the cloud metadata service
// (169.254.169.254) or any private host (SSRF). The check runs at registration and again before
// every delivery, and the delivery connects to the very address checked here, so a DNS answer
// that changes between check and connection (rebinding) cannot send it elsewhere.
import { lookup as dnsLookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';
import { bareHost, isLocalhostName } from '../http.js';

// Where a webhook's URL is read (http.ts: the hooks' configuration reads it too).
export { bareHost, parseWebhookUrl } from '../http.js';
import { withTimeout } from '../time.js';

// Global unicast IPv6 is 2000::/3; everything else (IPv4-compatible ::a.b.c.d, NAT64, 6to4,
// Teredo, documentation, ...) either embeds an IPv4 address that may be private or is not public.
const GLOBAL_UNICAST_V6 = ipaddr.IPv6.parseCIDR('2000::/3');

/**
 * Public means plain unicast: not loopback, private, link-local, unique-local, CGNAT, multicast,
 * broadcast, unspecified or reserved. ipaddr.process() turns an IPv4-mapped IPv6 address
 * (::ffff:127.0.0.1) into the IPv4 address it stands for, so it is judged as that.
 */
export function isPublicAddress(address: string): boolean {
  let ip: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    ip = ipaddr.process(address);
  } catch {
    return false; // not an address we understand (a zone id, say): not public
  }
  if (ip.range() !== 'unicast') return false;
  return ip.kind() === 'ipv4' || (ip as ipaddr.IPv6).match(GLOBAL_UNICAST_V6);
}

export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

export type LookupAll = (hostname: string) => Promise<ResolvedAddress[]>;

export const systemLookup: LookupAll = async (hostname) =>
  (await dnsLookup(hostname, { all: true, verbatim: true })).map((a) => ({ address: a.address, family: a.family === 6 ? 6 : 4 }));

export type TargetCheck =
  | { kind: 'ok'; target: ResolvedAddress }
  /** the host is or resolves to a non-public address */
  | { kind: 'forbidden'; address: string }
  /** the name does not resolve (now) */
  | { kind: 'unresolved'; error: unknown };

/**
 * Resolves the URL's host once and checks every address it has: one private address among
 * public ones is enough to refuse, since the connection could be made to any of them.
 * getaddrinfo has no deadline of its own (a dead resolver holds it for its retries): a name
 * with no answer within `timeoutMs` counts as unresolved.
 */
export async function checkTarget(url: URL, options: { allowPrivateNetworks: boolean; timeoutMs: number; lookup?: LookupAll }): Promise<TargetCheck> {
  const host = bareHost(url);
  let addresses: ResolvedAddress[];
  const family = isIP(host);
  if (family) {
    addresses = [{ address: host, family: family === 6 ? 6 : 4 }];
  } else if (!options.allowPrivateNetworks && isLocalhostName(host)) {
    // RFC 6761: these names mean loopback whatever DNS says, or fails to say.
    return { kind: 'forbidden', address: host };
  } else {
    try {
      addresses = await withTimeout((options.lookup ?? systemLookup)(host), options.timeoutMs, `${host}: no DNS answer within ${options.timeoutMs} ms`);
    } catch (error) {
      return { kind: 'unresolved', error };
    }
    if (addresses.length === 0) return { kind: 'unresolved', error: new Error(`${host}: no address`) };
  }
  if (!options.allowPrivateNetworks) {
    const bad = addresses.find((a) => !isPublicAddress(a.address));
    if (bad) return { kind: 'forbidden', address: bad.address };
  }
  return { kind: 'ok', target: addresses[0]! };
}

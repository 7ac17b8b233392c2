// The TLS setup of each https:// upstream (CONTRACT §10: its CA, the client certificate the
// gateway presents, the name checked), read from the files when a live snapshot is made, so a
// reload (SIGHUP) reads them again. The proxy's agent picks one per new connection
// (proxy/upstreamTls.ts).
import { readFileSync } from 'node:fs';
import { createSecureContext, type SecureContext } from 'node:tls';
import type { Config } from '../config/schema.js';

/** What a TLS connection to an upstream's origin is made with. */
export interface UpstreamTls {
  secureContext: SecureContext;
  servername: string | undefined;
}

/**
 * The TLS setup of each https:// origin that has `tls`, its files read now (start, SIGHUP). Throws
 * naming the upstream when a file cannot be read, or when the key is not the certificate's.
 */
export function readUpstreamTls(upstreams: Config['upstreams']): Map<string, UpstreamTls> {
  const byOrigin = new Map<string, UpstreamTls>();
  for (const [name, { url, tls }] of Object.entries(upstreams)) {
    if (!tls) continue;
    const origin = new URL(url).origin;
    if (byOrigin.has(origin)) continue; // the schema made their settings equal
    try {
      const read = (file: string | undefined) => (file ? readFileSync(file, 'utf8') : undefined);
      const secureContext = createSecureContext({ ca: read(tls.caFile), cert: read(tls.certFile), key: read(tls.keyFile) });
      byOrigin.set(origin, { secureContext, servername: tls.serverName });
    } catch (err) {
      throw new Error(`upstreams.${name}.tls: ${(err as Error).message}`, { cause: err });
    }
  }
  return byOrigin;
}

// undici's own default for a connection that does not complete.

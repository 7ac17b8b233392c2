// TLS to upstreams (CONTRACT §10): per https:// upstream, the CA it is checked against (instead of
// the public ones: an internal service's certificate is signed by the operator's own CA), the
// client certificate the gateway presents (mTLS), and the name checked in its certificate.
//
// One undici Agent carries every proxied request, as before. Its connector picks, at each new
// connection, the TLS setup of the connection's origin in the live configuration: a reload that
// changes a CA or rotates the client certificate (files are read again on SIGHUP) applies to the
// next connection, while pooled connections finish their keep-alive life on the setup they were
// verified with. The schema makes one origin one setup (connections are pooled per origin).
import { readFileSync } from 'node:fs';
import { createSecureContext, type SecureContext } from 'node:tls';
import { Agent, buildConnector } from 'undici';
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
const CONNECT_TIMEOUT_MS = 10_000;

/** The Agent the proxy sends through; `tlsFor` gives the current setup of an origin (live). */
export function upstreamAgent(options: Agent.Options, tlsFor: (origin: string) => UpstreamTls | undefined): Agent {
  const plain = buildConnector({ timeout: CONNECT_TIMEOUT_MS });
  // One connector per setup, so TLS sessions are resumed across connections to the same upstream.
  const connectors = new WeakMap<UpstreamTls, buildConnector.connector>();
  const connect: buildConnector.connector = (target, callback) => {
    const tls = target.protocol === 'https:' ? tlsFor(`https://${target.host}`) : undefined;
    if (!tls) return plain(target, callback);
    let connector = connectors.get(tls);
    if (!connector) {
      connector = buildConnector({ timeout: CONNECT_TIMEOUT_MS, secureContext: tls.secureContext, servername: tls.servername });
      connectors.set(tls, connector);
    }
    return connector(target, callback);
  };
  return new Agent({ ...options, connect });
}

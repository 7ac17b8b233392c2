// TLS to upstreams (CONTRACT §10): per https:// upstream, the CA it is checked against (instead of
// the public ones: an internal service's certificate is signed by the operator's own CA), the
// client certificate the gateway presents (mTLS), and the name checked in its certificate.
//
// One undici Agent carries every proxied request, as before. Its connector picks, at each new
// connection, the TLS setup of the connection's origin in the live configuration: a reload that
// changes a CA or rotates the client certificate (files are read again on SIGHUP) applies to the
// next connection, while pooled connections finish their keep-alive life on the setup they were
// verified with. The schema makes one origin one setup (connections are pooled per origin).
import { Agent, buildConnector } from 'undici';
import type { UpstreamTls } from '../live/upstreamTls.js';

const CONNECT_TIMEOUT_MS = 10_000;
// HTTP/1.1 to upstreams, as the header rules and the pool (one request per connection at a time)
// are written for: undici 8 would otherwise offer h2 in ALPN and speak it to any upstream that
// takes it (test/proxy/upstreamTls.test.ts).
const HTTP1_ONLY = { allowH2: false } as const;

/** The Agent the proxy sends through; `tlsFor` gives the current setup of an origin (live). */
export function upstreamAgent(options: Agent.Options, tlsFor: (origin: string) => UpstreamTls | undefined): Agent {
  const plain = buildConnector({ ...HTTP1_ONLY, timeout: CONNECT_TIMEOUT_MS });
  // One connector per setup, so TLS sessions are resumed across connections to the same upstream.
  const connectors = new WeakMap<UpstreamTls, buildConnector.connector>();
  const connect: buildConnector.connector = (target, callback) => {
    const tls = target.protocol === 'https:' ? tlsFor(`https://${target.host}`) : undefined;
    if (!tls) return plain(target, callback);
    let connector = connectors.get(tls);
    if (!connector) {
      connector = buildConnector({ ...HTTP1_ONLY, timeout: CONNECT_TIMEOUT_MS, secureContext: tls.secureContext, servername: tls.servername });
      connectors.set(tls, connector);
    }
    return connector(target, callback);
  };
  return new Agent({ ...options, ...HTTP1_ONLY, connect });
}

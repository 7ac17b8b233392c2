// server: the public listener (address, workers, body limit, shutdown delay, HTTPS); listenerTls
// is the admin listener's HTTPS too.
import { z } from 'zod';
import { bool, durationOrZero, int, port, size } from './values.js';

// HTTPS on a listener (the public one, the admin one), its files read again on SIGHUP.
export const listenerTls = z.strictObject({
  certFile: z.string().min(1).meta({ description: 'The certificate chain (PEM): the certificate first, then its intermediates.', examples: ['tls/cert.pem'] }),
  keyFile: z.string().min(1).meta({ description: 'Its private key (PEM).', examples: ['tls/key.pem'] }),
  http2: bool().prefault(false).meta({ description: 'Also serve HTTP/2 (negotiated by ALPN); HTTP/1.1 clients are still served.' }),
  minVersion: z.enum(['TLSv1.2', 'TLSv1.3']).default('TLSv1.2').meta({ description: 'The oldest TLS version offered.' }),
  ciphers: z.string().min(1).optional().meta({ description: 'OpenSSL cipher list replacing the default (TLS 1.3, and TLS 1.2 with ECDHE/DHE and AES-GCM or ChaCha20-Poly1305 only).' }),
});

export const serverSchema = z.strictObject({
  // Unset: 127.0.0.1 on embedded storage, 0.0.0.0 with storage.postgres (config/load.ts).
  host: z.string().default('127.0.0.1').meta({
    description: 'The address to listen on; HOST overrides it. Unset: 127.0.0.1 on embedded storage (a laptop), 0.0.0.0 with storage.postgres (a deployment).',
  }),
  port: port.default(8080),
  // Processes serving these ports (node:cluster, CONTRACT §18): each one a whole instance, so
  // more than one needs storage.postgres. `auto`: one per CPU the process may use.
  workers: z.union([int(1, 256), z.literal('auto')], { error: 'expected a number of processes (1 to 256) or auto' }).default(1)
    .meta({ description: 'Processes serving the listeners (node:cluster): a number, or auto for one per CPU the process may use (cgroup quota included). More than 1 needs storage.postgres.' }),
  bodyLimit: size.prefault('1mb'),
  trustProxy: bool().prefault(false),
  // On SIGTERM, keep serving (readyz 503, responses with Connection: close) this long, so a load
  // balancer stops sending before the listener closes. SIGINT (Ctrl-C) does not wait.
  shutdownDelay: durationOrZero.prefault('5s'),
  // HTTPS on the public listener (CONTRACT §10); the files are read again on SIGHUP.
  tls: listenerTls.optional(),
}).prefault({});

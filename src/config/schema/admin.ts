// admin: the admin listener (the admin API, metrics, health, the console), its key, HTTPS, the
// console's origin and the operators' passkeys.
import { z } from 'zod';
import { adminKey, isUrl, NAME, OCTET, port, PORT } from './values.js';
import { relyingParty } from './auth.js';
import { listenerTls } from './server.js';

// The console's origin (CONTRACT §26): its sign-in links are built from it and its pages accepted
// only from it. An origin only (the console is at /console/ on it), kept in the form browsers send,
// and https:// off loopback: a session cookie or a ticket sent over plain HTTP can be read on the
// way. The pattern says it all, so gateway.schema.json refuses what check refuses.
const CONSOLE_ORIGIN = new RegExp(`^(?:[Hh][Tt][Tt][Pp][Ss]://(?:\\[[0-9A-Fa-f:.]+\\]|(?:${OCTET}\\.){3}${OCTET}|${NAME})|[Hh][Tt][Tt][Pp]://(?:127\\.0\\.0\\.1|\\[::1\\]|[Ll][Oo][Cc][Aa][Ll][Hh][Oo][Ss][Tt]))(?::${PORT})?/?$`);
const consoleOriginUrl = z.string()
  .refine((u) => CONSOLE_ORIGIN.test(u) && isUrl(u, /^https?:$/), 'expected the console\'s origin, an https:// URL without path, query or fragment such as https://gateway-admin.example.com (http:// only on 127.0.0.1, ::1 or localhost)')
  .transform((u) => new URL(u).origin)
  .meta({
    pattern: CONSOLE_ORIGIN.source, examples: ['https://gateway-admin.example.com'],
    description: 'The console\'s origin as operators open it (through a proxy, say): its sign-in links name it and its pages are accepted only from it. Unset: http(s)://{host}:{port}, with 127.0.0.1, localhost and [::1] alike on loopback; on every address (0.0.0.0, ::) the console is then off.',
  });

export const adminSchema = z.strictObject({
  host: z.string().default('127.0.0.1'),
  port: port.default(9090),
  apiKey: adminKey,
  // Off loopback, the admin key, the metrics and the console's cookie would cross the network in clear.
  tls: listenerTls.optional().meta({ description: 'Serve the admin listener over HTTPS (the admin API, metrics, health, and the console off loopback); the files are read again on SIGHUP.' }),
  publicUrl: consoleOriginUrl.optional(),
  // CONTRACT §24: operators' passkeys, their second factor beside TOTP (docs/operators.md#passkeys).
  passkeys: relyingParty(z.string().min(1).default('auth-gateway console').meta({ examples: ['Example console'] }))
    .optional().meta({
      description: 'WebAuthn relying party of the console (operator passkeys): rpId (the console\'s host name), origins (the console\'s origins); '
        + 'absent, or the console reached by another origin (an IP): operators sign in with TOTP only.',
    }),
}).prefault({});

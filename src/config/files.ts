// Settings that name a file. load.ts resolves them against the config file's directory; `gateway
// check`, and `gateway start` before it opens anything, read each one and parse it as its kind,
// so a missing or broken file is a configuration error naming the key, not a failure later on.
// A new file setting is one line in fileSettings(); a new kind of file, one checker.
import { createPrivateKey, X509Certificate } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { createSecureContext } from 'node:tls';
import { checkSigningKey } from '../auth/tokens.js';
import type { Config } from './schema.js';

/**
 * Reads and parses `file` as the setting's kind; returns what is wrong ("FILE: …"), or nothing.
 * `companion`: the file it goes with (a private key's certificate), when the setting has one.
 */
type Checker = (file: string, config: Config, companion?: string) => Promise<string | undefined>;

async function readText(file: string): Promise<{ text: string } | { problem: string }> {
  try {
    return { text: await readFile(file, 'utf8') };
  } catch (err) {
    return { problem: `${file}: cannot read the file: ${(err as NodeJS.ErrnoException).code ?? String(err)}` };
  }
}

const CHECKERS = {
  /** PEM certificates (a CA bundle, a certificate chain): at least one, and each one parses. */
  async certificates(file) {
    const read = await readText(file);
    if ('problem' in read) return read.problem;
    const { text } = read;
    const blocks = text.match(/-----BEGIN CERTIFICATE-----[^-]+-----END CERTIFICATE-----/g);
    if (!blocks) return `${file}: no PEM certificate in the file (expected -----BEGIN CERTIFICATE----- blocks)`;
    for (const [i, block] of blocks.entries()) {
      try {
        new X509Certificate(block);
      } catch (err) {
        return `${file}: certificate ${i + 1} of ${blocks.length} does not parse: ${(err as Error).message}`;
      }
    }
    return undefined;
  },
  /** A PEM private key; with its certificate (`companion`), one that belongs to it. */
  async privateKey(file, _config, companion) {
    const read = await readText(file);
    if ('problem' in read) return read.problem;
    try {
      createPrivateKey(read.text);
    } catch (err) {
      return `${file}: not a PEM private key: ${(err as Error).message}`;
    }
    const cert = companion ? await readText(companion) : undefined;
    if (!cert || 'problem' in cert) return undefined; // the certificate's own setting reports it
    try {
      // What a TLS handshake would refuse: a key that is not the certificate's.
      createSecureContext({ key: read.text, cert: cert.text });
    } catch (err) {
      return `${file}: does not go with the certificate ${companion}: ${(err as Error).message}`;
    }
    return undefined;
  },
  /** The access-token signing key, loaded exactly as `start` loads it (auth/tokens.ts). */
  async signingKey(file, config) {
    try {
      await checkSigningKey({ ...config.auth.jwt, privateKeyFile: file });
      return undefined;
    } catch (err) {
      return (err as Error).message;
    }
  },
} satisfies Record<string, Checker>;

export interface FileSetting {
  /** The key path, as problems name it: webhooks.caFile. */
  key: string;
  kind: keyof typeof CHECKERS;
  get(): string | undefined;
  set(file: string): void;
  /** The file this one goes with (a key's certificate), read at check time. */
  companion?: () => string | undefined;
}

type FileProps<T> = { [P in keyof T]: T[P] extends string | undefined ? P : never }[keyof T];

/** A `string | undefined` property of one of the config's objects, as a file setting. */
function setting<T>(key: string, kind: FileSetting['kind'], holder: T, prop: FileProps<T>, companion?: FileProps<T>): FileSetting {
  return {
    key, kind,
    get: () => holder[prop] as string | undefined,
    set: (file) => { holder[prop] = file as T[typeof prop]; },
    ...(companion === undefined ? {} : { companion: () => holder[companion] as string | undefined }),
  };
}

export function fileSettings(config: Config): FileSetting[] {
  return [
    ...(config.server.tls ? [
      setting('server.tls.certFile', 'certificates', config.server.tls, 'certFile'),
      setting('server.tls.keyFile', 'privateKey', config.server.tls, 'keyFile', 'certFile'),
    ] : []),
    setting('auth.jwt.privateKeyFile', 'signingKey', config.auth.jwt, 'privateKeyFile'),
    setting('webhooks.caFile', 'certificates', config.webhooks, 'caFile'),
    ...Object.entries(config.upstreams).flatMap(([name, { tls }]) => (tls ? [
      setting(`upstreams.${name}.tls.caFile`, 'certificates', tls, 'caFile'),
      setting(`upstreams.${name}.tls.certFile`, 'certificates', tls, 'certFile'),
      setting(`upstreams.${name}.tls.keyFile`, 'privateKey', tls, 'keyFile', 'certFile'),
    ] : [])),
  ];
}

/** Every file setting's problem, as "key: FILE: what is wrong"; empty when all files are fine. */
export async function checkFiles(config: Config): Promise<string[]> {
  const problems = await Promise.all(fileSettings(config).map(async ({ key, kind, get, companion }) => {
    const file = get();
    const problem = file ? await CHECKERS[kind](file, config, companion?.()) : undefined;
    return problem ? `${key}: ${problem}` : undefined;
  }));
  return problems.filter((p) => p !== undefined);
}

// Settings that name a file. load.ts resolves them against the config file's directory; `gateway
// check`, and `gateway start` before it opens anything, read each one and parse it as its kind,
// so a missing or broken file is a configuration error naming the key, not a failure later on.
// A new file setting is one line in fileSettings(); a new kind of file, one checker.
import { createPrivateKey, X509Certificate, type KeyObject } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { createSecureContext } from 'node:tls';
import type { Config } from './schema.js';
import { readMessageFiles } from '../errors/index.js';
import { readMailTemplates } from '../mail/index.js';
import { isInlinePem, keyTypeProblem, verifyingKeyProblem } from './schema/values.js';

export { isInlinePem, keyTypeProblem, verifyingKeyProblem };

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
  /** organizations.sso.publicMailDomains: a text file, read (its lines are parsed at start: domains/publicMail.ts). */
  async textFile(file) {
    const read = await readText(file);
    return 'problem' in read ? read.problem : undefined;
  },
  /** errors.messages: a folder of <lang>.json texts (errors/messageFiles.ts). */
  async messageFolder(dir) {
    const { problems } = await readMessageFiles(dir);
    return problems.length ? problems.join('; ') : undefined;
  },
  /** mail.templates: a folder of <lang>/<kind>.subject.txt, .txt and .html (mail/templates.ts). */
  async mailTemplateFolder(dir) {
    const { problems } = await readMailTemplates(dir);
    return problems.length ? problems.join('; ') : undefined;
  },
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
  /**
   * The access-token signing key: what jose's importPKCS8 takes for the algorithm (credentials/tokens.ts
   * loads it so at start; test/config/files.test.ts holds the two to the same answers).
   */
  async signingKey(file, config) {
    const { algorithm } = config.auth.jwt;
    const read = await readText(file);
    if ('problem' in read) return read.problem;
    const problem = signingKeyProblem(read.text, algorithm);
    return problem && `${file}: cannot sign ${algorithm} with it: ${problem}`;
  },
  /** An auth.jwt.previous file (asymmetric algorithms): a PEM public key, or the private key it belongs to, of the algorithm. */
  async verifyingKey(file, config) {
    const read = await readText(file);
    if ('problem' in read) return read.problem;
    const problem = verifyingKeyProblem(read.text, config.auth.jwt.algorithm);
    return problem && `${file}: cannot verify ${config.auth.jwt.algorithm} with it: ${problem}`;
  },
  /**
   * portal.product.logo (CONTRACT §30): a PNG (by its signature) or an SVG (an <svg> element),
   * under 100 KB: the portal's pages carry it, within their weight.
   */
  async portalLogo(file) {
    let bytes: Buffer;
    try {
      bytes = await readFile(file);
    } catch (err) {
      return `${file}: cannot read the file: ${(err as NodeJS.ErrnoException).code ?? String(err)}`;
    }
    if (bytes.length >= LOGO_MAX_BYTES) return `${file}: ${bytes.length} bytes; expected a logo under 100 KB`;
    const png = bytes.subarray(0, 8).equals(PNG_SIGNATURE);
    const svg = /\.svg$/i.test(file) && /^(?:\uFEFF)?\s*(?:<\?xml[^>]*\?>\s*)?(?:<!--[\s\S]*?-->\s*)*(?:<!DOCTYPE[^>]*>\s*)?<svg[\s>]/i.test(bytes.toString('utf8'));
    return png || svg ? undefined : `${file}: expected a PNG or SVG image`;
  },
} satisfies Record<string, Checker>;

const LOGO_MAX_BYTES = 100 * 1024;
const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

/** Why a PEM text is not a PKCS#8 private key that signs `algorithm`; undefined when it is one. */
export function signingKeyProblem(pem: string, algorithm: Config['auth']['jwt']['algorithm']): string | undefined {
  // jose reads PKCS#8 only: a SEC1 (`EC PRIVATE KEY`) or PKCS#1 (`RSA PRIVATE KEY`) file is refused.
  if (!/^-----BEGIN PRIVATE KEY-----/m.test(pem)) return 'not a PEM PKCS#8 private key (-----BEGIN PRIVATE KEY-----)';
  let key: KeyObject;
  try {
    key = createPrivateKey(pem);
  } catch (err) {
    return `not a PEM private key: ${(err as Error).message}`;
  }
  return keyTypeProblem(key, algorithm);
}

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
    ...(['server', 'admin'] as const).flatMap((listener) => {
      const { tls } = config[listener];
      return tls ? [
        setting(`${listener}.tls.certFile`, 'certificates', tls, 'certFile'),
        setting(`${listener}.tls.keyFile`, 'privateKey', tls, 'keyFile', 'certFile'),
      ] : [];
    }),
    setting('auth.jwt.privateKeyFile', 'signingKey', config.auth.jwt, 'privateKeyFile'),
    ...previousKeyFiles(config.auth.jwt),
    setting('webhooks.caFile', 'certificates', config.webhooks, 'caFile'),
    setting('errors.messages', 'messageFolder', config.errors, 'messages'),
    ...(config.mail ? [setting('mail.templates', 'mailTemplateFolder', config.mail, 'templates')] : []),
    ...(config.portal ? [setting('portal.product.logo', 'portalLogo', config.portal.product, 'logo')] : []),
    ...(config.organizations?.sso ? [setting('organizations.sso.publicMailDomains', 'textFile', config.organizations.sso, 'publicMailDomains')] : []),
    ...Object.entries(config.upstreams).flatMap(([name, { tls }]) => (tls ? [
      setting(`upstreams.${name}.tls.caFile`, 'certificates', tls, 'caFile'),
      setting(`upstreams.${name}.tls.certFile`, 'certificates', tls, 'certFile'),
      setting(`upstreams.${name}.tls.keyFile`, 'privateKey', tls, 'keyFile', 'certFile'),
    ] : [])),
  ];
}

/** The entries of auth.jwt.previous that name files (asymmetric algorithms; HS256 lists secrets). */
function previousKeyFiles(jwt: Config['auth']['jwt']): FileSetting[] {
  if (jwt.algorithm === 'HS256') return [];
  return jwt.previous.flatMap((entry, i) => (isInlinePem(entry) ? [] : [{
    key: `auth.jwt.previous[${i}]`, kind: 'verifyingKey' as const,
    get: () => jwt.previous[i],
    set: (file: string) => { jwt.previous[i] = file; },
  }]));
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

// The portal's pages and assets: the `portal/` folder of the package (beside `console/`), read once
// when the listener is built. Only what that folder holds is ever served, looked up by name in a
// map: no path a request spells reaches the file system. Text is gzipped once here, since the
// portal's weight (CONTRACT §30: script and style together at most 150 KB gzipped) is counted so.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';

/** The folder of the pages, at the package's root (src/portal/ or dist/portal/ are two levels below). */
export const PORTAL_FOLDER = fileURLToPath(new URL('../../portal/', import.meta.url));

/** What is served, by extension; anything else in the folder is not. */
const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8', '.mjs': 'text/javascript; charset=utf-8', '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml', '.png': 'image/png', '.ico': 'image/x-icon', '.woff2': 'font/woff2', '.json': 'application/json', '.map': 'application/json',
  '.webmanifest': 'application/manifest+json', '.txt': 'text/plain; charset=utf-8',
};
const COMPRESSED = new Set(['.html', '.js', '.mjs', '.css', '.svg', '.json', '.map', '.webmanifest', '.txt', '.ico']);
/**
 * A name that carries its content's hash (`app.3f9a1c07.js`, `app-3f9a1c07b2.css`: 8 or more hex
 * digits, a digit among them, before the extension) changes when its content does, so it may be
 * cached for good; any other name may be replaced in place by the next release, so it is revalidated.
 */
const HASHED_NAME = /[.-](?=[0-9a-f]*[0-9])[0-9a-f]{8,}\.[a-z0-9]+$/i;

export interface PortalFile {
  body: Buffer;
  /** The body gzipped, for a client that accepts it (text only). */
  gzip: Buffer | undefined;
  type: string;
  /** The name carries a hash of the content: `immutable` caching. */
  immutable: boolean;
}

/** Whether a file name is a hashed one (HASHED_NAME). */
export const isHashedName = (name: string): boolean => HASHED_NAME.test(name);

export function portalFile(body: Buffer, name: string): PortalFile | undefined {
  const ext = path.extname(name).toLowerCase();
  const type = TYPES[ext];
  if (!type) return undefined;
  return { body, gzip: COMPRESSED.has(ext) ? gzipSync(body, { level: 9 }) : undefined, type, immutable: isHashedName(name) };
}

/** Every file of `folder` that is served, by its path under it (`assets/app.js`); none when the folder is absent. */
export function readPortalFiles(folder: string = PORTAL_FOLDER): Map<string, PortalFile> {
  const files = new Map<string, PortalFile>();
  let entries: string[];
  try {
    entries = readdirSync(folder, { recursive: true, encoding: 'utf8' });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return files;
    throw err;
  }
  for (const entry of entries) {
    const name = entry.split(path.sep).join('/');
    // Dot files (an editor's, a build's) are never pages.
    if (name.split('/').some((part) => part.startsWith('.'))) continue;
    const full = path.join(folder, entry);
    let body: Buffer;
    try {
      body = readFileSync(full);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'EISDIR') continue;
      throw err;
    }
    const file = portalFile(body, name);
    if (file) files.set(name, file);
  }
  return files;
}

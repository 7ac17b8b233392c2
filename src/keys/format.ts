// The shape of an API key, in one place: what the keys room issues and what the gateway looks for
// wherever a client may have put one (proxy/ownTokens.ts, the authenticate guard), so the two can
// never drift apart. A leaf of the keys room: it imports nothing of the gateway but the default prefix.
import { randomInt } from 'node:crypto';
import { crc32 } from 'node:zlib';
import { DEFAULT_API_KEY_PREFIX } from '../config/schema.js';

/**
 * API keys (CONTRACT §21): `<prefix>_<R><C>` (organization keys `<prefix>o_…`), the prefix
 * `apiKeys.prefix` (`gw` by default), R 32 characters drawn uniformly from 0-9A-Za-z, C the CRC-32
 * of R in base62, 6 characters: a secret scanner (and the gateway, before any lookup) tells a live
 * key from noise. Keys made before this format, `gw_` and 43 base64url characters, are still
 * looked up by their hash, as are keys made under an earlier prefix.
 */
const DEFAULT_KEY_PREFIX = DEFAULT_API_KEY_PREFIX;
/** The earlier format's start. */
const API_KEY_PREFIX = `${DEFAULT_KEY_PREFIX}_`;
const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const RANDOM_LENGTH = 32; // 32 × log2(62) ≈ 190 bits: guessing is hopeless, so a plain hash is enough
const CHECKSUM_LENGTH = 6; // 62^6 > 2^32
/** A key of the current format under any prefix, with its parts: prefix (with `o` for an organization's), R, C. */
const KEY_SHAPE = new RegExp(`^([a-z][a-z0-9]{1,10})_([0-9A-Za-z]{${RANDOM_LENGTH}})([0-9A-Za-z]{${CHECKSUM_LENGTH}})$`);

function base62(value: number, width: number): string {
  let out = '';
  for (let n = value; n > 0; n = Math.floor(n / 62)) out = BASE62[n % 62]! + out;
  return out.padStart(width, '0');
}

/** The checksum of a key's random part: CRC-32 (IEEE, as zlib) of its ASCII bytes, in base62. */
export function keyChecksum(random: string): string {
  return base62(crc32(random), CHECKSUM_LENGTH);
}

export interface NewApiKey {
  key: string;
  /** The key's first characters (`len(prefix) + 6`), shown in lists to recognise it by. */
  start: string;
}

export function newApiKey(prefix = DEFAULT_KEY_PREFIX, forOrganization = false): NewApiKey {
  let random = '';
  for (let i = 0; i < RANDOM_LENGTH; i++) random += BASE62[randomInt(62)];
  const key = `${prefix}${forOrganization ? 'o' : ''}_${random}${keyChecksum(random)}`;
  return { key, start: key.slice(0, prefix.length + 6) };
}

/**
 * A value shaped as a key of the current format, under the configured prefix or the default one
 * (every gateway's before the setting existed), whose checksum does not match: refused unread.
 * A value under another prefix is looked up as any other: a key made under an earlier prefix
 * keeps working, and so does a key imported by its hash (CONTRACT §27) that happens to look like one.
 */
export function isForgedKey(value: string, prefix = DEFAULT_KEY_PREFIX): boolean {
  const parts = KEY_SHAPE.exec(value);
  if (parts === null) return false;
  const shown = parts[1]!;
  const ours = shown === prefix || shown === `${prefix}o` || shown === DEFAULT_KEY_PREFIX || shown === `${DEFAULT_KEY_PREFIX}o`;
  return ours && keyChecksum(parts[2]!) !== parts[3];
}

/**
 * Where a key of the current format may sit in a text (global: for matchAll), under any prefix:
 * the lower-case run before `_` (a prefix, perhaps glued to what precedes it), R and C. The
 * earlier format is `gw_` and 43 characters.
 */
const CURRENT_FORMAT = `([a-z0-9]{2,})_([0-9A-Za-z]{${RANDOM_LENGTH}})([0-9A-Za-z]{${CHECKSUM_LENGTH}})(?![\\w-])`;
export const API_KEY_PATTERN = new RegExp(`${CURRENT_FORMAT}|${API_KEY_PREFIX}[\\w-]{43}`, 'g');

/**
 * The keys a text may hold, for proxy/ownTokens.ts to look up: each match of the current format
 * whose checksum holds (noise fails it, so costs no lookup), as every prefix the run before `_` may
 * end with, shortest first (`tokengw_…` is `gw_…` glued to a word); the earlier format as found.
 */
export function keyCandidates(text: string): string[] {
  const found: string[] = [];
  for (const match of text.matchAll(API_KEY_PATTERN)) {
    if (match[1] === undefined) {
      found.push(match[0]);
      continue;
    }
    if (keyChecksum(match[2]!) !== match[3]) continue;
    const run = match[1];
    const rest = match[0].slice(run.length);
    for (let length = 2; length <= Math.min(run.length, 11); length++) {
      const prefix = run.slice(run.length - length);
      if (/^[a-z]/.test(prefix)) found.push(prefix + rest);
    }
  }
  return found;
}

// The shapes of the gateway's own credentials, in one place: what it issues and what it looks for
// wherever a client may have put one (proxy/ownTokens.ts), so the two can never drift apart.
import { randomInt } from 'node:crypto';
import { crc32 } from 'node:zlib';

/**
 * API keys (CONTRACT §21): `gw_<R><C>` (organization keys `gwo_…`), R 32 characters drawn
 * uniformly from 0-9A-Za-z, C the CRC-32 of R in base62, 6 characters: a secret scanner (and the
 * gateway, before any lookup) tells a live key from noise. Keys made before this format,
 * `gw_` and 43 base64url characters, are still looked up by their hash.
 */
export const API_KEY_PREFIX = 'gw_';
const KEY_PREFIX = 'gw';
const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const RANDOM_LENGTH = 32; // 32 × log2(62) ≈ 190 bits: guessing is hopeless, so a plain hash is enough
const CHECKSUM_LENGTH = 6; // 62^6 > 2^32
/** A key of the current format, with its parts: prefix (and `o` for an organization's), R, C. */
const KEY_SHAPE = new RegExp(`^(${KEY_PREFIX}o?)_([0-9A-Za-z]{${RANDOM_LENGTH}})([0-9A-Za-z]{${CHECKSUM_LENGTH}})$`);

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

export function newApiKey(forOrganization = false): NewApiKey {
  let random = '';
  for (let i = 0; i < RANDOM_LENGTH; i++) random += BASE62[randomInt(62)];
  const key = `${KEY_PREFIX}${forOrganization ? 'o' : ''}_${random}${keyChecksum(random)}`;
  return { key, start: key.slice(0, KEY_PREFIX.length + 6) };
}

/** A value shaped as a key of the current format whose checksum does not match: refused unread. */
export function isForgedKey(value: string): boolean {
  const parts = KEY_SHAPE.exec(value);
  return parts !== null && keyChecksum(parts[2]!) !== parts[3];
}

/** Any of the gateway's API keys inside a text (global: for matchAll): the current format, then the earlier one. */
export const API_KEY_PATTERN = new RegExp(`${KEY_PREFIX}o?_[0-9A-Za-z]{${RANDOM_LENGTH + CHECKSUM_LENGTH}}(?![\\w-])|${API_KEY_PREFIX}[\\w-]{43}`, 'g');

// A JWS compact serialization starts with a base64url JSON object: `{"` is `eyJ`. Matching from
// there also finds a token glued to what precedes it (`bearer<token>`).
export const JWS_PREFIX = 'eyJ';
export const JWS_PATTERN = /eyJ[\w-]*\.[\w-]+\.[\w-]+/g;

/** The console's session cookie (admin listener): never forwarded upstream by the public listener. */
export const CONSOLE_COOKIE = 'gw_console';
/** The cookie that binds an identity-provider sign-in to its browser (auth/oidcRoutes.ts): never forwarded upstream either. */
export const OIDC_COOKIE = 'gw_oidc';

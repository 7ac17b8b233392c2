// What a key may be, for every owner alike (CONTRACT §21, §22): who may hold keys (apiKeys.plans),
// what a request for a named key must say (a printable name, scopes the routes declare, an expiry
// within a year), which ids a path may name and how long a roll may leave the old key working.
// Refusals are data (a Denial, docs/architecture.md's "a denial is data"); the route files answer them.
import type { Config } from '../config/schema.js';
import { parseDuration, ZERO_DURATION } from '../config/schema/values.js';
import type { Denial } from '../errors/index.js';
import { textField } from '../http.js';
import { readIsoTime } from '../time.js';

const MAX_NAME = 64;
const MAX_EXPIRY_MS = 365 * 24 * 3600 * 1000;
const MAX_GRACE_MS = 7 * 86_400_000;

/** A named key as asked for (CONTRACT §21). */
export interface NamedKeyRequest {
  name: string;
  scopes: string[] | null;
  expiresAt: Date | null;
}

type Parsed<T> = { ok: T } | { error: 'badRequest' | 'scopeUnknown' };

/** The body of a request for a named key, or why not. */
export function keyRequest(body: unknown, now: Date, known: ReadonlySet<string>): Parsed<NamedKeyRequest> {
  const fields = (body ?? {}) as Record<string, unknown>;
  const name = fields.name;
  // Printable: no control or format characters (a name is shown in lists and consoles).
  if (typeof name !== 'string' || [...name].length < 1 || [...name].length > MAX_NAME || /[\p{Cc}\p{Cf}]/u.test(name)) return { error: 'badRequest' };
  let scopes: string[] | null = null;
  if (fields.scopes !== undefined && fields.scopes !== null) {
    if (!Array.isArray(fields.scopes) || fields.scopes.length === 0 || !fields.scopes.every((s) => typeof s === 'string')) return { error: 'badRequest' };
    if (!fields.scopes.every((s: string) => s === '*' || known.has(s))) return { error: 'scopeUnknown' };
    scopes = [...new Set(fields.scopes as string[])];
  }
  let expiresAt: Date | null = null;
  if (fields.expires_at !== undefined && fields.expires_at !== null) {
    // ISO 8601 only, UTC where no offset is written: the host's zone must not move a key's end.
    const at = (typeof fields.expires_at === 'string' ? readIsoTime(fields.expires_at) : undefined) ?? new Date(NaN);
    if (Number.isNaN(at.getTime()) || at <= now || at.getTime() > now.getTime() + MAX_EXPIRY_MS) return { error: 'badRequest' };
    expiresAt = at;
  }
  return { ok: { name, scopes, expiresAt } };
}

/** A key's id as a path gives it; undefined when it cannot be one (then no key is found). */
export function keyIdOf(params: unknown): number | undefined {
  const text = textField(params, 'id');
  return /^[1-9]\d{0,15}$/.test(text) ? Number(text) : undefined;
}

/** The grace of a roll body in ms (absent or null: none), or undefined when it is not a duration of 0s to 7d. */
export function graceOf(body: unknown): number | undefined {
  const grace = ((body ?? {}) as Record<string, unknown>).grace;
  if (grace === undefined || grace === null) return 0;
  if (typeof grace !== 'string') return undefined;
  const ms = ZERO_DURATION.test(grace) ? 0 : parseDuration(grace);
  return ms !== undefined && ms <= MAX_GRACE_MS ? ms : undefined;
}

/**
 * Whether an owner on `plan` (a user's, or an organization's) may hold keys: null, or the
 * planInsufficient denial with apiKeys.plans and where to upgrade (plans.upgradeUrl).
 */
export function keyPlanDenial(plans: Config['apiKeys']['plans'], plan: string, upgradeUrl: string): Denial | null {
  if (plans === 'all' || plans.includes(plan)) return null;
  return { code: 'planInsufficient', extra: { required: [...plans], current_plan: plan, upgrade_url: upgradeUrl } };
}

/** What a key action answers: its result, or the refusal to send. */
export type KeyOutcome<T> = { ok: T } | { denied: Denial };

// An operator's personal admin token (CONTRACT §24), as the admin API and the CLI mint it: shown
// once, kept as SHA-256, valid up to 365 days; an operator's enrolment link, as both make it; and
// how operators and tokens are shown.
import { sha256Hex, randomToken } from '../credentials/digest.js';
import { OPERATOR_TOKEN_PREFIX } from '../credentials/shapes.js';
import type { Queryable } from '../storage/database/index.js';
import { createEnrolment, insertOperatorToken, type OperatorRow, type OperatorTokenRow } from '../storage/operators/index.js';

export const TOKEN_DAYS_DEFAULT = 90;
export const TOKEN_DAYS_MAX = 365;
/** How long an enrolment link works. */
export const ENROLMENT_MS = 24 * 3600_000;

/**
 * A one-time enrolment link for the operator (single use, 24 h, stored hashed): with it they set a
 * password and a second factor, the first time or after their factors were reset. `base` is the
 * console's origin (consoleOrigin.ts's linkOrigin).
 */
export async function enrolmentLink(q: Queryable, operatorId: number, now: Date, base: string): Promise<string> {
  const token = randomToken(32);
  await createEnrolment(q, operatorId, sha256Hex(token), new Date(now.getTime() + ENROLMENT_MS));
  return `${base}/console/operator.html#enrol=${token}`;
}

export async function mintOperatorToken(q: Queryable, operatorId: number, name: string, days: number, now: Date): Promise<OperatorTokenRow & { token: string }> {
  const token = `${OPERATOR_TOKEN_PREFIX}${randomToken(32)}`;
  const row = await insertOperatorToken(q, operatorId, name, sha256Hex(token), now, new Date(now.getTime() + days * 86_400_000));
  return { ...row, token };
}

const iso = (d: Date | null) => (d ? new Date(d).toISOString() : null);

export const operatorView = (o: OperatorRow) => ({ id: o.id, email: o.email, role: o.role, enrolled: o.enrolled, mfa: o.mfa, created_at: iso(o.created_at) });

export const operatorTokenView = (t: OperatorTokenRow) => ({ id: t.id, name: t.name, created_at: iso(t.created_at), expires_at: iso(t.expires_at), last_used_at: iso(t.last_used_at) });

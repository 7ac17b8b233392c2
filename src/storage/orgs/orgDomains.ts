// org_domains (migration 042, CONTRACT §31): the domains an organization claimed and proved. This
// file holds the one reading SAML and SCIM share (is this email's domain a verified domain of the
// organization?); the claim, verification and re-check writes join it with the domains feature.
import type { Queryable } from '../database/db.js';

/** The organization's verified domains, sorted: the ones SAML, SCIM and `enforce` count. */
export async function verifiedDomainsOf(q: Queryable, orgId: number): Promise<string[]> {
  const rows = await q.query<{ domain: string }>(
    "SELECT domain FROM org_domains WHERE org_id = $1 AND status = 'verified' ORDER BY domain",
    [orgId],
  );
  return rows.map((row) => row.domain);
}

/** The organization that verified this domain, if any (at most one: the unique index of 042). */
export async function verifiedOwnerOf(q: Queryable, domain: string): Promise<number | undefined> {
  const rows = await q.query<{ org_id: number }>(
    "SELECT org_id FROM org_domains WHERE domain = $1 AND status = 'verified'",
    [domain],
  );
  return rows[0]?.org_id;
}

export type DomainStatus = 'pending' | 'verified' | 'unverified';

export interface OrgDomain {
  org_id: number;
  domain: string;
  status: DomainStatus;
  txt_value: string;
  verified_by: 'dns' | 'operator' | null;
  verified_at: Date | null;
  last_checked_at: Date | null;
  missed_checks: number;
  expires_at: Date;
  created_at: Date;
}

const COLUMNS = 'org_id, domain, status, txt_value, verified_by, verified_at, last_checked_at, missed_checks, expires_at, created_at';

/**
 * A claim of `domain` by the organization: a new pending claim with a new TXT value, replacing a
 * pending, expired or unverified one of its own; one it verified already is returned as it is.
 */
export async function claimDomain(tx: Queryable, orgId: number, domain: string, txtValue: string, now: Date, expiresAt: Date): Promise<OrgDomain> {
  const [row] = await tx.query<OrgDomain>(
    `INSERT INTO org_domains (org_id, domain, status, txt_value, expires_at, created_at) VALUES ($1, $2, 'pending', $3, $4, $5)
     ON CONFLICT (org_id, domain) DO UPDATE SET status = 'pending', txt_value = EXCLUDED.txt_value, expires_at = EXCLUDED.expires_at,
       created_at = EXCLUDED.created_at, verified_by = NULL, verified_at = NULL, last_checked_at = NULL, missed_checks = 0
       WHERE org_domains.status <> 'verified'
     RETURNING ${COLUMNS}`, [orgId, domain, txtValue, expiresAt, now]);
  return row ?? (await findDomain(tx, orgId, domain))!;
}

/** The organization's claims, by name; a pending one past its expiry is no claim any more. */
export async function domainsOf(q: Queryable, orgId: number, now: Date): Promise<OrgDomain[]> {
  return q.query<OrgDomain>(
    `SELECT ${COLUMNS} FROM org_domains WHERE org_id = $1 AND (status <> 'pending' OR expires_at > $2) ORDER BY domain`, [orgId, now]);
}

export async function findDomain(q: Queryable, orgId: number, domain: string): Promise<OrgDomain | undefined> {
  return (await q.query<OrgDomain>(`SELECT ${COLUMNS} FROM org_domains WHERE org_id = $1 AND domain = $2`, [orgId, domain]))[0];
}

/** Removes the claim; whether there was one. */
export async function releaseDomain(tx: Queryable, orgId: number, domain: string): Promise<boolean> {
  return (await tx.query('DELETE FROM org_domains WHERE org_id = $1 AND domain = $2 RETURNING 1', [orgId, domain])).length > 0;
}

/**
 * Marks the claim verified (by its DNS record or an operator); undefined when there is no such
 * claim or it is verified already. Throws a unique violation (23505) when another organization
 * verified the domain first, even at the same moment on another instance: the index of 042 decides.
 */
export async function markVerified(tx: Queryable, orgId: number, domain: string, by: 'dns' | 'operator', now: Date, txtValue?: string): Promise<OrgDomain | undefined> {
  // With txtValue (a DNS proof): only the claim that value was made for, not one claimed anew since.
  return (await tx.query<OrgDomain>(
    `UPDATE org_domains SET status = 'verified', verified_by = $3, verified_at = $4, last_checked_at = $4, missed_checks = 0
      WHERE org_id = $1 AND domain = $2 AND status <> 'verified' AND ($5::text IS NULL OR txt_value = $5) RETURNING ${COLUMNS}`,
    [orgId, domain, by, now, txtValue ?? null]))[0];
}

/** Whether `err` is the unique violation of two organizations verifying one domain. */
export function isDomainTaken(err: unknown): boolean {
  return (err as { code?: unknown } | null)?.code === '23505';
}

/** Counts a look-up for the organization, under its row lock; false (not counted) when `max` were made in the hour before `now`. */
export async function countLookup(tx: Queryable, orgId: number, now: Date, max: number): Promise<boolean> {
  const hourAgo = new Date(now.getTime() - 3_600_000);
  await tx.query('DELETE FROM org_domain_lookups WHERE org_id = $1 AND at <= $2', [orgId, hourAgo]);
  const [row] = await tx.query<{ n: number }>('SELECT count(*)::int AS n FROM org_domain_lookups WHERE org_id = $1', [orgId]);
  if (row!.n >= max) return false;
  await tx.query('INSERT INTO org_domain_lookups (org_id, at) VALUES ($1, $2)', [orgId, now]);
  return true;
}

/**
 * The DNS-verified domains whose daily re-check is due, claimed for this instance: their
 * last_checked_at is set now, in one statement, so of several instances sweeping at once each
 * domain goes to one (SKIP LOCKED: none waits for another's rows). An operator's are never re-checked.
 */
export async function claimRechecks(q: Queryable, now: Date, everyMs: number, limit: number): Promise<Array<Pick<OrgDomain, 'org_id' | 'domain' | 'txt_value'>>> {
  return q.query(
    `UPDATE org_domains SET last_checked_at = $1 WHERE (org_id, domain) IN (
       SELECT org_id, domain FROM org_domains WHERE status = 'verified' AND verified_by = 'dns' AND (last_checked_at IS NULL OR last_checked_at <= $2)
        ORDER BY last_checked_at NULLS FIRST LIMIT $3 FOR UPDATE SKIP LOCKED)
     RETURNING org_id, domain, txt_value`, [now, new Date(now.getTime() - everyMs), limit]);
}

/**
 * A re-check's result: found resets the misses; missing adds one, and at `maxMisses` the domain
 * becomes unverified. The row after, or undefined when it is no longer a DNS-verified claim.
 */
export async function recordRecheck(tx: Queryable, orgId: number, domain: string, found: boolean, maxMisses: number): Promise<OrgDomain | undefined> {
  return (await tx.query<OrgDomain>(
    `UPDATE org_domains SET missed_checks = CASE WHEN $3 THEN 0 ELSE missed_checks + 1 END,
       status = CASE WHEN NOT $3 AND missed_checks + 1 >= $4 THEN 'unverified' ELSE status END
      WHERE org_id = $1 AND domain = $2 AND status = 'verified' AND verified_by = 'dns' RETURNING ${COLUMNS}`, [orgId, domain, found, maxMisses]))[0];
}

// Single-use secrets past their life: sign-in, reset and verification links (email_tokens), the
// mfa_tokens of logins awaiting a code, WebAuthn challenges, and identity-provider sign-ins under way
// (oidc_states) and their login codes. Once expired they can do nothing
// (every use checks expires_at) and say nothing the audit log does not; without a purge they pile
// up at the pace of logins and mails.
import type { Queryable } from '../database/db.js';

/** Deletes the rows that expired before `before`; how many went, by table. */
export async function purgeExpired(db: Queryable, before: Date): Promise<Record<string, number>> {
  const purged: Record<string, number> = {};
  for (const table of ['email_tokens', 'mfa_tokens', 'webauthn_challenges', 'oidc_states', 'oidc_login_codes']) {
    // Counted in Postgres, as purgeAuditEvents does: a backlog's rows are not shipped here to be counted.
    const [row] = await db.query<{ n: number }>(`WITH gone AS (DELETE FROM ${table} WHERE expires_at < $1 RETURNING 1) SELECT count(*)::int AS n FROM gone`, [before]);
    purged[table] = row?.n ?? 0;
  }
  return purged;
}

// audit_events (migration 014, CONTRACT §17): one row per account event, written in the
// transaction of the change it records; read newest first in keyset pages; purged by age.
import type { Queryable } from '../database/db.js';

/** Every event CONTRACT §17 names. */
export const AUDIT_TYPES = [
  'user.registered', 'login.succeeded', 'login.failed', 'refresh.reuse_detected', 'logout',
  'password.changed', 'password.reset', 'email.verified', 'mfa.enrolled', 'mfa.removed', 'passkey.added', 'passkey.removed',
  'oidc.linked', 'oidc.unlinked',
  'mfa.recovery_code_used', 'session.revoked', 'api_key.created', 'api_key.revoked', 'account.deleted',
  'admin.plan_changed', 'admin.active_changed', 'admin.sessions_revoked', 'admin.mfa_reset', 'admin.user_deleted', 'admin.user_created', 'admin.org_plan_changed',
  // CONTRACT §22: data names the organization (org_id) and, for a member, whose membership (member_id).
  'org.created', 'org.updated', 'org.deleted', 'org.invitation_sent', 'org.invitation_cancelled', 'org.member_added', 'org.member_removed', 'org.role_changed',
  'billing.plan_changed',
  // CONTRACT §27: one per batch of an import, data {format, created, skipped_existing, refused}; never a hash.
  'user.imported',
  // The same for `gateway import keys`: one per batch, data {created, skipped_existing, refused}; never a hash.
  'api_key.imported',
  // CONTRACT §24: operators, and a refused operator sign-in (user_id NULL; data.operator_email).
  'operator.created', 'operator.role_changed', 'operator.removed', 'operator.mfa_reset', 'operator.enrolled', 'operator.token_created', 'operator.token_revoked',
  'operator.login_failed', 'operator.passkey_added',
  // CONTRACT §31, SCIM: a token made or revoked (data org_id, id, name), a member's access ended or
  // given back by the directory (data org_id, scim_id, account_active when the account's flag changed).
  'scim.token_created', 'scim.token_revoked', 'scim.user_deactivated', 'scim.user_reactivated',
  // CONTRACT §31: an organization's domains (data org_id, domain; verified: by "dns"|"operator"), and
  // an account nobody had proved taken by the organization's SAML or SCIM (its ways in removed).
  'org.domain_claimed', 'org.domain_verified', 'org.domain_unverified', 'org.domain_released', 'sso.account_claimed',
  // CONTRACT §31: an organization's SAML connection (data.org_id, data.connection_id); a refused
  // SAML sign-in names the rule that failed (data.rule), never shown to the browser.
  'sso.connection_updated', 'sso.connection_deleted', 'sso.enforce_changed', 'sso.login_failed',
] as const;
export type AuditType = (typeof AUDIT_TYPES)[number];

/**
 * Who acted (CONTRACT §24, §31): the account's owner, the shared admin key through the admin API or
 * the console, the CLI on direct storage, an operator (console, gwop_ token), billing, the gateway
 * itself, or an organization's SCIM directory (actorId: the SCIM token's id; migration 043).
 */
export type AuditActor = 'user' | 'admin' | 'cli' | 'console' | 'operator' | 'billing' | 'system' | 'scim';

/**
 * Who a batch written outside the audit's usual path (an import) is by: the actor alone (the CLI on
 * direct storage), or what the admin API's by() says authenticated, the operator's id included.
 */
export type AuditWho = AuditActor | Pick<AuditEvent, 'actor' | 'actorId' | 'operatorEmail' | 'ip' | 'userAgent' | 'via'>;
export const auditWho = (who: AuditWho): Pick<AuditEvent, 'actor' | 'actorId' | 'operatorEmail' | 'ip' | 'userAgent' | 'via'> => (typeof who === 'string' ? { actor: who } : who);

export interface AuditEvent {
  type: AuditType;
  actor: AuditActor;
  userId?: number | null;
  /** The acting operator's id for `operator`; for `user`, the account's own id (userId when not given). */
  actorId?: number | null;
  /** For `operator`: kept as data.operator_email, so the log says who even once the operator is gone. */
  operatorEmail?: string;
  ip?: string;
  userAgent?: string;
  /** 'portal': done from the customer portal's pages (CONTRACT §30), kept as data.via. */
  via?: 'portal';
  /** What happened, never a secret (no password, token, key, code or email typed at a login). */
  data?: Record<string, unknown>;
}

export interface AuditRow {
  id: number;
  at: Date;
  type: string;
  actor: string;
  actor_id: number | null;
  user_id: number | null;
  ip: string | null;
  user_agent: string | null;
  data: Record<string, unknown>;
}

// A user agent is attacker-chosen and unbounded: a row keeps its start.
const USER_AGENT_MAX = 512;

/** actor_id (§24): given, or for `user` the account itself (the subject is the actor). */
function actorIdOf({ actor, actorId, userId }: AuditEvent): number | null {
  if (actorId !== undefined) return actorId;
  return actor === 'user' ? userId ?? null : null;
}

export async function insertAuditEvent(q: Queryable, event: AuditEvent, at: Date): Promise<void> {
  let data = event.operatorEmail === undefined ? event.data ?? {} : { ...event.data, operator_email: event.operatorEmail };
  if (event.via) data = { ...data, via: event.via };
  await q.query(
    'INSERT INTO audit_events (at, type, actor, actor_id, user_id, ip, user_agent, data) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)',
    [at, event.type, event.actor, actorIdOf(event), event.userId ?? null, event.ip ?? null, event.userAgent?.slice(0, USER_AGENT_MAX) ?? null, JSON.stringify(data)],
  );
}

export interface AuditFilter {
  userId?: number;
  type?: string;
  since?: Date;
  /** Rows with a smaller id than this (the previous page's last). */
  beforeId?: number;
  limit: number;
}

/** Newest first, `limit` rows at most. */
export async function listAuditEvents(q: Queryable, filter: AuditFilter): Promise<AuditRow[]> {
  const where: string[] = [];
  const params: unknown[] = [];
  const add = (clause: string, value: unknown) => {
    params.push(value);
    where.push(clause.replace('?', `$${params.length}`));
  };
  if (filter.userId !== undefined) add('user_id = ?', filter.userId);
  if (filter.type !== undefined) add('type = ?', filter.type);
  if (filter.since !== undefined) add('at >= ?', filter.since);
  if (filter.beforeId !== undefined) add('id < ?', filter.beforeId);
  params.push(filter.limit);
  const rows = await q.query<AuditRow>(
    `SELECT id, at, type, actor, actor_id, user_id, ip, user_agent, data FROM audit_events ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY id DESC LIMIT $${params.length}`,
    params,
  );
  return rows.map((r) => ({ ...r, id: Number(r.id), at: new Date(r.at) }));
}

/** Removes the rows older than `before`; how many went. */
export async function purgeAuditEvents(q: Queryable, before: Date): Promise<number> {
  const rows = await q.query<{ n: string }>('WITH gone AS (DELETE FROM audit_events WHERE at < $1 RETURNING 1) SELECT count(*) AS n FROM gone', [before]);
  return Number(rows[0]?.n ?? 0);
}

// sessions: one row per refresh-token family (migration 009). A session is active while one of its
// tokens is (not revoked, not expired); its row keeps the client as last seen and the last refresh.
import type { Queryable } from '../database/db.js';

/** The client a session was issued to, as the request showed it. */
export interface Client {
  userAgent: string | undefined;
  ip: string | undefined;
  /** 'portal': the customer portal's pages made the request (CONTRACT §30); audit rows say so in data.via. */
  via?: 'portal';
}

export interface Session {
  id: number;
  user_agent: string | null;
  ip: string | null;
  created_at: Date;
  last_used_at: Date;
}

/** Longer user agents are cut: a client must not store kilobytes per login. */
const MAX_USER_AGENT = 512;
const clientValues = (client: Client) => [client.userAgent?.slice(0, MAX_USER_AGENT) || null, client.ip || null];

/**
 * `amr`: how the sign-in was made (CONTRACT §14), kept for every refresh of the session;
 * `samlConnectionId`: the SAML connection it came through (CONTRACT §31: enforcement keeps it).
 */
export async function createSession(db: Queryable, userId: number, client: Client, now: Date, amr: readonly string[], samlConnectionId?: string): Promise<number> {
  const rows = await db.query<{ id: string | number }>(
    `INSERT INTO sessions (user_id, user_agent, ip, created_at, last_used_at, amr, auth_time, saml_connection_id)
     VALUES ($1, $2, $3, $4, $4, $5, $4, $6) RETURNING id`,
    [userId, ...clientValues(client), now, amr.join(' '), samlConnectionId ?? null],
  );
  return Number(rows[0]!.id);
}

/** A refresh: the session's last use, and the client as seen now; answers the sign-in's assurance. */
export async function touchSession(db: Queryable, sessionId: number, client: Client, now: Date): Promise<{ amr: string[]; authTime: Date }> {
  const rows = await db.query<{ amr: string; auth_time: Date | null; created_at: Date }>(
    'UPDATE sessions SET user_agent = $2, ip = $3, last_used_at = $4 WHERE id = $1 RETURNING amr, auth_time, created_at',
    [sessionId, ...clientValues(client), now],
  );
  const row = rows[0];
  // A session from before migration 013 was a password sign-in at its creation.
  return row ? { amr: row.amr.split(' '), authTime: row.auth_time ?? row.created_at } : { amr: ['pwd'], authTime: now };
}

/** Whether the session is the user's (active or not). */
export async function isUsersSession(db: Queryable, userId: number, sessionId: number): Promise<boolean> {
  return (await db.query('SELECT 1 FROM sessions WHERE id = $1 AND user_id = $2', [sessionId, userId])).length === 1;
}

/** The user's active sessions, most recently used first. */
export async function activeSessions(db: Queryable, userId: number, now: Date): Promise<Session[]> {
  const rows = await db.query<Session & { id: string | number }>(
    `SELECT s.id, s.user_agent, s.ip, s.created_at, s.last_used_at FROM sessions s
      WHERE s.user_id = $1
        AND EXISTS (SELECT 1 FROM refresh_tokens t WHERE t.session_id = s.id AND t.revoked = 0 AND t.expires_at > $2)
      ORDER BY s.last_used_at DESC, s.id DESC`,
    [userId, now],
  );
  return rows.map((row) => ({ ...row, id: Number(row.id) }));
}

/** Revokes the session's active tokens; how many. Run it after lockUser() (see revokeAllForUser). */
export async function revokeSession(db: Queryable, sessionId: number): Promise<number> {
  const rows = await db.query(`UPDATE refresh_tokens SET revoked = 1, revoked_reason = 'session' WHERE session_id = $1 AND revoked = 0 RETURNING id`, [sessionId]);
  return rows.length;
}

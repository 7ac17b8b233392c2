// Identity providers (migration 019, CONTRACT §15): the links (user_identities), the sign-ins under
// way (oidc_states) and the login codes handed to applications (oidc_login_codes). States and codes
// are stored as SHA-256 (hashed by the caller) and used up by one conditional UPDATE, so of two
// instances handed the same one at once exactly one goes on.
import type { Queryable } from '../database/db.js';

export interface IdentityLink {
  user_id: number;
  provider: string;
  issuer: string;
  subject: string;
  email: string | null;
  /** The provider vouched for the account's address (migration 021). */
  vouched: boolean;
  created_at: Date;
}

const LINK_COLUMNS = 'user_id, provider, issuer, subject, email, vouched, created_at';

/** Who signs in as (issuer, subject), read without a lock (a sign-in then locks the user first). */
export async function findLink(db: Queryable, issuer: string, subject: string): Promise<IdentityLink | undefined> {
  return (await db.query<IdentityLink>(`SELECT ${LINK_COLUMNS} FROM user_identities WHERE issuer = $1 AND subject = $2`, [issuer, subject]))[0];
}

export interface NewLink {
  provider: string;
  issuer: string;
  subject: string;
  email: string | null;
  /** The provider says this is the account's address, verified. */
  vouched: boolean;
}

/** Links (issuer, subject) to the user; false when it is already linked (to anyone). */
export async function insertLink(db: Queryable, userId: number, link: NewLink, now: Date): Promise<boolean> {
  const rows = await db.query(
    `INSERT INTO user_identities (user_id, provider, issuer, subject, email, vouched, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)
     ON CONFLICT (issuer, subject) DO NOTHING RETURNING 1`,
    [userId, link.provider, link.issuer, link.subject, link.email, link.vouched, now],
  );
  return rows.length === 1;
}

/**
 * What a later sign-in refreshes: the provider's name in the configuration (it may have been
 * renamed) and the email it asserts; a link it vouches for now stays vouched for.
 */
export async function touchLink(db: Queryable, link: NewLink): Promise<void> {
  await db.query(
    'UPDATE user_identities SET provider = $3, email = $4, vouched = vouched OR $5 WHERE issuer = $1 AND subject = $2',
    [link.issuer, link.subject, link.provider, link.email, link.vouched],
  );
}

/** Removes the user's links no provider vouched for (links.ts: the mailbox owner took the account); the rows removed. */
export async function removeUnvouchedLinks(db: Queryable, userId: number): Promise<IdentityLink[]> {
  return db.query<IdentityLink>(`DELETE FROM user_identities WHERE user_id = $1 AND NOT vouched RETURNING ${LINK_COLUMNS}`, [userId]);
}

/** Removes every link of the user (an organization claiming an address nobody proved, CONTRACT §31); the rows removed. */
export async function removeAllLinks(db: Queryable, userId: number): Promise<IdentityLink[]> {
  return db.query<IdentityLink>(`DELETE FROM user_identities WHERE user_id = $1 RETURNING ${LINK_COLUMNS}`, [userId]);
}

/** The user's links, oldest first. */
export async function listLinks(db: Queryable, userId: number): Promise<IdentityLink[]> {
  return db.query<IdentityLink>(`SELECT ${LINK_COLUMNS} FROM user_identities WHERE user_id = $1 ORDER BY created_at, id`, [userId]);
}

/** Removes the user's links to a provider (by its name, or its issuer when it is configured); the rows removed. */
export async function removeLinks(db: Queryable, userId: number, provider: string, issuer: string | undefined): Promise<IdentityLink[]> {
  return db.query<IdentityLink>(
    `DELETE FROM user_identities WHERE user_id = $1 AND (provider = $2 OR issuer = $3) RETURNING ${LINK_COLUMNS}`,
    [userId, provider, issuer ?? null],
  );
}

/**
 * The ways the user can sign in besides the given links: a password, a passkey, links to other
 * providers. Read after the user's row is locked (lockUser), so two removals cannot each count
 * the other's method and leave none.
 */
export async function otherSignInMethods(db: Queryable, userId: number, except: { provider: string; issuer: string | undefined }): Promise<number> {
  const [row] = await db.query<{ n: number }>(
    `SELECT (SELECT count(*) FROM users WHERE id = $1 AND password_hash IS NOT NULL)
          + (SELECT count(*) FROM passkeys WHERE user_id = $1)
          + (SELECT count(*) FROM user_identities WHERE user_id = $1 AND provider <> $2 AND issuer IS DISTINCT FROM $3) AS n`,
    [userId, except.provider, except.issuer ?? null],
  );
  return Number(row?.n ?? 0);
}

export interface StartedSignIn {
  provider: string;
  return_to: string;
  app_challenge: string;
}

/** A sign-in under way (its state's hash, what /start was asked); expired ones go at the same time. */
export async function createState(db: Queryable, stateHash: string, started: StartedSignIn, now: Date, expiresAt: Date): Promise<void> {
  await db.query('DELETE FROM oidc_states WHERE expires_at < $1', [now]);
  await db.query(
    'INSERT INTO oidc_states (state_hash, provider, return_to, app_challenge, expires_at) VALUES ($1, $2, $3, $4, $5)',
    [stateHash, started.provider, started.return_to, started.app_challenge, expiresAt],
  );
}

/** Uses the state up if it is live and of this provider: what its start was asked, once. */
export async function useState(db: Queryable, stateHash: string, provider: string, now: Date): Promise<StartedSignIn | undefined> {
  return (await db.query<StartedSignIn>(
    `UPDATE oidc_states SET used_at = $3 WHERE state_hash = $1 AND provider = $2 AND used_at IS NULL AND expires_at > $3
     RETURNING provider, return_to, app_challenge`,
    [stateHash, provider, now],
  ))[0];
}

/**
 * How a sign-in that ends in a login code went (CONTRACT §31): `method` when it is not a configured
 * provider's (saml: login.succeeded's data.method), its `amr` (default `fed`), and the SAML
 * connection it came through (migration 049).
 */
export interface LoginCodeOrigin {
  method?: string;
  amr?: readonly string[];
  samlConnectionId?: string;
}

export async function createLoginCode(db: Queryable, codeHash: string, userId: number, appChallenge: string, now: Date, expiresAt: Date, origin: LoginCodeOrigin = {}): Promise<void> {
  await db.query('DELETE FROM oidc_login_codes WHERE expires_at < $1', [now]);
  await db.query(
    'INSERT INTO oidc_login_codes (code_hash, user_id, app_challenge, expires_at, method, amr, saml_connection_id) VALUES ($1, $2, $3, $4, $5, $6, $7)',
    [codeHash, userId, appChallenge, expiresAt, origin.method ?? null, origin.amr?.join(' ') ?? null, origin.samlConnectionId ?? null],
  );
}

/**
 * Whose the login code is and the SAML connection it came through, read without a lock (the
 * exchange then locks the user first, then uses the code up).
 */
export async function loginCodeHolder(db: Queryable, codeHash: string): Promise<{ userId: number; samlConnectionId: string | null } | undefined> {
  const row = (await db.query<{ user_id: number; saml_connection_id: string | null }>(
    'SELECT user_id, saml_connection_id FROM oidc_login_codes WHERE code_hash = $1', [codeHash]))[0];
  return row && { userId: row.user_id, samlConnectionId: row.saml_connection_id };
}

/**
 * Uses the login code up if it is live and `challenge` is the one its start was given (the
 * verifier's S256): the user it signs in. A wrong verifier leaves the code to its application.
 */
export async function useLoginCode(db: Queryable, codeHash: string, challenge: string, now: Date): Promise<{ user_id: number; origin: LoginCodeOrigin } | undefined> {
  const row = (await db.query<{ user_id: number; method: string | null; amr: string | null; saml_connection_id: string | null }>(
    `UPDATE oidc_login_codes SET used_at = $3 WHERE code_hash = $1 AND app_challenge = $2 AND used_at IS NULL AND expires_at > $3
     RETURNING user_id, method, amr, saml_connection_id`,
    [codeHash, challenge, now],
  ))[0];
  if (!row) return undefined;
  const origin: LoginCodeOrigin = {};
  if (row.method) origin.method = row.method;
  if (row.amr) origin.amr = row.amr.split(' ');
  if (row.saml_connection_id) origin.samlConnectionId = row.saml_connection_id;
  return { user_id: row.user_id, origin };
}

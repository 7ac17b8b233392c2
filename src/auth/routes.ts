// POST /api/v1/auth/register, /login, /refresh, /logout: exactly spec §4.
import type { FastifyInstance } from 'fastify';
import { passwordTooShortMessage, sendDenial, sendError } from '../errors.js';
import { textField } from '../http.js';
import type { Services } from '../services.js';
import * as refreshTokens from '../storage/refreshTokens.js';
import * as users from '../storage/users.js';
import { burnVerification, hashPassword, isTooLong, needsRehash, verifyPassword } from './passwords.js';
import { sha256Hex } from './tokens.js';

const MAX_EMAIL_LENGTH = 320;

export async function authRoutes(app: FastifyInstance, opts: { services: Services }): Promise<void> {
  const { db, tokens, config, clock } = opts.services;
  const minLength = config.auth.passwordMinLength;

  app.post('/register', async (request, reply) => {
    const email = textField(request.body, 'email').trim().toLowerCase();
    const password = textField(request.body, 'password');
    if (!email || !email.includes('@') || email.length > MAX_EMAIL_LENGTH || !storable(email)) return sendError(reply, 'emailInvalid');
    // Counted in characters (code points), as a person counts them.
    if ([...password].length < minLength) return sendDenial(reply, { code: 'passwordTooShort', message: passwordTooShortMessage(minLength) });
    if (isTooLong(password)) return sendError(reply, 'passwordTooLong');
    // A cheap check first spares a hash for the common duplicate; the INSERT still decides races.
    if (await users.emailExists(db, email)) return sendError(reply, 'emailTaken');
    const id = await users.createUser(db, email, await hashPassword(password));
    if (id === null) return sendError(reply, 'emailTaken');
    request.log.info({ userId: id }, 'user registered');
    return reply.code(201).send({ message: 'Utilisateur créé', user_id: id });
  });

  app.post('/login', async (request, reply) => {
    const email = textField(request.body, 'email').trim().toLowerCase();
    const password = textField(request.body, 'password');
    if (!email || !password) return sendError(reply, 'loginFieldsRequired');
    // No stored password is this long: refuse without hashing, so it cannot be used to burn CPU.
    if (isTooLong(password)) return sendError(reply, 'invalidCredentials');
    const user = storable(email) ? await users.findByEmailWithHash(db, email) : undefined;
    if (!user || user.is_active !== 1) {
      await burnVerification(password);
      return sendError(reply, 'invalidCredentials');
    }
    if (!(await verifyPassword(user.password_hash, password))) return sendError(reply, 'invalidCredentials');
    if (needsRehash(user.password_hash)) await users.updatePasswordHash(db, user.id, await hashPassword(password));
    const { pair, refreshExpiresAt } = await tokens.issuePair(user);
    await refreshTokens.insertRefreshToken(db, user.id, sha256Hex(pair.refresh_token), refreshExpiresAt);
    request.log.info({ userId: user.id }, 'login');
    return pair;
  });

  app.post('/refresh', async (request, reply) => {
    const token = textField(request.body, 'refresh_token').trim();
    if (!token) return sendError(reply, 'refreshTokenMissing');
    const userId = await tokens.verifyRefresh(token);
    if (userId === null) return sendError(reply, 'refreshTokenUndecodable');
    const hash = sha256Hex(token);
    const result = await db.transaction(async (tx) => {
      // The conditional UPDATE is the lock: of concurrent rotations of one token, on any
      // instance, exactly one sees revoked = 0 and wins.
      if (!(await refreshTokens.revokeActive(tx, hash, userId, clock()))) return { outcome: 'inactive' as const };
      const user = await users.findActiveById(tx, userId);
      if (!user) throw new UserGone(); // rolls back: the token stays active for its user
      const { pair, refreshExpiresAt } = await tokens.issuePair(user);
      await refreshTokens.insertRefreshToken(tx, user.id, sha256Hex(pair.refresh_token), refreshExpiresAt);
      return { outcome: 'rotated' as const, pair };
    }).catch((err: unknown) => {
      if (err instanceof UserGone) return { outcome: 'user-gone' as const };
      throw err;
    });
    if (result.outcome === 'user-gone') return sendError(reply, 'userNotFound');
    if (result.outcome === 'inactive') {
      await onReuse(userId, hash, request.log);
      return sendError(reply, 'refreshTokenInactive');
    }
    return result.pair;
  });

  app.post('/logout', async (request, reply) => {
    const token = textField(request.body, 'refresh_token').trim();
    if (token) await refreshTokens.revokeByHash(db, sha256Hex(token));
    return reply.send({ message: 'Déconnexion réussie' });
  });

  /** A rotated-away token presented again means it was copied: say so, and under revoke-all, end every session. */
  async function onReuse(userId: number, hash: string, log: FastifyInstance['log']): Promise<void> {
    if (!(await refreshTokens.wasRotated(db, hash, userId))) return;
    const revoked = config.auth.refreshReuse === 'revoke-all' ? await refreshTokens.revokeAllForUser(db, userId) : 0;
    log.warn({ userId, revokedSessions: revoked }, 'refresh token reused');
    opts.services.events?.emit(userId, 'auth.refresh_token_reused', { revoked_sessions: revoked });
  }
}

class UserGone extends Error {}

/** Postgres text cannot hold a NUL character (it refuses the query): no account has one in its email. */
function storable(text: string): boolean {
  return !text.includes('\0');
}

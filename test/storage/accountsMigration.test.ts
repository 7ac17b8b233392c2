// Migration 009 on a database that already has sessions: every refresh token still active becomes a
// session of its own (client unknown), and a gateway continues it at the next refresh.
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTokens } from '../../src/credentials/tokens.js';
import { sha256Hex } from '../../src/credentials/digest.js';
import { configSchema } from '../../src/config/schema.js';
import { postgresDatabase, type Database } from '../../src/storage/database/db.js';
import { migrate, migrationFiles, MIGRATIONS_DIR } from '../../src/storage/database/migrations.js';
import { revokeAllForUser } from '../../src/storage/accounts/refreshTokens.js';
import { bearer, closeSql, describeWithServices, startTestGateway, testConfig, throwawayDatabase, TEST_JWT_SECRET } from '../helpers/gateway.js';

describeWithServices('migration 009: tokens issued before sessions', () => {
  let database: Awaited<ReturnType<typeof throwawayDatabase>>;
  let db: Database;
  let before: string;

  beforeAll(async () => {
    database = await throwawayDatabase();
    db = postgresDatabase(database.url);
    before = mkdtempSync(path.join(tmpdir(), 'gw-migrations-'));
    for (const file of migrationFiles().filter((f) => f < '009')) copyFileSync(path.join(MIGRATIONS_DIR, file), path.join(before, file));
    await migrate(db, before);
  });
  afterAll(async () => {
    await db?.close();
    await database?.drop();
    if (before) rmSync(before, { recursive: true, force: true });
    await closeSql();
  });

  it('makes one session per active token, which a gateway then continues', async () => {
    const [{ id: userId }] = await db.query<{ id: number }>("INSERT INTO users (email, password_hash) VALUES ('old@example.test', 'x') RETURNING id") as [{ id: number }];
    const tokens = await createTokens(configSchema.parse({ auth: { jwt: { secret: TEST_JWT_SECRET } } }).auth, db, () => new Date(), () => {});
    const pair = (await tokens.issuePair({ id: userId, email: 'old@example.test', plan: 'free', credential_generation: 0 }, 0, { amr: ['pwd'], authTime: new Date() })).pair;
    const insert = (hash: string, revoked: number, created: string) => db.query<{ id: string }>(
      "INSERT INTO refresh_tokens (user_id, token_hash, expires_at, revoked, created_at) VALUES ($1, $2, now() + interval '30 days', $3, $4) RETURNING id",
      [userId, hash, revoked, created]);
    const [live] = await insert(sha256Hex(pair.refresh_token), 0, '2024-05-01T10:00:00Z');
    const [otherLive] = await insert('b'.repeat(64), 0, '2024-05-02T10:00:00Z');
    const [rotated] = await insert('c'.repeat(64), 1, '2024-04-01T10:00:00Z');

    await migrate(db);
    const sessions = await db.query<{ id: string; user_id: number; user_agent: string | null; ip: string | null; created_at: Date; last_used_at: Date }>(
      'SELECT id, user_id, user_agent, ip, created_at, last_used_at FROM sessions ORDER BY id');
    expect(sessions).toEqual([
      { id: live!.id, user_id: userId, user_agent: null, ip: null, created_at: new Date('2024-05-01T10:00:00Z'), last_used_at: new Date('2024-05-01T10:00:00Z') },
      { id: otherLive!.id, user_id: userId, user_agent: null, ip: null, created_at: new Date('2024-05-02T10:00:00Z'), last_used_at: new Date('2024-05-02T10:00:00Z') },
    ]);
    expect(await db.query('SELECT id, session_id FROM refresh_tokens ORDER BY id')).toEqual([
      { id: live!.id, session_id: live!.id }, { id: otherLive!.id, session_id: otherLive!.id }, { id: rotated!.id, session_id: null },
    ]);

    const gw = await startTestGateway(testConfig({ storage: { postgres: database.url } }));
    try {
      const res = await gw.post('/api/v1/auth/refresh', { refresh_token: pair.refresh_token }, { headers: { 'user-agent': 'Returning/1' } });
      expect(res.status).toBe(200);
      const listed = await gw.get('/api/v1/user/sessions', { headers: bearer(res.json.access_token) });
      expect(listed.json.sessions.map((s: Record<string, unknown>) => [s.id, s.user_agent, s.ip, s.current])).toEqual([
        [Number(live!.id), 'Returning/1', '127.0.0.1', true],
        [Number(otherLive!.id), null, null, false],
      ]);
      // A token an instance of the previous version issued after the migration (no session) starts one.
      const late = (await tokens.issuePair({ id: userId, email: 'old@example.test', plan: 'free', credential_generation: 0 }, 0, { amr: ['pwd'], authTime: new Date() })).pair;
      await db.query("INSERT INTO refresh_tokens (user_id, token_hash, expires_at) VALUES ($1, $2, now() + interval '30 days')", [userId, sha256Hex(late.refresh_token)]);
      const continued = await gw.post('/api/v1/auth/refresh', { refresh_token: late.refresh_token });
      expect(continued.status).toBe(200);
      const [created] = await db.query<{ id: string }>('SELECT max(id) AS id FROM sessions');
      expect(Number(created!.id)).toBeGreaterThan(Number(otherLive!.id));
      expect((await gw.get('/api/v1/user/sessions', { headers: bearer(continued.json.access_token) })).json.sessions).toHaveLength(3);
    } finally {
      await gw.close();
    }
    // Ending them all counts a token without a session as one session, whether one goes on or not.
    await db.query("INSERT INTO refresh_tokens (user_id, token_hash, expires_at) VALUES ($1, $2, now() + interval '30 days')", [userId, 'd'.repeat(64)]);
    expect(await db.transaction((tx) => revokeAllForUser(tx, userId, 'password', Number(live!.id)))).toBe(3);
    await db.query("INSERT INTO refresh_tokens (user_id, token_hash, expires_at) VALUES ($1, $2, now() + interval '30 days')", [userId, 'e'.repeat(64)]);
    expect(await revokeAllForUser(db, userId, 'password')).toBe(1);
  });
});

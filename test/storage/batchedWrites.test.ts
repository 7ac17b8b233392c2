// The counts written once a second off the request path (storage/database/batchedWrites.ts): API
// key usage (keys/usage.ts) and quota refusals (storage/usage/ownerDenials.ts). While a statement
// fails, what it did not write is kept, logged once; once the database answers again the counts
// land exactly once, and the recovery is logged once. The failure is Postgres's own: the table
// renamed away on a database of the test's, then back.
import { Writable } from 'node:stream';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { ApiKeyUsage } from '../../src/keys/usage.js';
import { createUser } from '../../src/storage/accounts/index.js';
import { openDatabase, type Database } from '../../src/storage/database/index.js';
import { OwnerDenials } from '../../src/storage/usage/index.js';
import { createLogger } from '../../src/telemetry/logger.js';
import { closeSql, describeWithServices, newEmail, throwawayDatabase, type ThrowawayDatabase } from '../helpers/gateway.js';

/** A new account's id (createUser answers null for an email already taken, which newEmail never is). */
async function newUserId(db: Database): Promise<number> {
  const id = await createUser(db, newEmail('batched'), 'x');
  if (id === null) throw new Error('the email was taken');
  return id;
}

function capturedLog() {
  const lines: string[] = [];
  const log = createLogger('info', new Writable({ write(chunk, _enc, cb) { lines.push(String(JSON.parse(String(chunk)).msg)); cb(); } }));
  return { lines, log };
}

describeWithServices('counts written once a second, while the database fails and after', () => {
  let tmp: ThrowawayDatabase;
  let db: Database;
  beforeAll(async () => {
    tmp = await throwawayDatabase({ migrated: true });
    db = await openDatabase({ postgres: tmp.url } as Parameters<typeof openDatabase>[0]);
  });
  afterAll(async () => {
    await db?.close();
    await tmp?.drop();
    await closeSql();
  });

  it('API key usage: kept while api_key_usage is away, then added once, last use included', async () => {
    const userId = await newUserId(db);
    const [key] = await tmp.sql<{ id: number }>("INSERT INTO api_tokens (user_id, token_hash) VALUES ($1, 'batched') RETURNING id", [userId]);
    const { lines, log } = capturedLog();
    const usage = new ApiKeyUsage(db, log);
    const at = new Date();
    usage.record(key!.id, at);
    usage.record(key!.id, at, true);

    await tmp.sql('ALTER TABLE api_key_usage RENAME TO api_key_usage_away');
    await usage.flush();
    usage.record(key!.id, at);
    await usage.flush();
    expect(lines).toEqual(['could not record API key usage; kept for the next flush']);

    await tmp.sql('ALTER TABLE api_key_usage_away RENAME TO api_key_usage');
    await usage.flush();
    await usage.close();
    expect(await tmp.sql('SELECT requests::int, denied::int FROM api_key_usage WHERE key_id = $1', [key!.id])).toEqual([{ requests: 3, denied: 1 }]);
    expect((await tmp.sql<{ last_used_at: Date }>('SELECT last_used_at FROM api_tokens WHERE id = $1', [key!.id]))[0]!.last_used_at).toEqual(at);
    expect(lines).toEqual(['could not record API key usage; kept for the next flush', 'API key usage recorded again']);
  });

  it('quota refusals: a user\'s written while the organizations\' table is away, the organization\'s kept, then each once', async () => {
    const userId = await newUserId(db);
    const [org] = await tmp.sql<{ id: number }>("INSERT INTO organizations (name) VALUES ('batched') RETURNING id");
    const { lines, log } = capturedLog();
    const denials = new OwnerDenials(db, log);
    const at = new Date();
    denials.record({ ownerType: 'user', id: userId }, at);
    denials.record({ ownerType: 'org', id: org!.id }, at);
    denials.record({ ownerType: 'org', id: org!.id }, at);

    await tmp.sql('ALTER TABLE org_usage_days RENAME TO org_usage_days_away');
    await denials.flush();
    expect(await tmp.sql('SELECT denied FROM usage_days WHERE user_id = $1', [userId])).toEqual([{ denied: 1 }]);
    await tmp.sql('ALTER TABLE org_usage_days_away RENAME TO org_usage_days');
    await denials.flush();
    await denials.close();
    expect(await tmp.sql('SELECT denied FROM usage_days WHERE user_id = $1', [userId])).toEqual([{ denied: 1 }]);
    expect(await tmp.sql('SELECT denied FROM org_usage_days WHERE org_id = $1', [org!.id])).toEqual([{ denied: 2 }]);
    expect(lines).toEqual(['could not record quota refusals; kept for the next flush', 'quota refusals recorded again']);
  });
});

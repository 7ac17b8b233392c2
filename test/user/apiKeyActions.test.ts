// src/keys/personal.ts on a database of its own, without a gateway: what each key action leaves
// behind, which is what a user, an operator and a webhook receiver see of it. The key stored only
// as its SHA-256, the webhook events (api_token.created / .revoked) and the audit rows committed
// with the change, one per key, and the keys this instance forgets at once. The HTTP routes over
// these are tested in test/user/ (apiKeys, namedApiKeys, keyRoll) and test/admin/.
import pino from 'pino';
import { afterAll, beforeAll, beforeEach, expect, it } from 'vitest';
import { AuditLog } from '../../src/audit.js';
import {
  createApiKey, createNamedKey, revokeApiKeys, revokeKeyAsOperator, revokeLeakedKeys, revokeNamedKey, rollNamedKey,
} from '../../src/keys/index.js';
import { sha256Hex } from '../../src/credentials/digest.js';
import { keyChecksum } from '../../src/keys/index.js';
import { postgresDatabase, type Database } from '../../src/storage/database/db.js';
import { migrate } from '../../src/storage/database/migrations.js';
import { OutboxEmitter } from '../../src/webhooks/emitter.js';
import { closeSql, describeWithServices, throwawayDatabase, type ThrowawayDatabase } from '../helpers/gateway.js';

const BY = { actor: 'user' as const, ip: '192.0.2.1', userAgent: 'Tests/1' };
const OPERATOR = { actor: 'operator' as const, actorId: 5, operatorEmail: 'op@example.test' };

describeWithServices('API key actions', () => {
  let database: ThrowawayDatabase;
  let db: Database;
  let deps: Parameters<typeof createApiKey>[0];
  const forgotten: string[] = [];
  let userId: number;

  beforeAll(async () => {
    database = await throwawayDatabase();
    db = postgresDatabase(database.url);
    await migrate(db);
    const clock = () => new Date();
    deps = {
      db,
      identities: { forgetKey: (hash: string) => { forgotten.push(hash); } },
      events: new OutboxEmitter({ db, config: { retries: 0 }, clock }),
      audit: new AuditLog({ db, clock, log: pino({ level: 'silent' }), retentionMs: 86_400_000 }),
      apiKeys: { prefix: 'acme' },
    };
  });
  beforeEach(async () => {
    forgotten.length = 0;
    const [row] = await db.query<{ id: number }>("INSERT INTO users (email, password_hash) VALUES ('u-' || gen_random_uuid() || '@example.test', 'x') RETURNING id");
    userId = row!.id;
  });
  afterAll(async () => {
    await db?.close();
    await database?.drop();
    await closeSql();
  });

  // One change's events share their transaction's created_at and have random ids: ties are put in
  // the order of their type, so that an assertion on both does not depend on chance.
  const events = (id = userId) => db.query<{ type: string; body: string }>('SELECT type, body FROM webhook_deliveries WHERE user_id = $1 ORDER BY created_at, type', [id])
    .then((rows) => rows.map((r) => ({ type: r.type, data: (JSON.parse(r.body) as { data: unknown }).data })));
  const audit = (id = userId) => db.query<{ type: string; actor: string; actor_id: number | null; ip: string | null; user_agent: string | null; data: unknown }>(
    'SELECT type, actor, actor_id, ip, user_agent, data FROM audit_events WHERE user_id = $1 ORDER BY id', [id]);
  const keys = (id = userId) => db.query<{ id: string; token_hash: string; name: string; start: string; revoked: number }>(
    'SELECT id, token_hash, name, start, revoked FROM api_tokens WHERE user_id = $1 ORDER BY id', [id]);

  it('the default key: shown once under the configured prefix, stored as its hash; a new one revokes the earlier, recorded per key', async () => {
    const first = await createApiKey(deps, userId, BY);
    expect(first.key).toMatch(/^acme_[0-9A-Za-z]{38}$/);
    expect(first.key.slice(-6)).toBe(keyChecksum(first.key.slice(5, -6)));
    const [stored] = await keys();
    expect(stored).toMatchObject({ token_hash: sha256Hex(first.key), name: 'default', start: first.key.slice(0, 10), revoked: 0 });
    expect(forgotten).toEqual([]);
    const second = await createApiKey(deps, userId, BY);
    expect(second.key).not.toBe(first.key);
    expect((await keys()).map((k) => k.revoked)).toEqual([1, 0]);
    expect(forgotten).toEqual([sha256Hex(first.key)]);
    const [firstId, secondId] = (await keys()).map((k) => Number(k.id));
    expect(await events()).toEqual([
      { type: 'api_token.created', data: { created_at: first.createdAt.toISOString(), revoked_previous: 0 } },
      { type: 'api_token.created', data: { created_at: second.createdAt.toISOString(), revoked_previous: 1 } },
    ]);
    const who = { actor: 'user', actor_id: userId, ip: '192.0.2.1', user_agent: 'Tests/1' };
    expect(await audit()).toEqual([
      { type: 'api_key.created', ...who, data: { id: firstId, revoked_previous: 0 } },
      { type: 'api_key.revoked', ...who, data: { id: firstId, reason: 'replaced' } },
      { type: 'api_key.created', ...who, data: { id: secondId, revoked_previous: 1 } },
    ]);
  });

  it('revoking a user’s keys: how many, one event, one audit row per key, each forgotten; nothing recorded when there was none', async () => {
    const a = await createNamedKey(deps, userId, { name: 'a', scopes: null, expiresAt: null }, { max: 10, now: new Date() }, BY);
    const b = await createNamedKey(deps, userId, { name: 'b', scopes: ['read'], expiresAt: null }, { max: 10, now: new Date() }, BY);
    expect(await revokeApiKeys(deps, userId, BY)).toBe(2);
    expect(forgotten.sort()).toEqual([sha256Hex(a!.key), sha256Hex(b!.key)].sort());
    expect((await events()).slice(2)).toEqual([{ type: 'api_token.revoked', data: { revoked: 2 } }]);
    expect((await audit()).slice(2).map((r) => [r.type, r.data])).toEqual([['api_key.revoked', { id: a!.id }], ['api_key.revoked', { id: b!.id }]]);
    expect(await revokeApiKeys(deps, userId, BY)).toBe(0);
    expect(await events()).toHaveLength(3);
    expect(await audit()).toHaveLength(4);
  });

  it('a named key: created within the limit, refused beyond it with nothing recorded', async () => {
    const expiresAt = new Date(Date.now() + 86_400_000);
    const made = await createNamedKey(deps, userId, { name: 'ci', scopes: ['read', 'write'], expiresAt }, { max: 1, now: new Date() }, BY);
    expect(made).toMatchObject({ name: 'ci', scopes: ['read', 'write'], start: made!.key.slice(0, 10), expires_at: expiresAt, key: expect.stringMatching(/^acme_/) });
    expect((await keys())[0]!.token_hash).toBe(sha256Hex(made!.key));
    expect(await events()).toEqual([{ type: 'api_token.created', data: { id: made!.id, name: 'ci', created_at: made!.created_at.toISOString(), revoked_previous: 0 } }]);
    expect((await audit()).map((r) => [r.type, r.data])).toEqual([['api_key.created', { id: made!.id, name: 'ci', scopes: ['read', 'write'] }]]);
    expect(await createNamedKey(deps, userId, { name: 'two', scopes: null, expiresAt: null }, { max: 1, now: new Date() }, BY)).toBeNull();
    expect(await keys()).toHaveLength(1);
    expect(await events()).toHaveLength(1);
    expect(await audit()).toHaveLength(1);
  });

  it('revoking one named key: only the owner’s, once', async () => {
    const made = await createNamedKey(deps, userId, { name: 'k', scopes: null, expiresAt: null }, { max: 5, now: new Date() }, BY);
    const [other] = await db.query<{ id: number }>("INSERT INTO users (email, password_hash) VALUES ('o-' || gen_random_uuid() || '@example.test', 'x') RETURNING id");
    expect(await revokeNamedKey(deps, other!.id, made!.id, BY)).toBe(false);
    expect(forgotten).toEqual([]);
    expect(await revokeNamedKey(deps, userId, made!.id, BY)).toBe(true);
    expect(forgotten).toEqual([sha256Hex(made!.key)]);
    expect(await revokeNamedKey(deps, userId, made!.id, BY)).toBe(false);
    expect(forgotten).toHaveLength(1);
    expect((await events()).slice(1)).toEqual([{ type: 'api_token.revoked', data: { revoked: 1, id: made!.id } }]);
    expect((await audit()).slice(1).map((r) => [r.type, r.data])).toEqual([['api_key.revoked', { id: made!.id }]]);
  });

  it('rolling a key: a new key with its name and scopes, the old one ending after the grace, both recorded; undefined for another’s key', async () => {
    const made = await createNamedKey(deps, userId, { name: 'svc', scopes: ['read'], expiresAt: null }, { max: 5, now: new Date() }, BY);
    const now = new Date();
    const [other] = await db.query<{ id: number }>("INSERT INTO users (email, password_hash) VALUES ('o-' || gen_random_uuid() || '@example.test', 'x') RETURNING id");
    expect(await rollNamedKey(deps, other!.id, made!.id, 60_000, now, BY)).toBeUndefined();
    const rolled = await rollNamedKey(deps, userId, made!.id, 60_000, now, BY);
    expect(rolled).toMatchObject({ name: 'svc', scopes: ['read'], key: expect.stringMatching(/^acme_/) });
    expect(rolled!.key).not.toBe(made!.key);
    expect(forgotten).toEqual([sha256Hex(made!.key)]);
    const expiresAt = new Date(now.getTime() + 60_000).toISOString();
    const [old] = await db.query<{ expires_at: Date }>('SELECT expires_at FROM api_tokens WHERE id = $1', [made!.id]);
    expect(old!.expires_at.toISOString()).toBe(expiresAt);
    expect((await keys()).map((k) => k.token_hash)).toEqual([sha256Hex(made!.key), sha256Hex(rolled!.key)]);
    expect((await events()).slice(1)).toEqual([
      { type: 'api_token.created', data: { id: rolled!.id, name: 'svc', created_at: rolled!.created_at.toISOString(), revoked_previous: 0 } },
      { type: 'api_token.revoked', data: { revoked: 1, id: made!.id, reason: 'rolled', expires_at: expiresAt } },
    ]);
    expect((await audit()).slice(1).map((r) => [r.type, r.data])).toEqual([
      ['api_key.created', { id: rolled!.id, name: 'svc', scopes: ['read'], rolled_from: made!.id }],
      ['api_key.revoked', { id: made!.id, reason: 'rolled', replaced_by: rolled!.id, expires_at: expiresAt }],
    ]);
    expect(await rollNamedKey(deps, userId, made!.id, 60_000, now, BY)).toBeUndefined();
    expect(forgotten).toHaveLength(1);
  });

  it('an operator revokes a key by id: recorded as the operator’s act, with the user’s event; undefined when none is active', async () => {
    const made = await createNamedKey(deps, userId, { name: 'k', scopes: null, expiresAt: null }, { max: 5, now: new Date() }, BY);
    const revoked = await revokeKeyAsOperator(deps, made!.id, OPERATOR);
    expect(revoked).toEqual({ id: made!.id, userId, hash: sha256Hex(made!.key) });
    expect(forgotten).toEqual([sha256Hex(made!.key)]);
    expect((await events()).slice(1)).toEqual([{ type: 'api_token.revoked', data: { revoked: 1, id: made!.id } }]);
    expect((await audit()).slice(1)).toEqual([
      { type: 'api_key.revoked', actor: 'operator', actor_id: 5, ip: null, user_agent: null, data: { id: made!.id, operator_email: 'op@example.test' } },
    ]);
    expect(await revokeKeyAsOperator(deps, made!.id, OPERATOR)).toBeUndefined();
    expect(forgotten).toHaveLength(1);
    expect(await events()).toHaveLength(2);
  });

  it('leaked keys: the live ones among those reported (trimmed, repeated) are revoked as leaked; the ids', async () => {
    const a = await createNamedKey(deps, userId, { name: 'a', scopes: null, expiresAt: null }, { max: 5, now: new Date() }, BY);
    const b = await createNamedKey(deps, userId, { name: 'b', scopes: null, expiresAt: null }, { max: 5, now: new Date() }, BY);
    const ids = await revokeLeakedKeys(deps, [` ${a!.key}\n`, a!.key, 'acme_not-a-key'], OPERATOR);
    expect(ids).toEqual([a!.id]);
    expect(forgotten).toEqual([sha256Hex(a!.key)]);
    expect((await keys()).map((k) => k.revoked)).toEqual([1, 0]);
    expect((await events()).slice(2)).toEqual([{ type: 'api_token.revoked', data: { revoked: 1, id: a!.id } }]);
    expect((await audit()).slice(2).map((r) => [r.type, r.data])).toEqual([['api_key.revoked', { id: a!.id, reason: 'leaked', operator_email: 'op@example.test' }]]);
    expect(await revokeLeakedKeys(deps, [a!.key], OPERATOR)).toEqual([]);
    // A report whose only copy of a key is padded still revokes it (the trim is not covered by an unpadded twin).
    expect(await revokeLeakedKeys(deps, [`\t${b!.key} \r\n`], OPERATOR)).toEqual([b!.id]);
    expect((await keys()).map((k) => k.revoked)).toEqual([1, 1]);
  });
});

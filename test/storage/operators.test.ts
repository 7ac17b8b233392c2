// The operators' SQL (src/storage/operators/operators.ts, CONTRACT §24) on a database of its own
// (the run's may hold other tests' operators): the last admin kept only when asked, by id and not
// by position, factors counted as they go, enrolment links and tokens spent or deleted once. End
// to end, through the admin API and the CLI: test/admin/operators*.test.ts, test/cli/operators*.test.ts.
import { afterEach, beforeAll, beforeEach, expect, it } from 'vitest';
import type { Database } from '../../src/storage/database/index.js';
import {
  createEnrolment, deleteOperatorToken, findOperatorByEmail, insertOperator, insertOperatorToken, listOperators, removeOperator, removeOperatorFactors,
  setOperatorRole, spendEnrolment, type OperatorRole,
} from '../../src/storage/operators/operators.js';
import { describeWithServices } from '../helpers/gateway.js';
import { ownMigratedDatabase } from '../helpers/ownDatabase.js';

const NOW = new Date('2026-11-28T12:00:00Z');

describeWithServices('the operators\' SQL', () => {
  const own = ownMigratedDatabase();
  let db: Database;
  beforeAll(() => { db = own(); });
  beforeEach(async () => { await db.query('DELETE FROM operators'); });
  afterEach(async () => { await db.query('DELETE FROM operators'); });

  const add = async (email: string, role: OperatorRole) => (await insertOperator(db, email, role, NOW))!.id;
  const roles = async () => (await listOperators(db)).map((o) => [o.email, o.role]);

  it('finds an operator by email, and nothing for an email no operator has; lists them by id', async () => {
    const second = await add('b@example.test', 'viewer');
    const first = await add('a@example.test', 'admin');
    expect(await findOperatorByEmail(db, 'a@example.test')).toMatchObject({ id: first, email: 'a@example.test', role: 'admin', enrolled: false, mfa: false });
    expect(await findOperatorByEmail(db, 'nobody@example.test')).toBeUndefined();
    expect((await listOperators(db)).map((o) => o.id)).toEqual([second, first]);
  });

  it('keeps the last admin only when asked, and knows which admin is the last by id, not by rank', async () => {
    const first = await add('first@example.test', 'admin');
    const second = await add('second@example.test', 'admin');
    // Two admins: either may be demoted, the first one too.
    expect(await setOperatorRole(db, first, 'support', true)).toMatchObject({ changed: { id: first, role: 'support' } });
    expect(await setOperatorRole(db, second, 'viewer', true)).toEqual({ refused: 'lastAdmin' });
    expect(await removeOperator(db, second, true)).toEqual({ refused: 'lastAdmin' });
    // Made admin again, the last admin stays one: no refusal.
    expect(await setOperatorRole(db, second, 'admin', true)).toMatchObject({ changed: { id: second, role: 'admin' } });
    // Not asked (an admin key stands behind the admin API): the last admin goes.
    expect(await setOperatorRole(db, second, 'viewer', false)).toMatchObject({ changed: { id: second, role: 'viewer' } });
    expect(await roles()).toEqual([['first@example.test', 'support'], ['second@example.test', 'viewer']]);
    // With one admin, anyone else may still be demoted or removed.
    const only = await add('only@example.test', 'admin');
    expect(await setOperatorRole(db, first, 'viewer', true)).toMatchObject({ changed: { id: first, role: 'viewer' } });
    expect(await removeOperator(db, second, true)).toMatchObject({ changed: { id: second } });
    expect(await removeOperator(db, only, true)).toEqual({ refused: 'lastAdmin' });
    await db.query('DELETE FROM operators WHERE id = $1', [only]);
    const third = await add('third@example.test', 'admin');
    expect(await removeOperator(db, third, false)).toMatchObject({ changed: { id: third, email: 'third@example.test' } });
    expect(await setOperatorRole(db, third, 'admin', true)).toEqual({ refused: 'notFound' });
    expect(await removeOperator(db, third, true)).toEqual({ refused: 'notFound' });
  });

  it('says how many factors a reset removed: the TOTP and every passkey', async () => {
    const id = await add('factors@example.test', 'support');
    await db.query('INSERT INTO operator_totp (operator_id, secret_encrypted, confirmed_at) VALUES ($1, $2, $3)', [id, 'sealed', NOW]);
    for (const n of [1, 2]) await db.query('INSERT INTO operator_passkeys (operator_id, credential_id, public_key, name) VALUES ($1, $2, $3, $4)', [id, `cred-${n}`, Buffer.from([n]), `key ${n}`]);
    expect(await findOperatorByEmail(db, 'factors@example.test')).toMatchObject({ mfa: true });
    expect(await removeOperatorFactors(db, id)).toBe(3);
    expect(await removeOperatorFactors(db, id)).toBe(0);
    expect(await findOperatorByEmail(db, 'factors@example.test')).toMatchObject({ mfa: false });
  });

  it('spends an enrolment link once, and not an unknown or expired one', async () => {
    const id = await add('enrol@example.test', 'viewer');
    await createEnrolment(db, id, 'live-hash', new Date(NOW.getTime() + 60_000));
    await createEnrolment(db, id, 'old-hash', new Date(NOW.getTime() - 1));
    expect(await spendEnrolment(db, 'unknown-hash', NOW)).toBeUndefined();
    expect(await spendEnrolment(db, 'old-hash', NOW)).toBeUndefined();
    expect(await spendEnrolment(db, 'live-hash', NOW)).toBe(id);
    expect(await spendEnrolment(db, 'live-hash', NOW)).toBeUndefined();
  });

  it('deletes a token of its own operator once, never another operator\'s', async () => {
    const owner = await add('owner@example.test', 'support');
    const other = await add('other@example.test', 'support');
    const token = await insertOperatorToken(db, owner, 'ci', 'token-hash', NOW, new Date(NOW.getTime() + 86_400_000));
    expect(await deleteOperatorToken(db, other, token.id)).toBe(false);
    expect(await deleteOperatorToken(db, owner, token.id)).toBe(true);
    expect(await deleteOperatorToken(db, owner, token.id)).toBe(false);
  });
});

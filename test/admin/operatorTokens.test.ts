// src/admin/operatorTokens.ts on a database of its own: an enrolment link as the admin API and the
// CLI print it (the console's page, a 32-byte token after #enrol=), stored hashed and spent within
// 24 hours only. Through the console: test/admin/operatorsSignIn.test.ts.
import { expect, it } from 'vitest';
import { ENROLMENT_MS, enrolmentLink } from '../../src/admin/operatorTokens.js';
import { sha256Hex } from '../../src/credentials/digest.js';
import { insertOperator, spendEnrolment } from '../../src/storage/operators/operators.js';
import { describeWithServices } from '../helpers/gateway.js';
import { ownMigratedDatabase } from '../helpers/ownDatabase.js';

const NOW = new Date('2026-11-28T12:00:00Z');

describeWithServices('enrolment links', () => {
  const own = ownMigratedDatabase();

  it('points at the console\'s enrolment page with a one-time token, kept hashed, that works for 24 hours', async () => {
    const db = own();
    expect(ENROLMENT_MS).toBe(86_400_000);
    const id = (await insertOperator(db, 'enrolled@example.test', 'support', NOW))!.id;
    const token = (link: string) => /^https:\/\/admin\.example\.test\/console\/operator\.html#enrol=([A-Za-z0-9_-]{43})$/.exec(link)?.[1];
    const first = token(await enrolmentLink(db, id, NOW, 'https://admin.example.test'));
    const second = token(await enrolmentLink(db, id, NOW, 'https://admin.example.test'));
    expect(first).toBeDefined();
    expect(second).not.toBe(first);
    expect(await db.query('SELECT 1 FROM operator_enrolments WHERE token_hash = $1', [first])).toEqual([]);
    expect(await spendEnrolment(db, sha256Hex(first!), new Date(NOW.getTime() + ENROLMENT_MS - 1000))).toBe(id);
    expect(await spendEnrolment(db, sha256Hex(second!), new Date(NOW.getTime() + ENROLMENT_MS))).toBeUndefined();
  });
});

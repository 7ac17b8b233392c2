// Users imported (CONTRACT §27; importUsers in src/import/users.ts) in this process on the run's
// database, where the CLI's runs (import.test.ts) are out of Stryker's reach: a file's own repeats,
// an external id another user holds (written and dry run alike), refusals in line order, the cost
// of a new kind of hash recorded, and two imports of one set of emails in opposite orders at once.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { importUsers, readUsers } from '../../src/import/index.js';
import { closeSql, describeWithServices, makeUser, sql, startTestGateway, testConfig, type TestGateway } from '../helpers/gateway.js';

const BCRYPT = '$2b$04$abcdefghijklmnopqrstuu5Z0Sqnq0w6s.BEfvBfVXqCxnZrB2eUi';

describeWithServices('importing users in this process', () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startTestGateway(testConfig());
  });
  afterAll(async () => {
    await gw?.close();
    await closeSql();
  });

  const parse = (lines: unknown[]) => readUsers(lines.map((l) => (typeof l === 'string' ? l : JSON.stringify(l))).join('\n'), 'json', { plans: ['free', 'pro'] });
  const run = (lines: unknown[], dryRun = false) => importUsers(gw.services.db, parse(lines), { dryRun, actor: 'cli', format: 'json' });
  const tag = () => `imp-${randomUUID().slice(0, 8)}`;

  it('a file\'s repeats: a second line of an email is skipped, of an external id refused; one another user holds is refused, dry run or not; refusals in line order', async () => {
    const [t, held] = [tag(), `ext-${randomUUID()}`];
    const holder = await makeUser(gw);
    await sql('UPDATE users SET external_id = $2 WHERE id = $1', [holder.id, held]);
    const lines = [
      { email: `${t}-taken@example.test`, external_id: held },
      'not json',
      { email: `${t}-a@example.test`, external_id: `${t}-x` },
      { email: `${t}-A@example.test` },
      { email: `${t}-b@example.test`, external_id: `${t}-x` },
    ];
    const expected = {
      created: 1, skipped_existing: 1, refused: 3, refusals: [
        { line: 1, email: `${t}-taken@example.test`, reason: 'external_id: another user has it' },
        { line: 2, reason: 'not JSON' },
        { line: 5, email: `${t}-b@example.test`, reason: 'external_id: another line of the file has it' },
      ],
    };
    expect(await run(lines, true)).toEqual({ dry_run: true, ...expected });
    expect(await sql('SELECT 1 FROM users WHERE email LIKE $1', [`${t}-%`])).toEqual([]);
    expect(await run(lines)).toEqual({ dry_run: false, ...expected });
    expect(await sql('SELECT email, external_id FROM users WHERE email LIKE $1 ORDER BY email', [`${t}-%`])).toEqual([{ email: `${t}-a@example.test`, external_id: `${t}-x` }]);
  });

  it('the cost of a new kind of hash is recorded with the users, so failed logins are padded to it', async () => {
    const [{ now }] = await sql<{ now: Date }>('SELECT now() AS now') as [{ now: Date }];
    expect(await run([{ email: `${tag()}@example.test`, password_hash: BCRYPT }, { email: `${tag()}@example.test` }])).toMatchObject({ created: 2 });
    // (another file's import may have recorded the shape before: then this one's time is newer)
    expect(await sql("SELECT shape FROM imported_hash_costs WHERE shape = '$2b$04$' AND recorded_at >= $1", [now])).toEqual([{ shape: '$2b$04$' }]);
  });

  it('two imports of the same emails in opposite orders, at once, never deadlock: each email made once (3 rounds)', async () => {
    for (let round = 0; round < 3; round++) {
      const t = tag();
      const lines = Array.from({ length: 300 }, (_, i) => ({ email: `${t}-${String(i).padStart(3, '0')}@example.test` }));
      const [up, down] = await Promise.all([run(lines), run([...lines].reverse())]);
      expect(up.created + down.created).toBe(300);
      expect(up.skipped_existing + down.skipped_existing).toBe(300);
      expect(await sql('SELECT count(*)::int AS n FROM users WHERE email LIKE $1', [`${t}-%`])).toEqual([{ n: 300 }]);
    }
  });
});

// Signing in with an imported password hash (CONTRACT §27) on two instances: each format logs in
// through POST /api/v1/auth/login, leaves the gateway's argon2id in the row, and is refused as any
// wrong password is; two first logins at once both pass and leave one hash; the password check
// of a password change and of an account deletion takes the imported hash too; and the time of a
// failed login says nothing of which kind of hash (or account) is behind the email (§13), even once
// a hash dearer than argon2id is imported. On a database of its own: what an import records there
// (the dearest hash) changes what every failed login of its gateways costs.
import { pbkdf2Sync, scryptSync } from 'node:crypto';
import argon2 from 'argon2';
import bcrypt from 'bcryptjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { HashJob } from '../../src/auth/password/hasher.js';
import { importUsers, readUsers } from '../../src/import/index.js';
import { replacePasswordHash } from '../../src/storage/accounts/users.js';
import {
  bearer, closeSql, describeWithServices, eventually, makeUser, newEmail, newPassword, startTwoGateways, testConfig, throwawayDatabase, type TestGateway, type ThrowawayDatabase,
} from '../helpers/gateway.js';
import { alike, compareTimings } from '../helpers/timing.js';

const LOGIN = '/api/v1/auth/login';
const INVALID = { error: 'Identifiants invalides' };
const NATIVE = /^\$argon2id\$v=19\$m=19456,t=2,p=1\$/;

const SALT = Buffer.from('imported-salt-16');
const phc = (bytes: Buffer) => bytes.toString('base64').replace(/=+$/, '');

// Firebase's published example (github.com/firebase/scrypt, README), in the importer's form.
const FIREBASE_PASSWORD = 'user1password';
const FIREBASE_STORED = '$firebase-scrypt$rounds=8,mem=14,sep=Bw,key=jxspr8Ki0RYycVU8zykbdLGjFQ3McFUH0uiiTvC8pVMXAn210wjLNmdZJzxUECKbm0QsEmYUSDzZvpjeJ9WmXA'
  + '$42xEC+ixf3L2lw$lSrfV15cpx95/sZS2W9c9Kp6i/LVgQNDNC/qzrCnh1SAyZvqmZqAjTdn3aoItz+VHjoZilo78198JAdRuid5lQ';

/** The stored string of each format for `password`, made the way its own system makes it (cheap parameters). */
const FORMATS: Record<string, (password: string) => Promise<string>> = {
  'bcrypt $2b$': async (password) => bcrypt.hashSync(password, 4),
  'bcrypt $2y$': async (password) => bcrypt.hashSync(password, 4).replace(/^\$2b\$/, '$2y$'),
  argon2i: (password) => argon2.hash(password, { type: argon2.argon2i, memoryCost: 4096, timeCost: 2, parallelism: 1 }),
  'argon2id of other parameters': (password) => argon2.hash(password, { type: argon2.argon2id, memoryCost: 8192, timeCost: 1, parallelism: 1 }),
  'scrypt PHC': async (password) => `$scrypt$ln=10,r=8,p=1$${phc(SALT)}$${phc(scryptSync(password, SALT, 32, { N: 1024, r: 8, p: 1 }))}`,
  'PBKDF2 PHC': async (password) => `$pbkdf2-sha256$i=1000$${phc(SALT)}$${phc(pbkdf2Sync(password, SALT, 1000, 32, 'sha256'))}`,
  'PBKDF2 Django': async (password) => `pbkdf2_sha256$1000$djangosalt$${pbkdf2Sync(password, 'djangosalt', 1000, 32, 'sha256').toString('base64')}`,
};

describeWithServices('signing in with an imported password hash', () => {
  let db: ThrowawayDatabase;
  let a: TestGateway;
  let b: TestGateway;
  const sql = <T = Record<string, unknown>>(text: string, params: unknown[] = []) => db.sql<T>(text, params);
  beforeAll(async () => {
    db = await throwawayDatabase({ migrated: true });
    [a, b] = await startTwoGateways(testConfig({ storage: db.storage }));
  });
  afterAll(async () => { await Promise.all([a?.close(), b?.close()]); await db?.drop(); await closeSql(); });

  /** A user as the tests make them (register), then given the imported hash, as the importer stores it. */
  async function imported(stored: string | ((password: string) => Promise<string>), password = newPassword()) {
    const email = newEmail();
    const reg = await a.post('/api/v1/auth/register', { email, password: newPassword() });
    expect(reg.status).toBe(201);
    const hash = typeof stored === 'string' ? stored : await stored(password);
    await sql('UPDATE users SET password_hash = $2 WHERE id = $1', [reg.json.user_id, hash]);
    return { id: reg.json.user_id as number, email, password, hash };
  }
  const storedHash = async (id: number) => (await sql<{ password_hash: string }>('SELECT password_hash FROM users WHERE id = $1', [id]))[0]!.password_hash;

  const cases: Array<[string, string | ((password: string) => Promise<string>), string | undefined]> = [
    ...Object.entries(FORMATS).map(([name, make]): [string, (password: string) => Promise<string>, undefined] => [name, make, undefined]),
    ['Firebase scrypt', FIREBASE_STORED, FIREBASE_PASSWORD],
  ];

  it.each(cases)('%s: right password → 200 and the row rehashed to argon2id; wrong → the same 401; next login native', async (_name, stored, fixed) => {
    const user = await imported(stored, fixed);
    const native = await makeUser(a);
    const nativeWrong = await a.post(LOGIN, { email: native.email, password: `${native.password}x` });

    const wrong = await a.post(LOGIN, { email: user.email, password: `${user.password}x` });
    expect(wrong.status).toBe(401);
    expect(wrong.json).toEqual(INVALID);
    expect(wrong.text).toBe(nativeWrong.text);
    expect(await storedHash(user.id)).toBe(user.hash);

    const first = await a.post(LOGIN, { email: user.email, password: user.password });
    expect(first.status).toBe(200);
    expect(first.json.access_token).toEqual(expect.any(String));
    expect(first.json.refresh_token).toEqual(expect.any(String));
    const rehashed = await storedHash(user.id);
    expect(rehashed).toMatch(NATIVE);
    expect(await argon2.verify(rehashed, user.password)).toBe(true);

    const second = await b.post(LOGIN, { email: user.email, password: user.password });
    expect(second.status).toBe(200);
    expect(await storedHash(user.id)).toBe(rehashed);
    const wrongAfter = await b.post(LOGIN, { email: user.email, password: `${user.password}x` });
    expect(wrongAfter.status).toBe(401);
    expect(wrongAfter.text).toBe(nativeWrong.text);
  });

  it('an unknown or malformed stored hash is a wrong password (401, never a 500), and stays as it was', async () => {
    const native = await makeUser(a);
    const nativeWrong = await a.post(LOGIN, { email: native.email, password: `${native.password}x` });
    for (const stored of ['$1$saltsalt$qjXMvbEw8oaL.CzflDugX/', '$scrypt$ln=40,r=8,p=1$c2FsdA$aGFzaGhhc2hoYXNoaGFzaA', 'pbkdf2_sha256$1000$salt$', 'plain-text-password']) {
      const user = await imported(stored, 'plain-text-password');
      const res = await a.post(LOGIN, { email: user.email, password: user.password });
      expect(res.status).toBe(401);
      expect(res.text).toBe(nativeWrong.text);
      expect(await storedHash(user.id)).toBe(stored);
    }
  });

  it('two first logins at once, on two instances, both pass and leave one valid argon2id hash', async () => {
    for (let round = 0; round < 3; round++) {
      const user = await imported(FORMATS['bcrypt $2b$']!);
      const answers = await Promise.all([a, b, a, b].map((gw) => gw.post(LOGIN, { email: user.email, password: user.password })));
      expect(answers.map((res) => res.status)).toEqual([200, 200, 200, 200]);
      const rehashed = await storedHash(user.id);
      expect(rehashed).toMatch(NATIVE);
      expect(await argon2.verify(rehashed, user.password)).toBe(true);
      expect((await b.post(LOGIN, { email: user.email, password: user.password })).status).toBe(200);
      expect(await storedHash(user.id)).toBe(rehashed);
    }
  });

  it('the rehash writes only over the hash that was checked: a password changed meanwhile is kept', async () => {
    const user = await imported(FORMATS['bcrypt $2b$']!);
    const changedMeanwhile = await argon2.hash('changed meanwhile');
    await sql('UPDATE users SET password_hash = $2 WHERE id = $1', [user.id, changedMeanwhile]);
    expect(await replacePasswordHash(a.services.db, user.id, user.hash, await argon2.hash(user.password))).toBe(false);
    expect(await storedHash(user.id)).toBe(changedMeanwhile);
    expect(await replacePasswordHash(a.services.db, user.id, changedMeanwhile, user.hash)).toBe(true);
    expect(await storedHash(user.id)).toBe(user.hash);
  });

  it('a password change checks current_password against the imported hash', async () => {
    const user = await makeUser(a);
    const hash = await FORMATS['PBKDF2 Django']!(user.password);
    await sql('UPDATE users SET password_hash = $2 WHERE id = $1', [user.id, hash]);
    const next = newPassword();
    const refused = await b.post('/api/v1/auth/password/change', { current_password: `${user.password}x`, new_password: next }, { headers: bearer(user.access) });
    expect(refused.status).toBe(401);
    expect(refused.json).toEqual(INVALID);
    expect(await storedHash(user.id)).toBe(hash);
    const changed = await b.post('/api/v1/auth/password/change', { current_password: user.password, new_password: next }, { headers: bearer(user.access) });
    expect(changed.status).toBe(200);
    expect(await storedHash(user.id)).toMatch(NATIVE);
    expect((await a.post(LOGIN, { email: user.email, password: next })).status).toBe(200);
  });

  it('account deletion confirms the password against the imported hash', async () => {
    const user = await makeUser(a);
    const hash = await FORMATS['scrypt PHC']!(user.password);
    await sql('UPDATE users SET password_hash = $2 WHERE id = $1', [user.id, hash]);
    const refused = await b.request('DELETE', '/api/v1/user/me', { headers: bearer(user.access), json: { password: `${user.password}x` } });
    expect(refused.status).toBe(401);
    expect(refused.json).toEqual(INVALID);
    expect(await sql('SELECT id FROM users WHERE id = $1', [user.id])).toHaveLength(1);
    const deleted = await b.request('DELETE', '/api/v1/user/me', { headers: bearer(user.access), json: { password: user.password } });
    expect(deleted.status).toBe(200);
    expect(await sql('SELECT id FROM users WHERE id = $1', [user.id])).toEqual([]);
  });

  /** The hasher jobs (hasher.ts) of one instance while `work` runs: argon2id's hash and verify, bcrypt, scrypt, pbkdf2. */
  async function hasherJobs(gw: TestGateway, work: () => Promise<unknown>): Promise<string[]> {
    const hasher = (gw.services.passwords as unknown as { hasher: { run(job: HashJob): Promise<string | boolean> } }).hasher;
    const run = hasher.run;
    const jobs: string[] = [];
    hasher.run = (job) => { jobs.push(job.op); return run.call(hasher, job); };
    try {
      await work();
      return jobs;
    } finally {
      hasher.run = run;
    }
  }
  const workOf = (gw: TestGateway, body: Record<string, string>, status: number) => hasherJobs(gw, async () => expect((await gw.post(LOGIN, body)).status).toBe(status));

  it('the password work of one login: an imported hash costs its own check and one argon2id hash or verification, no more', async () => {
    const native = await makeUser(a);
    const user = await imported(FORMATS['bcrypt $2b$']!);
    await workOf(a, { email: newEmail(), password: newPassword() }, 401); // the dummy hash, made once
    expect(await workOf(a, { email: newEmail(), password: newPassword() }, 401)).toEqual(['verify']);
    expect(await workOf(a, { email: native.email, password: `${native.password}x` }, 401)).toEqual(['verify']);
    expect(await workOf(a, { email: native.email, password: native.password }, 200)).toEqual(['verify']);
    expect(await workOf(a, { email: user.email, password: `${user.password}x` }, 401)).toEqual(['bcrypt', 'verify']);
    expect(await workOf(a, { email: user.email, password: user.password }, 200)).toEqual(['bcrypt', 'hash']);
    expect(await workOf(a, { email: user.email, password: user.password }, 200)).toEqual(['verify']);
  });

  describe('timing (§13): a failed login takes as long whatever is behind the email', () => {
    // A bcrypt hash of cost 4 checks in about a millisecond: without the argon2id verification
    // burned after its failure, its wrong password would answer ten times faster than an unknown
    // email's, and tell that the account exists. 15 interleaved samples each, medians compared.
    const ROUNDS = 15;
    const refused = (gw: TestGateway, body: Record<string, string>) => async () => expect((await gw.post(LOGIN, body)).status).toBe(401);

    it('unknown email vs bcrypt-imported wrong password', async () => {
      const user = await imported(FORMATS['bcrypt $2b$']!);
      const timing = await compareTimings(refused(a, { email: newEmail(), password: newPassword() }), refused(a, { email: user.email, password: `${user.password}x` }), ROUNDS);
      expect(alike(timing), JSON.stringify(timing)).toBe(true);
      expect(await storedHash(user.id)).toBe(user.hash);
    });

    it('native wrong password vs bcrypt-imported wrong password', async () => {
      const user = await imported(FORMATS['bcrypt $2b$']!);
      const native = await makeUser(a);
      const timing = await compareTimings(refused(a, { email: native.email, password: `${native.password}x` }), refused(a, { email: user.email, password: `${user.password}x` }), ROUNDS);
      expect(alike(timing), JSON.stringify(timing)).toBe(true);
    });
  });

  describe('a dear imported hash (bcrypt cost 10, about 2.5 argon2id verifications): padded until its first sign-in', () => {
    const ROUNDS = 15;
    const refused = (gw: TestGateway, body: Record<string, string>) => async () => expect((await gw.post(LOGIN, body)).status).toBe(401);
    const dearest = (gw: TestGateway) => gw.services.passwords.dearestImported?.shape;

    it('imported: both instances pad every failed login to it, unknown emails, native accounts and the account alike; signed in and swept: no more', async () => {
      const [email, password] = [newEmail(), newPassword()];
      const hash = bcrypt.hashSync(password, 10);
      const records = readUsers(JSON.stringify({ email, password_hash: hash }), 'json', { plans: ['free'] });
      expect((await importUsers(a.services.db, records, { dryRun: false, actor: 'cli', format: 'json' })).created).toBe(1);
      expect(await sql('SELECT shape FROM imported_hash_costs')).toEqual([{ shape: '$2b$10$' }]);
      await eventually(() => dearest(a) === '$2b$10$' && dearest(b) === '$2b$10$');

      const native = await makeUser(a);
      await Promise.all([a, b].map((gw) => gw.services.passwords.burnVerification('makes the dummy hash, once')));
      expect(await workOf(b, { email: newEmail(), password: newPassword() }, 401)).toEqual(['verify', 'bcrypt']);
      expect(await workOf(b, { email: native.email, password: `${native.password}x` }, 401)).toEqual(['verify', 'bcrypt']);
      expect(await workOf(b, { email, password: `${password}x` }, 401)).toEqual(['bcrypt', 'verify']);
      const unknown = await compareTimings(refused(b, { email: newEmail(), password: newPassword() }), refused(b, { email, password: `${password}x` }), ROUNDS);
      expect(alike(unknown), JSON.stringify(unknown)).toBe(true);
      const nativeWrong = await compareTimings(refused(a, { email: native.email, password: `${native.password}x` }), refused(a, { email, password: `${password}x` }), ROUNDS);
      expect(alike(nativeWrong), JSON.stringify(nativeWrong)).toBe(true);

      // Signed in: rehashed. The class stays an hour after its recording (an import's open batch
      // must not lose it); the sweep after that drops it, and both instances stop padding.
      expect((await a.post(LOGIN, { email, password })).status).toBe(200);
      expect((await a.services.housekeeping.sweep()).imported_hash_costs).toBe(0);
      await sql("UPDATE imported_hash_costs SET recorded_at = now() - interval '2 hours'");
      expect((await a.services.housekeeping.sweep()).imported_hash_costs).toBe(1);
      await eventually(() => dearest(a) === undefined && dearest(b) === undefined);
      expect(await workOf(b, { email: newEmail(), password: newPassword() }, 401)).toEqual(['verify']);
    }, 180_000); // 60 logins of about four hashes' work each, on a shared machine
  });
});

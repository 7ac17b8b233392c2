// Rotating the token key (CONTRACT §25), as an operator does it: a new key signs, the old one only
// verifies (auth.jwt.previous, or the database-kept secret `gateway keys rotate-jwt` rotated out),
// so no session ends; removing the old key ends every session it signed. Tokens name their key in
// `kid`; tokens from before kids are tried against every key.
import { generateKeyPairSync, randomBytes, randomUUID } from 'node:crypto';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { decodeProtectedHeader, SignJWT } from 'jose';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import { reload } from '../../src/live/reload.js';
import { ensureBuilt, gateway, ROOT } from '../helpers/cli.js';
import { docsBlock, docsExample } from '../helpers/docs.js';
import {
  bearer, closeSql, describeWithServices, eventually, makeUser, startTestGateway, startTwoGateways, testConfig, testConfigFromFile,
  throwawayDatabase, type TestGateway, type TestUser,
} from '../helpers/gateway.js';
import type { Config } from '../../src/config/schema.js';

const secret = () => `rotation-${randomBytes(24).toString('base64url')}`;
const kid = (token: string) => decodeProtectedHeader(token).kid;
const me = async (gw: TestGateway, access: string) => (await gw.get('/api/v1/user/me', { headers: bearer(access) })).status;
const refresh = async (gw: TestGateway, token: string) => (await gw.post('/api/v1/auth/refresh', { refresh_token: token })).status;
const login = async (gw: TestGateway, user: TestUser) => (await gw.post('/api/v1/auth/login', { email: user.email, password: user.password })).json as { access_token: string; refresh_token: string };

/** SIGHUP with `next` as the file's new content, as start.ts wires it; what it applied. */
function hangUp(gw: TestGateway, next: Config): string[] {
  const result = reload({ ...gw.services }, () => next);
  expect(result?.needsRestart).toEqual([]);
  return result!.applied;
}

/** An access token as the gateway signed them before kids: same claims, no `kid` header (or the one given). */
function accessWithoutKid(user: TestUser, key: string, header: { kid?: string } = {}): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({ plan: 'free', email: user.email, acr: 'aal1', amr: ['pwd'], auth_time: now })
    .setProtectedHeader({ alg: 'HS256', typ: 'at+jwt', ...header })
    .setSubject(String(user.id)).setIssuedAt(now).setExpirationTime(now + 600).setJti(randomUUID())
    .sign(new TextEncoder().encode(key));
}

describeWithServices('HS256 secret in gateway.yaml, rotated through auth.jwt.previous and SIGHUP (docs/operating.md\'s example)', () => {
  const [old, next] = [secret(), secret()];
  /** docs/operating.md's HS256 example as written, with its two variables. */
  const withKeys = (current: string, previous = '') => {
    const { jwt } = parseConfig(docsExample('operating', 'jwt-rotation-hs256'), 'gateway.yaml', { JWT_SECRET: current, JWT_SECRET_PREVIOUS: previous }).auth;
    return testConfig({ auth: { jwt: { secret: jwt.secret, previous: jwt.previous } } });
  };
  let a: TestGateway;
  let b: TestGateway;
  beforeAll(async () => {
    [a, b] = await startTwoGateways(withKeys(old));
  });
  afterAll(async () => { await a?.close(); await b?.close(); await closeSql(); });

  it('keeps every session across the rotation on both instances, then ends the old key\'s sessions when it is removed', async () => {
    const user = await makeUser(a);
    const second = await login(a, user);
    const oldKid = kid(user.access);
    expect(oldKid).toEqual(expect.any(String));
    expect(kid(user.refresh)).toBe(oldKid);
    const noKid = await accessWithoutKid(user, old);
    expect(await me(b, noKid)).toBe(200);

    for (const gw of [a, b]) expect(hangUp(gw, withKeys(next, old))).toEqual(['auth.jwt.secret', 'auth.jwt.previous']);
    // Names only: no secret reaches the log.
    for (const gw of [a, b]) expect(gw.logs.join('')).not.toMatch(new RegExp(`${old}|${next}`));
    const fresh = await login(b, user);
    expect(kid(fresh.access_token)).not.toBe(oldKid);
    expect(kid(fresh.refresh_token)).toBe(kid(fresh.access_token));
    expect(await me(a, fresh.access_token)).toBe(200);
    // Signed before the rotation: access and refresh tokens go on, on either instance.
    for (const gw of [a, b]) expect(await me(gw, user.access)).toBe(200);
    expect(await me(a, noKid)).toBe(200);
    // A kid picks its key, and only that one: the old secret under the new kid, or an unknown kid, is refused.
    expect(await me(a, await accessWithoutKid(user, old, { kid: kid(fresh.access_token) }))).toBe(401);
    expect(await me(a, await accessWithoutKid(user, old, { kid: 'unknown' }))).toBe(401);
    // Still the gateway's own, glued to other characters: never forwarded to an upstream.
    for (const token of [user.access, user.refresh, noKid]) expect(await b.services.tokens.isOwn(`${token}X`)).toBe(true);
    const refreshed = await a.post('/api/v1/auth/refresh', { refresh_token: user.refresh });
    expect(refreshed.status).toBe(200);
    expect(kid(refreshed.json.access_token)).toBe(kid(fresh.access_token));

    for (const gw of [a, b]) expect(hangUp(gw, withKeys(next))).toEqual(['auth.jwt.previous']);
    for (const gw of [a, b]) {
      const res = await gw.get('/api/v1/user/me', { headers: bearer(user.access) });
      expect(res.status).toBe(401);
      expect(res.headers['www-authenticate']).toContain('error="invalid_token"');
      expect(await me(gw, noKid)).toBe(401);
    }
    expect(await refresh(b, second.refresh_token)).toBe(401);
    expect(await me(b, fresh.access_token)).toBe(200);
    expect(await me(a, refreshed.json.access_token)).toBe(200);
  });

  it('refuses a reload whose previous secret is too short, keeping the running keys', async () => {
    const user = await makeUser(a);
    expect(() => testConfig({ auth: { jwt: { secret: next, previous: ['short'] } } })).toThrow(/32 characters/);
    expect(await me(a, user.access)).toBe(200);
  });
});

describeWithServices('asymmetric keys: the rotation example of docs/operating.md, as written', () => {
  let dir: string;
  let gw: TestGateway;
  const pem = (key: ReturnType<typeof generateKeyPairSync>['privateKey']) => key.export({ type: 'pkcs8', format: 'pem' }).toString();
  const oldPair = generateKeyPairSync('ed25519');
  const newPair = generateKeyPairSync('ed25519');
  beforeAll(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'gw-rotate-'));
    mkdirSync(path.join(dir, 'keys'));
    writeFileSync(path.join(dir, 'keys/jwt-2026-05.pem'), pem(oldPair.privateKey));
    writeFileSync(path.join(dir, 'keys/jwt-2026-05.pub.pem'), oldPair.publicKey.export({ type: 'spki', format: 'pem' }).toString());
    writeFileSync(path.join(dir, 'keys/jwt-2026-11.pem'), pem(newPair.privateKey));
  });
  afterAll(async () => { await gw?.close(); rmSync(dir, { recursive: true, force: true }); await closeSql(); });

  it('verifies the old key\'s tokens, publishes both keys, and refuses them once the old key is removed', async () => {
    const before = 'auth:\n  jwt:\n    algorithm: EdDSA\n    privateKeyFile: ./keys/jwt-2026-05.pem\n';
    gw = await startTestGateway(testConfigFromFile(before, dir));
    const user = await makeUser(gw);
    const oldKid = kid(user.access);
    const jwks = async () => ((await gw.get('/.well-known/jwks.json')).json as { keys: Array<{ kid: string }> }).keys.map((k) => k.kid);
    expect(await jwks()).toEqual([oldKid]);

    expect(hangUp(gw, testConfigFromFile(docsExample('operating', 'jwt-rotation'), dir))).toEqual(['auth.jwt.privateKeyFile', 'auth.jwt.previous']);
    const fresh = await login(gw, user);
    expect(kid(fresh.access_token)).not.toBe(oldKid);
    expect(await jwks()).toEqual([kid(fresh.access_token), oldKid]);
    expect(await me(gw, user.access)).toBe(200);
    expect(await gw.services.tokens.isOwn(`${user.access}${'A'.repeat(20)}`)).toBe(true);
    expect(await refresh(gw, user.refresh)).toBe(200);

    const second = await login(gw, user);
    hangUp(gw, testConfigFromFile('auth:\n  jwt:\n    algorithm: EdDSA\n    privateKeyFile: ./keys/jwt-2026-11.pem\n', dir));
    expect(await jwks()).toEqual([kid(fresh.access_token)]);
    expect(await me(gw, user.access)).toBe(401);
    expect(await gw.services.tokens.isOwn(user.access)).toBe(false);
    expect(await me(gw, second.access_token)).toBe(200);
  });
});

describeWithServices('gateway keys rotate-jwt: the secret the database keeps', () => {
  let dir: string;
  let db: Awaited<ReturnType<typeof throwawayDatabase>>;
  let a: TestGateway;
  let b: TestGateway;
  const cli = (...args: string[]) => gateway(['keys', 'rotate-jwt', ...args, '--config', path.join(dir, 'gateway.yaml')], { cwd: dir });
  /**
   * A line of docs/operating.md's rotate-jwt block, run in bash as pasted in the project (npx finds
   * its `gateway`), with GATEWAY_CONFIG naming this test's file; its output checked against its comment.
   */
  const pasted = async (line: number) => {
    const [command, shown] = docsBlock('operating', 'rotate-jwt').split('\n')[line]!.split(/\s+# /);
    const env = { PATH: [path.dirname(process.execPath), process.env.PATH ?? ''].join(path.delimiter), HOME: process.env.HOME ?? dir, GATEWAY_CONFIG: path.join(dir, 'gateway.yaml') };
    const run = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      execFile('bash', ['-e', '-c', command!], { cwd: ROOT, env, timeout: 20_000 }, (err, stdout, stderr) => {
        resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
      });
    });
    const pattern = new RegExp(`^${shown!.split('…').map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('\\S+')}\n$`);
    expect(run.stdout, run.stderr).toMatch(pattern);
    return run;
  };
  beforeAll(async () => {
    ensureBuilt();
    db = await throwawayDatabase({ migrated: true });
    dir = mkdtempSync(path.join(tmpdir(), 'gw-rotate-jwt-'));
    writeFileSync(path.join(dir, 'gateway.yaml'), `storage:\n  postgres: ${JSON.stringify(db.url)}\nauth:\n  jwt:\n    secret: ""\nadmin:\n  port: 0\n`);
    [a, b] = await startTwoGateways(testConfig({ storage: db.storage, auth: { jwt: { secret: '' } } }));
  }, 120_000);
  afterAll(async () => {
    await a?.close();
    await b?.close();
    await db?.drop();
    if (dir) rmSync(dir, { recursive: true, force: true });
    await closeSql();
  });

  it('rotates on every instance without ending a session, refuses a second rotation, and --drop-previous ends the old key\'s sessions', { timeout: 60_000 }, async () => {
    const user = await makeUser(a);
    const second = await login(a, user);
    const oldKid = kid(user.access)!;
    const [stored] = await db.sql<{ value: string }>('SELECT value FROM gateway_secrets WHERE name = $1', ['jwt_hs256']);
    const noKid = await accessWithoutKid(user, stored!.value);

    const run = await pasted(0);
    expect(run).toMatchObject({ code: 0, stderr: '' });
    expect(run.stdout).toContain(`the previous key ${oldKid} verifies`);
    const newKid = /with kid (\S+);/.exec(run.stdout)![1];
    for (const gw of [a, b]) await eventually(async () => kid((await login(gw, user)).access_token) === newKid, 2000);
    for (const gw of [a, b]) {
      expect(await me(gw, user.access)).toBe(200);
      expect(await me(gw, noKid)).toBe(200);
    }
    expect(await refresh(b, user.refresh)).toBe(200);
    // HS256: nothing to publish, before or after.
    expect((await a.get('/.well-known/jwks.json')).json).toEqual({ keys: [] });

    const again = await cli();
    expect(again.code).toBe(1);
    expect(again.stderr).toContain(`the previous token key ${oldKid} still verifies sessions it signed`);
    expect(again.stderr).toContain('gateway keys rotate-jwt --drop-previous');

    const drop = await pasted(1);
    expect(drop).toEqual({ code: 0, stdout: `previous token key ${oldKid} dropped: every session it signed has ended\n`, stderr: '' });
    for (const gw of [a, b]) await eventually(async () => (await me(gw, user.access)) === 401, 2000);
    expect(await me(b, noKid)).toBe(401);
    expect(await refresh(a, second.refresh_token)).toBe(401);
    expect((await cli('--drop-previous')).stdout).toBe('no previous token key to drop\n');
    expect((await cli()).code).toBe(0);
  });

  it('is refused when the key is in gateway.yaml', async () => {
    const other = path.join(dir, 'yaml-key.yaml');
    writeFileSync(other, `storage:\n  postgres: ${JSON.stringify(db.url)}\nauth:\n  jwt:\n    secret: ${JSON.stringify(secret())}\nadmin:\n  port: 0\n`);
    const run = await gateway(['keys', 'rotate-jwt', '--config', other], { cwd: dir });
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('the token key is in the configuration (auth.jwt.secret), not in the database');
  });
});

describeWithServices('gateway check and auth.jwt.previous', () => {
  let dir: string;
  beforeAll(() => {
    ensureBuilt();
    dir = mkdtempSync(path.join(tmpdir(), 'gw-check-previous-'));
    writeFileSync(path.join(dir, 'old.pub.pem'), generateKeyPairSync('ed25519').publicKey.export({ type: 'spki', format: 'pem' }).toString());
    writeFileSync(path.join(dir, 'jwt.pem'), generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }).toString());
    writeFileSync(path.join(dir, 'rsa.pub.pem'), generateKeyPairSync('rsa', { modulusLength: 2048 }).publicKey.export({ type: 'spki', format: 'pem' }).toString());
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const check = (previous: string[]) => {
    const file = path.join(dir, `gateway-${randomUUID()}.yaml`);
    writeFileSync(file, `auth:\n  jwt:\n    algorithm: EdDSA\n    privateKeyFile: ./jwt.pem\n    previous: ${JSON.stringify(previous)}\n`);
    return gateway(['check', '--config', file], { cwd: dir });
  };

  it('warns that removing a previous key ends its sessions, and says nothing without one', async () => {
    const run = await check(['./old.pub.pem']);
    expect(run.code).toBe(0);
    expect(run.stderr).toMatch(/: warning: auth\.jwt\.previous lists 1 key that only verifies: removing one from the list ends every session it signed\n/);
    expect((await check([])).stderr).not.toContain('auth.jwt.previous');
  });

  it('refuses a previous key of another type or a missing file, naming the entry', async () => {
    const run = await check(['./old.pub.pem', './rsa.pub.pem', './missing.pem', 'not a pem']);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('auth.jwt.previous[1]: ');
    expect(run.stderr).toContain('an rsa key, not an Ed25519 one');
    expect(run.stderr).toContain('auth.jwt.previous[2]: ');
    expect(run.stderr).toContain('cannot read the file: ENOENT');
    expect(run.stderr).not.toContain('auth.jwt.previous[0]');
  });
});

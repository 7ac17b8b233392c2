// The audit actor is what authenticated (CONTRACT §33, issue 68): the shared admin key plus
// `X-Gateway-Actor: cli` was recorded as `actor: cli` ("someone at the host's shell"). Every
// credential that can change something, against every claim a client could add: the shared key
// (with and without the header) is `admin`; an operator's gwop_ token of each role, and an
// operator's console session, the operator (by id); a console session of the shared key
// `console`; the CLI on direct storage `cli`; the CLI through --admin `admin`, or the operator
// whose token it used. The audit rows are read back from the table.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { mintOperatorToken } from '../../src/admin/operatorTokens.js';
import { sha256Hex } from '../../src/credentials/digest.js';
import { createEnrolment, insertOperator, type OperatorRole } from '../../src/storage/operators/operators.js';
import type { AuditRow } from '../../src/storage/events/audit.js';
import { ensureBuilt, gateway as cli } from '../helpers/cli.js';
import { adminOnOwnDatabase, type AdminOnOwnDatabase } from '../helpers/adminApi.js';
import { operatorWithToken } from '../helpers/operators.js';
import {
  ADMIN_KEY, bearer, describeWithServices, makeUser, marker, rawTestConfig, testClock, testConfig, type TestGateway, type ThrowawayDatabase,
} from '../helpers/gateway.js';
import { request } from '../helpers/http.js';
import { totpCode } from '../helpers/totp.js';

/** What a client could claim about itself: none of it may change the actor. */
const CLAIMS: Record<string, string>[] = [{}, { 'x-gateway-actor': 'cli' }, { 'x-gateway-actor': 'console' }, { 'x-gateway-actor': 'system' }, { 'x-gateway-actor': 'operator' }];

interface Expected {
  actor: string;
  actor_id: number | null;
}

describeWithServices('the audit actor is what authenticated (CONTRACT §33)', () => {
  let setup: AdminOnOwnDatabase;
  let db: ThrowawayDatabase;
  let gw: TestGateway;
  let url: string;
  let origin: string;
  let dir: string;
  let configFile: string;
  const clock = testClock();

  /** The rows of `type` about `userId`, oldest first, straight from the table. */
  const rowsOf = (userId: number, type = 'admin.sessions_revoked') =>
    db.sql<AuditRow>('SELECT * FROM audit_events WHERE user_id = $1 AND type = $2 ORDER BY id', [userId, type]);
  const actorsOf = async (userId: number) => (await rowsOf(userId)).map((r) => ({ actor: r.actor, actor_id: r.actor_id }));

  const withToken = (role: OperatorRole) => operatorWithToken(gw.services.db, role);

  /** An operator enrolled through the console's link: their console session. */
  async function operatorSession(role: OperatorRole): Promise<{ id: number; headers: Record<string, string> }> {
    const operator = (await insertOperator(gw.services.db, `op-${marker()}@example.test`, role, new Date()))!;
    const token = randomBytes(32).toString('base64url');
    await createEnrolment(gw.services.db, operator.id, sha256Hex(token), new Date(Date.now() + 86_400_000));
    const start = await request(url, 'POST', '/console/operator/enrolment', { headers: { origin }, json: { token } });
    const code = totpCode(start.json.secret as string, clock().getTime());
    const done = await request(url, 'POST', '/console/operator/enrolment/complete', { headers: { origin }, json: { token, password: 'operator-password-1', code } });
    expect(done.status, done.text).toBe(200);
    return { id: operator.id, headers: { origin, cookie: String(done.headers['set-cookie']).split(';')[0]!, 'x-csrf-token': done.json.csrf as string } };
  }

  /** A console session of the shared key. */
  async function keySession(): Promise<Record<string, string>> {
    const res = await request(url, 'POST', '/console/session', { headers: { origin }, json: { key: ADMIN_KEY } });
    expect(res.status, res.text).toBe(200);
    return { origin, cookie: String(res.headers['set-cookie']).split(';')[0]!, 'x-csrf-token': res.json.csrf as string };
  }

  beforeAll(async () => {
    ensureBuilt();
    setup = await adminOnOwnDatabase(({ storage }) => testConfig({ storage }), { clock });
    ({ db, gw, url } = setup);
    origin = new URL(url).origin;
    dir = mkdtempSync(path.join(tmpdir(), 'gw-audit-actors-'));
    configFile = path.join(dir, 'gateway.yaml');
    writeFileSync(configFile, JSON.stringify(rawTestConfig({ storage: db.storage })));
  });
  afterAll(async () => {
    await setup?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('over HTTP: the shared key is admin, an operator\'s token (support, admin) the operator, a console session its key\'s or operator\'s, whatever X-Gateway-Actor says', async () => {
    const [support, admin] = [await withToken('support'), await withToken('admin')];
    const [keyConsole, opConsole] = [await keySession(), await operatorSession('support')];
    // Each credential: where it calls (the admin API, or the console's relay of it), with which headers.
    const credentials: Array<{ name: string; base: string; headers: Record<string, string>; expected: Expected }> = [
      { name: 'shared key', base: '/admin', headers: bearer(ADMIN_KEY), expected: { actor: 'admin', actor_id: null } },
      { name: 'support gwop_', base: '/admin', headers: bearer(support.token), expected: { actor: 'operator', actor_id: support.id } },
      { name: 'admin gwop_', base: '/admin', headers: bearer(admin.token), expected: { actor: 'operator', actor_id: admin.id } },
      { name: 'console, shared key', base: '/console/api', headers: keyConsole, expected: { actor: 'console', actor_id: null } },
      { name: 'console, operator', base: '/console/api', headers: opConsole.headers, expected: { actor: 'operator', actor_id: opConsole.id } },
    ];
    for (const { name, base, headers, expected } of credentials) {
      const user = await makeUser(gw);
      for (const claim of CLAIMS) {
        const res = await request(url, 'DELETE', `${base}/v1/users/${user.id}/sessions`, { headers: { ...headers, ...claim } });
        expect(res.status, `${name} ${JSON.stringify(claim)}: ${res.text}`).toBe(200);
      }
      expect(await actorsOf(user.id), name).toEqual(CLAIMS.map(() => expected));
    }
  });

  it('a viewer\'s gwop_ token revoking itself is the viewer, whatever X-Gateway-Actor says', async () => {
    const viewer = (await insertOperator(gw.services.db, `op-${marker()}@example.test`, 'viewer', new Date()))!;
    for (const claim of CLAIMS) {
      const { token, id } = await mintOperatorToken(gw.services.db, viewer.id, 'laptop', 90, new Date());
      const res = await request(url, 'DELETE', `/admin/v1/operator/tokens/${id}`, { headers: { ...bearer(token), ...claim } });
      expect(res.status, res.text).toBe(200);
    }
    const rows = await db.sql<AuditRow>("SELECT * FROM audit_events WHERE type = 'operator.token_revoked' AND actor_id = $1 ORDER BY id", [viewer.id]);
    expect(rows.map((r) => r.actor)).toEqual(CLAIMS.map(() => 'operator'));
  });

  it('an import through the admin API names what authenticated: the shared key admin, an operator\'s token that operator (by id)', async () => {
    const operator = await withToken('admin');
    const cases: Array<{ name: string; headers: Record<string, string>; expected: Expected }> = [
      { name: 'shared key, cli claimed', headers: { ...bearer(ADMIN_KEY), 'x-gateway-actor': 'cli' }, expected: { actor: 'admin', actor_id: null } },
      { name: 'admin gwop_, cli claimed', headers: { ...bearer(operator.token), 'x-gateway-actor': 'cli' }, expected: { actor: 'operator', actor_id: operator.id } },
    ];
    for (const { name, headers, expected } of cases) {
      const body = `${JSON.stringify({ email: `imported-${marker()}@example.test` })}\n`;
      const res = await request(url, 'POST', '/admin/v1/import/users', { headers: { ...headers, 'content-type': 'application/x-ndjson' }, body });
      expect(res.status, `${name}: ${res.text}`).toBe(200);
      const [row] = await db.sql<AuditRow>("SELECT * FROM audit_events WHERE type = 'user.imported' ORDER BY id DESC LIMIT 1");
      expect({ actor: row!.actor, actor_id: row!.actor_id }, name).toEqual(expected);
    }
  });

  it('the CLI: on direct storage cli; through --admin with the shared key admin, with an operator\'s token that operator', async () => {
    const operator = await withToken('support');
    const runs: Array<{ name: string; args: string[]; env: Record<string, string>; expected: Expected }> = [
      { name: 'direct storage', args: [], env: {}, expected: { actor: 'cli', actor_id: null } },
      { name: '--admin, shared key', args: ['--admin', url], env: {}, expected: { actor: 'admin', actor_id: null } },
      { name: '--admin, operator token', args: ['--admin', url], env: { GATEWAY_OPERATOR_TOKEN: operator.token }, expected: { actor: 'operator', actor_id: operator.id } },
    ];
    for (const { name, args, env, expected } of runs) {
      const user = await makeUser(gw);
      const done = await cli(['users', 'deactivate', user.email, ...args, '--config', configFile], { cwd: dir, env });
      expect(done.code, `${name}: ${done.stderr}`).toBe(0);
      const rows = await rowsOf(user.id, 'admin.active_changed');
      expect(rows.map((r) => ({ actor: r.actor, actor_id: r.actor_id })), name).toEqual([expected]);
    }
  });
});

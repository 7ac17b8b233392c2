// An operator erasing an organization's last owner (CONTRACT §22: "the last owner cannot leave"):
// refused as the user's own deletion is, through the admin API (key or operator token) and
// `gateway users delete` (directly or --admin); a member goes; once the organizations are handed
// over or deleted, the owner goes too. On a database of its own: it makes an operator.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { mintOperatorToken } from '../../src/admin/operatorTokens.js';
import { insertOperator } from '../../src/storage/operators/operators.js';
import { ensureBuilt, gateway } from '../helpers/cli.js';
import {
  ADMIN_KEY, bearer, describeWithServices, TEST_JWT_SECRET, type TestGateway, type TestUser, type ThrowawayDatabase,
} from '../helpers/gateway.js';
import { request } from '../helpers/http.js';
import { adminOnOwnDatabase, type AdminOnOwnDatabase } from '../helpers/adminApi.js';
import { startSmtpCatcher, type SmtpCatcher } from '../helpers/smtp.js';
import { createOrg, invite, join, organizationsConfig, verifiedUser } from './helpers.js';

describeWithServices('an operator erasing an organization\'s last owner', () => {
  let setup: AdminOnOwnDatabase;
  let db: ThrowawayDatabase;
  let smtp: SmtpCatcher;
  let gw: TestGateway;
  let url: string;
  let dir: string;
  let configFile: string;
  const admin = (method: string, path: string, key = ADMIN_KEY, headers: Record<string, string> = {}) => request(url, method, path, { headers: { ...bearer(key), ...headers } });
  const cli = (...args: string[]) => gateway([...args, '--config', configFile], { cwd: dir });
  const as = (user: TestUser) => ({ headers: bearer(user.access) });
  const lastOwner = (orgs: Array<{ id: number; name: string }>) => ({ error: 'Dernier propriétaire de l\'organisation', code: 'last_owner', orgs });

  beforeAll(async () => {
    ensureBuilt();
    smtp = await startSmtpCatcher();
    // Negotiated: French without Accept-Language (the contract's text), English on asking.
    const config = organizationsConfig(smtp);
    setup = await adminOnOwnDatabase(({ storage }) => ({ ...config, storage: { ...config.storage, ...storage }, errors: { ...config.errors, language: 'negotiate' } }));
    ({ db, gw, url } = setup);
    dir = mkdtempSync(path.join(tmpdir(), 'gw-erase-'));
    configFile = path.join(dir, 'gateway.yaml');
    writeFileSync(configFile, ['storage:', `  postgres: ${JSON.stringify(db.url)}`, 'auth:', '  jwt:', `    secret: ${JSON.stringify(TEST_JWT_SECRET)}`,
      'admin:', '  port: 0', `  apiKey: ${JSON.stringify(ADMIN_KEY)}`, ''].join('\n'));
  }, 120_000);
  afterAll(async () => {
    await setup?.close();
    await smtp?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('is refused with the organizations, by every operator\'s way, and nothing goes; a member is erased; the owner once they are handed over', async () => {
    const [owner, helper] = [await verifiedUser(gw, smtp), await verifiedUser(gw, smtp)];
    const shared = await createOrg(gw, owner, 'Shared');
    const alone = await createOrg(gw, owner, 'Alone');
    expect(await join(gw, helper, await invite(gw, smtp, shared, owner, helper, 'admin'))).toBe(200);
    const operator = (await insertOperator(gw.services.db, 'erasing-op@example.test', 'admin', new Date()))!;
    const { token } = await mintOperatorToken(gw.services.db, operator.id, 'laptop', 90, new Date());

    for (const key of [ADMIN_KEY, token]) {
      const refused = await admin('DELETE', `/admin/v1/users/${owner.id}`, key);
      expect([refused.status, refused.json]).toEqual([409, lastOwner([{ id: shared, name: 'Shared' }, { id: alone, name: 'Alone' }])]);
    }
    // The catalog's English, as the console shows it in an English browser.
    const english = await admin('DELETE', `/admin/v1/users/${owner.id}`, token, { 'accept-language': 'en' });
    expect([english.status, english.json]).toEqual([409, { ...lastOwner([{ id: shared, name: 'Shared' }, { id: alone, name: 'Alone' }]), error: 'Last owner of the organization' }]);
    const kept = `user ${owner.id} (${owner.email}): kept: the last owner of organization ${shared} ("Shared"), ${alone} ("Alone"): `
      + 'make another member owner or delete the organization first';
    expect(await cli('users', 'delete', owner.email)).toMatchObject({ code: 1, stdout: '', stderr: expect.stringContaining(kept) });
    expect(await cli('users', 'delete', owner.email, '--admin', url)).toMatchObject({ code: 1, stdout: '', stderr: expect.stringContaining(kept) });
    // Nothing went: the account signs in, its organizations keep their owner, no erasure is audited.
    expect((await gw.get('/api/v1/user/me', as(owner))).json.orgs.map((o: { id: number; role: string }) => [o.id, o.role])).toEqual([[shared, 'owner'], [alone, 'owner']]);
    expect(await db.sql("SELECT 1 FROM audit_events WHERE type = 'admin.user_deleted'")).toEqual([]);

    // A member who owns nothing is erased as before.
    const erased = await admin('DELETE', `/admin/v1/users/${helper.id}`);
    expect([erased.status, erased.json.email]).toEqual([200, helper.email]);
    const newcomer = await verifiedUser(gw, smtp);
    expect(await join(gw, newcomer, await invite(gw, smtp, shared, owner, newcomer, 'member'))).toBe(200);

    // Handed over, one is left: the answer names it alone.
    expect((await gw.request('PUT', `/api/v1/orgs/${shared}/members/${newcomer.id}`, { ...as(owner), json: { role: 'owner' } })).status).toBe(200);
    expect((await admin('DELETE', `/admin/v1/users/${owner.id}`)).json).toEqual(lastOwner([{ id: alone, name: 'Alone' }]));
    expect((await gw.request('DELETE', `/api/v1/orgs/${alone}`, as(owner))).status).toBe(200);
    const gone = await admin('DELETE', `/admin/v1/users/${owner.id}`, token);
    expect([gone.status, gone.json.email]).toEqual([200, owner.email]);
    expect((await admin('GET', `/admin/v1/orgs/${shared}`)).json.members).toEqual([{ user_id: newcomer.id, email: newcomer.email, role: 'owner', joined_at: expect.any(String) }]);
    expect(await db.sql("SELECT actor, user_id FROM audit_events WHERE type = 'admin.user_deleted' ORDER BY id")).toEqual([
      { actor: 'admin', user_id: helper.id }, { actor: 'operator', user_id: owner.id },
    ]);
  });
});

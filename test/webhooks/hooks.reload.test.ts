// Operator hooks (CONTRACT §24) follow the file without a restart: the built CLI running, hooks:
// changed in its file (another URL, another secret, fewer events), SIGHUP, and the next event goes
// to the new URL signed with the new secret only; the reload says nothing needs a restart.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { bearer, closeSql, describeWithServices, eventually, newEmail, newPassword, rawTestConfig, throwawayDatabase, type ThrowawayDatabase } from '../helpers/gateway.js';
import { ensureBuilt } from '../helpers/cli.js';
import { spawnGateway, type LogLine } from '../helpers/gatewayProcess.js';
import { newHookSecret, verifiedHook } from '../helpers/hookReceiver.js';
import { request } from '../helpers/http.js';
import { receiverCertificate, startReceiver, type Receiver } from '../helpers/webhookReceiver.js';

describeWithServices('operator hooks reloaded on SIGHUP', () => {
  let db: ThrowawayDatabase;
  let before: Receiver;
  let after: Receiver;
  beforeAll(async () => {
    ensureBuilt();
    // A database of its own: no gateway of another test file (without hooks:) claims these messages.
    db = await throwawayDatabase({ migrated: true });
    [before, after] = await Promise.all([startReceiver(receiverCertificate()), startReceiver(receiverCertificate())]);
  });
  afterAll(async () => {
    await Promise.all([before?.close(), after?.close()]);
    await db?.drop();
    await closeSql();
  });

  it('a new URL, secret and event list apply to the next event', async () => {
    const [oldSecret, newSecret] = [newHookSecret(), newHookSecret()];
    const config = (hooks: Record<string, unknown>) => rawTestConfig({ storage: db.storage, hooks: { allowPrivateNetworks: true, ...hooks } });
    const gw = await spawnGateway(config({ url: before.url, secrets: [oldSecret] }));
    try {
      const register = async () => {
        const [email, password] = [newEmail(), newPassword()];
        const res = await request(gw.url, 'POST', '/api/v1/auth/register', { json: { email, password } });
        expect(res.status, res.text).toBe(201);
        return { id: res.json.user_id as number, email, password };
      };
      await register();
      await eventually(() => before.deliveries.length === 1, 10_000);
      expect(verifiedHook(oldSecret, before.deliveries[0]!).type).toBe('user.created');

      gw.writeConfig(config({ url: after.url, secrets: [newSecret], events: ['user.deleted'] }));
      const seen = gw.logs.length;
      gw.child.kill('SIGHUP');
      const reloaded = await gw.waitForLog((l: LogLine) => gw.logs.indexOf(l) >= seen && l.msg === 'configuration reloaded');
      expect(reloaded.applied).toEqual(['hooks.url', 'hooks.secrets', 'hooks.events']);
      expect(gw.logs.slice(seen).filter((l) => l.msg === 'changed settings need a restart to take effect')).toEqual([]);

      // Signed up (user.created, no longer asked for), then gone (user.deleted, asked for).
      const user = await register();
      const login = await request(gw.url, 'POST', '/api/v1/auth/login', { json: { email: user.email, password: user.password } });
      const gone = await request(gw.url, 'DELETE', '/api/v1/user/me', { headers: bearer(login.json.access_token as string), json: { password: user.password } });
      expect(gone.status, gone.text).toBe(200);
      await eventually(() => after.deliveries.length === 1, 10_000);
      const d = after.deliveries[0]!;
      expect(verifiedHook(newSecret, d)).toMatchObject({ type: 'user.deleted', data: { user_id: user.id, email: user.email } });
      expect(() => verifiedHook(oldSecret, d)).toThrow();
      expect(String(d.headers['webhook-signature']).split(' ')).toHaveLength(1);
      expect(before.deliveries).toHaveLength(1);
      // An event the new list leaves out is not even written.
      expect((await db.sql<{ type: string }>('SELECT type FROM webhook_deliveries WHERE subject IS NOT NULL ORDER BY seq')).map((r) => r.type)).toEqual(['user.created', 'user.deleted']);
    } finally {
      await gw.stop();
    }
  });
});

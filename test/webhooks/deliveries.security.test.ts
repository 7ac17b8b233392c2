// Webhook deliveries against server-side request forgery, at delivery time rather than only at
// registration: the target is checked again by the instance that delivers, a name is resolved
// once and connected to at the address that was checked (no DNS rebinding), and a name that now
// resolves to a private address is not called. A real HTTPS receiver with a self-signed
// certificate trusted through webhooks.caFile. Each test runs its gateway on a database of its
// own: a gateway that refuses private addresses, or resolves names its own way, would otherwise
// also claim (and refuse) the other test files' messages.
import { afterEach, expect, it } from 'vitest';
import type { LookupAll } from '../../src/webhooks/ssrf.js';
import { closeSql, describeWithServices, eventually, makeUser } from '../helpers/gateway.js';
import { registerWebhook, settledRows, startIsolatedDeliveries, verified, type IsolatedDeliveries } from '../helpers/webhookReceiver.js';

describeWithServices('webhook deliveries', () => {
  let setup: IsolatedDeliveries | undefined;
  afterEach(async () => {
    await setup?.close();
    setup = undefined;
    await closeSql();
  });

  async function isolated(webhooks: Record<string, unknown>, lookup?: LookupAll) {
    setup = await startIsolatedDeliveries(webhooks, { lookup });
    return { gw: setup.gateways[0]!, db: setup.db, r: await setup.receiver() };
  }

  it('checks the target again at delivery: a private address registered elsewhere is not called', async () => {
    const { gw, db, r } = await isolated({ allowPrivateNetworks: false });
    const user = await makeUser(gw, { plan: 'pro' });
    // Registered when the rules were laxer, or by an instance configured otherwise.
    await db.sql('INSERT INTO webhooks (user_id, url, secret) VALUES ($1, $2, $3)', [user.id, r.url, `whsec_${Buffer.alloc(32, 7).toString('base64')}`]);
    await gw.services.events.emit(user.id, 'security.alert', { n: 1 });
    expect(await settledRows(user.id, db.sql)).toEqual([{
      id: expect.any(String), type: 'security.alert', status: 'failed', attempts: 1, last_error: 'blocked: 127.0.0.1 is not a public address',
    }]);
    expect(r.deliveries).toHaveLength(0);
  });

  it('connects to the address it checked: a second DNS answer (rebinding) is never asked for', async () => {
    const asked: string[] = [];
    // First the receiver, then an address that would be a different (internal) host.
    const lookup: LookupAll = async (host) => {
      asked.push(host);
      return [{ address: asked.length === 1 ? '127.0.0.1' : '192.0.2.1', family: 4 }];
    };
    const { gw, db, r } = await isolated({ allowPrivateNetworks: true }, lookup);
    const user = await makeUser(gw, { plan: 'pro' });
    const secret = await registerWebhook(gw, user, `https://hooks.rebind.test:${r.port}/hook`);
    await eventually(() => r.deliveries.length === 1);
    const d = r.deliveries[0]!;
    // Same name in Host (and TLS verified the certificate for it), reached at the checked address.
    expect(d.headers.host).toBe(`hooks.rebind.test:${r.port}`);
    expect(verified(secret, d)).toMatchObject({ type: 'webhook.test' });
    expect(asked).toEqual(['hooks.rebind.test']);
    expect((await settledRows(user.id, db.sql)).map((row) => row.status)).toEqual(['delivered']);
  });

  it('refuses at delivery a name that now resolves to a private address', async () => {
    const { gw, db, r } = await isolated({ allowPrivateNetworks: false, timeout: '2s' }, async () => [{ address: '127.0.0.1', family: 4 }]);
    const user = await makeUser(gw, { plan: 'pro' });
    // Registration resolves with the system's resolver, where the name does not exist: accepted
    // (DNS may be down), and checked again at each delivery, where it now resolves to loopback.
    await registerWebhook(gw, user, `https://hooks.rebind.test:${r.port}/hook`);
    expect(await settledRows(user.id, db.sql)).toEqual([{
      id: expect.any(String), type: 'webhook.test', status: 'failed', attempts: 1, last_error: 'blocked: 127.0.0.1 is not a public address',
    }]);
    expect(r.deliveries).toHaveLength(0);
  });
});

// CONTRACT §28: hooks may go over plain http to a receiver on this machine when
// allowPrivateNetworks says so (an operator's backend on a laptop); anywhere else http stays
// refused, by the configuration and again at delivery, where the address the name resolves to
// must itself be loopback.
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Webhook } from 'standardwebhooks';
import { ConfigError, parseConfig } from '../../src/config/load.js';
import { closeSql, describeWithServices, makeUser, startTestGateway, testConfig, throwawayDatabase, type TestGateway, type ThrowawayDatabase } from '../helpers/gateway.js';
import { hookRows, newHookSecret } from '../helpers/hookReceiver.js';

const FILE = '/etc/gateway/gateway.yaml';

function configProblems(hooks: string): string[] {
  try {
    parseConfig(`hooks:\n${hooks}`, FILE);
    return [];
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
}

describe('hooks.url over http', () => {
  const secret = 'whsec_' + Buffer.alloc(32, 7).toString('base64');

  it.each([
    'http://127.0.0.1:4000/events', 'http://[::1]:4000/events', 'http://localhost:4000/events', 'http://127.9.9.9/events',
  ])('%s is accepted with allowPrivateNetworks: true', (url) => {
    expect(configProblems(`  url: ${url}\n  secrets: [${secret}]\n  allowPrivateNetworks: true\n`)).toEqual([]);
  });

  it('to a loopback receiver without allowPrivateNetworks is refused, and says what would make it valid', () => {
    expect(configProblems(`  url: http://127.0.0.1:4000/events\n  secrets: [${secret}]\n`)).toEqual([
      'hooks.url: an http:// URL is accepted only to a loopback receiver with allowPrivateNetworks: true (local development); use https:// otherwise',
    ]);
  });

  it.each(['http://backend.example.com/events', 'http://10.0.0.5/events', 'http://192.168.1.2:8080/e', 'http://[fe80::1]/e', 'ftp://127.0.0.1/e'])(
    '%s is refused even with allowPrivateNetworks: true', (url) => {
      expect(configProblems(`  url: ${url}\n  secrets: [${secret}]\n  allowPrivateNetworks: true\n`)).toEqual([
        'hooks.url: expected an https:// URL (the operator\'s backend receiving the events), or http:// to a loopback address with allowPrivateNetworks: true',
      ]);
    });
});

describeWithServices('hooks delivered over http to a loopback receiver', () => {
  const secret = newHookSecret();
  const received: Array<{ headers: IncomingMessage['headers']; body: string }> = [];
  let receiver: Server;
  let port: number;
  let db: ThrowawayDatabase;
  const gateways: TestGateway[] = [];

  beforeAll(async () => {
    receiver = createServer((req, res) => {
      let body = '';
      req.setEncoding('utf8').on('data', (chunk: string) => { body += chunk; }).on('end', () => {
        received.push({ headers: req.headers, body });
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    port = (receiver.address() as AddressInfo).port;
    db = await throwawayDatabase({ migrated: true });
  });
  afterAll(async () => {
    await Promise.all(gateways.map((gw) => gw.close()));
    await new Promise((resolve) => receiver.close(resolve));
    await db?.drop();
    await closeSql();
  });

  it('user.created reaches http://127.0.0.1, signed as over https', async () => {
    const gw = await startTestGateway(testConfig({ storage: db.storage, hooks: { url: `http://127.0.0.1:${port}/events`, secrets: [secret], allowPrivateNetworks: true } }));
    gateways.push(gw);
    const user = await makeUser(gw);
    await expect.poll(() => received.find((d) => d.body.includes(`"user_id":${user.id}`))).toBeDefined();
    const delivery = received.find((d) => d.body.includes(`"user_id":${user.id}`))!;
    const event = new Webhook(secret).verify(delivery.body, {
      'webhook-id': String(delivery.headers['webhook-id']), 'webhook-timestamp': String(delivery.headers['webhook-timestamp']),
      'webhook-signature': String(delivery.headers['webhook-signature']),
    }) as { type: string };
    expect(event.type).toBe('user.created');
  });

  it('a loopback name that resolves elsewhere is blocked at delivery, never sent in clear', async () => {
    const before = received.length;
    const gw = await startTestGateway(
      testConfig({ storage: db.storage, hooks: { url: `http://hooks.localhost:${port}/events`, secrets: [secret], allowPrivateNetworks: true } }),
      // A resolver that answers a routable address for the name: the name alone must not be trusted.
      { webhookLookup: async () => [{ address: '10.1.2.3', family: 4 }] },
    );
    gateways.push(gw);
    // The first gateway of this file must not deliver this message: it has stopped.
    await gateways.shift()!.close();
    const user = await makeUser(gw);
    await expect.poll(async () => (await hookRows(db)).find((r) => r.subject === `user:${user.id}`)?.last_error ?? null)
      .toBe('blocked: plain http to 10.1.2.3, which is not loopback');
    expect(received.length).toBe(before);
  });
});

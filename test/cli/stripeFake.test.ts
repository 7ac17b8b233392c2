// `gateway stripe-fake` and `gateway stripe-fake trigger` as an operator runs them (CONTRACT §29),
// the built CLI in its own process: on 127.0.0.1 whatever HOST says (the image sets 0.0.0.0), its
// webhook secret made once per data directory and printed (STRIPE_WEBHOOK_SECRET never read), and
// a trigger reaching the running fake through that directory: the change made, then Stripe's
// events sent to --forward-to, signed so that the stripe library verifies them.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Stripe from 'stripe';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI, ensureBuilt, gateway } from '../helpers/cli.js';

/** The fake in its own process, once it printed its four first lines. */
async function startFake(args: string[], env: Record<string, string>): Promise<{ child: ChildProcess; out: () => string; stop: () => Promise<number | null> }> {
  const child = spawn(process.execPath, [CLI, 'stripe-fake', ...args], { env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (c: Buffer) => { out += c.toString(); });
  child.stderr!.on('data', (c: Buffer) => { out += c.toString(); });
  const deadline = Date.now() + 20_000;
  while (!/^(?:no --forward-to|forwarding events)/m.test(out)) {
    if (Date.now() > deadline || child.exitCode !== null) throw new Error(`stripe-fake did not start:\n${out}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  const stop = () => new Promise<number | null>((resolve) => { child.once('exit', (code) => resolve(code)); child.kill('SIGTERM'); });
  return { child, out: () => out, stop };
}

describe('gateway stripe-fake', { timeout: 90_000 }, () => {
  let work: string;
  let receiver: http.Server;
  let hookUrl: string;
  const events: Array<{ type: string; signature: string; body: string }> = [];

  beforeAll(async () => {
    ensureBuilt();
    work = mkdtempSync(path.join(tmpdir(), 'stripe-fake-cli-'));
    receiver = http.createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => { body += c.toString(); });
      req.on('end', () => { events.push({ type: (JSON.parse(body) as { type: string }).type, signature: String(req.headers['stripe-signature']), body }); res.writeHead(200).end('{}'); });
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
    hookUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/api/v1/billing/stripe/webhook`;
  }, 120_000);
  afterAll(() => {
    receiver?.close();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('listens on 127.0.0.1 despite HOST, prints its own secret, the same after a restart, and triggers reach it through --data', async () => {
    const data = path.join(work, 'data');
    const env = { HOST: '0.0.0.0', STRIPE_WEBHOOK_SECRET: 'whsec_not_the_fakes' };
    const first = await startFake(['--port', '0', '--data', data, '--forward-to', hookUrl], env);
    const secret = /^webhook secret (whsec_[0-9a-f]{64}) /m.exec(first.out())?.[1];
    expect(first.out()).toMatch(/^stripe-fake: a test double of Stripe's API, .*not Stripe, not for production\nlistening on http:\/\/127\.0\.0\.1:\d+ \(billing\.stripe\.apiBase\)/);
    expect(secret).toBeDefined();
    expect(first.out()).not.toContain('whsec_not_the_fakes');

    const trigger = (...args: string[]) => gateway(['stripe-fake', 'trigger', ...args, '--data', data], { env });
    const created = await trigger('customer.subscription.created', '--customer', 'cus_cli', '--price', 'price_premium_monthly');
    expect(created.stderr).toBe('');
    expect(created.stdout).toMatch(/^subscription sub_[0-9a-f]+ of cus_cli: active, price_premium_monthly\ncustomer\.subscription\.created evt_[0-9a-f]+ → 200 \(customer cus_cli\)\ninvoice\.paid evt_[0-9a-f]+ → 200 \(customer cus_cli\)\n$/);
    expect(created.code).toBe(0);
    const failed = await trigger('invoice.payment_failed', '--customer', 'cus_cli');
    expect(failed.stdout).toMatch(/^subscription sub_[0-9a-f]+ of cus_cli: past_due, price_premium_monthly\ncustomer\.subscription\.updated evt_\w+ → 200 \(customer cus_cli\)\ninvoice\.payment_failed evt_\w+ → 200 \(customer cus_cli\)\n$/);
    // Each event is signed with the printed secret, as Stripe signs: the library verifies it.
    for (const e of events) expect(Stripe.webhooks.constructEvent(e.body, e.signature, secret!).type).toBe(e.type);
    expect(events.map((e) => e.type)).toEqual(['customer.subscription.created', 'invoice.paid', 'customer.subscription.updated', 'invoice.payment_failed']);
    expect(await first.stop()).toBe(0);

    // Stopped: the trigger says so; restarted on the same directory: the same secret and subscription.
    const none = await trigger('invoice.paid', '--customer', 'cus_cli');
    expect([none.code, none.stdout]).toEqual([1, '']);
    expect(none.stderr).toBe(`gateway: no stripe-fake runs on ${data}: start \`gateway stripe-fake --data ${data}\` first\n`);
    const again = await startFake(['--port', '0', '--data', data], env);
    try {
      expect(again.out()).toContain(`webhook secret ${secret} `);
      const paid = await trigger('invoice.paid', '--customer', 'cus_cli');
      expect(paid.stdout).toMatch(/^subscription sub_\w+ of cus_cli: active, price_premium_monthly\ncustomer\.subscription\.updated evt_\w+ → not sent \(no --forward-to\) \(customer cus_cli\)\n/);
      expect(paid.code).toBe(0);
    } finally {
      await again.stop();
    }
  });

  it('--host chooses the address; a bad event, port or --forward-to is a usage error', async () => {
    const data = path.join(work, 'other');
    const fake = await startFake(['--host', '::1', '--port', '0', '--data', data], {});
    try {
      expect(fake.out()).toMatch(/^listening on http:\/\/\[::1\]:\d+ /m);
    } finally {
      await fake.stop();
    }
    const [event, port, forward] = await Promise.all([
      gateway(['stripe-fake', 'trigger', 'charge.refunded', '--data', data]),
      gateway(['stripe-fake', '--port', 'eighty']),
      gateway(['stripe-fake', '--forward-to', 'localhost:8080']),
    ]);
    expect(event.stderr).toMatch(/^gateway: unknown event "charge\.refunded"; known: checkout\.session\.completed, customer\.subscription\.created, /);
    expect(port.stderr).toMatch(/^gateway: --port eighty: expected a port number/);
    expect(forward.stderr).toMatch(/^gateway: --forward-to localhost:8080: expected the gateway's webhook URL/);
    for (const run of [event, port, forward]) expect(run.code).toBe(1);
  });
});

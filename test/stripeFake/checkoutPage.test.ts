// The Stripe double's checkout page and its data directory (src/stripeFake/checkoutPage.ts,
// dataDir.ts): the page's answers to a browser and to a script, for a session open, paid, unknown
// or asked with another method, what it escapes; the directory's secret, state and address. A
// browser's click through the page: fake.test.ts and the portal's browser tests.
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDataDir, runningFakeUrl, startStripeFake, type StripeFake } from '../../src/stripeFake/index.js';

const HTML = { accept: 'text/html,application/xhtml+xml' };

describe('the double\'s checkout page', () => {
  let fake: StripeFake;
  beforeAll(async () => { fake = await startStripeFake(); });
  afterAll(async () => { await fake?.close(); });

  const session = async (form: Record<string, string>) => {
    const res = await fetch(`${fake.url}/v1/checkout/sessions`, { method: 'POST', headers: { authorization: 'Bearer sk_test_page' }, body: new URLSearchParams(form) });
    return (await res.json()) as { id: string; url: string };
  };
  const open = async (url: string, init: RequestInit = {}) => {
    const res = await fetch(url, { redirect: 'manual', ...init });
    return { status: res.status, type: res.headers.get('content-type'), cache: res.headers.get('cache-control'), location: res.headers.get('location'), text: await res.text() };
  };

  it('shows what the session sells, escaped, with Pay and Cancel; once paid, the subscription', async () => {
    const s = await session({ 'line_items[0][price]': 'price_<pro>', client_reference_id: '"7" & <b>' });
    const page = await open(s.url);
    expect(page).toMatchObject({ status: 200, type: 'text/html; charset=utf-8', cache: 'no-store' });
    expect(page.text).toContain('<title>Checkout</title>');
    expect(page.text).toContain('<p>Price <code>price_&#60;pro&#62;</code>, 9.00 € a month, for <code>&#34;7&#34; &#38; &#60;b&#62;</code>.</p>');
    expect(page.text).toContain('a test double of Stripe, not Stripe. Nothing is charged.');
    const bare = await session({});
    expect((await open(bare.url)).text).toContain('<p>Price <code></code>, 9.00 € a month, for <code>a customer</code>.</p>');
    const { subscription } = (await (await fetch(s.url, { method: 'POST' })).json()) as { subscription: string };
    const paid = await open(s.url);
    expect(paid).toMatchObject({ status: 200, type: 'text/html; charset=utf-8' });
    expect(paid.text).toContain(`<title>Paid</title>`);
    expect(paid.text).toContain(`<h1>Paid</h1><p>Subscription ${subscription} is active.</p>`);
  });

  it('Pay: a browser goes to success_url, a script (or a session without one) gets the outcome; a second Pay is 409', async () => {
    const s = await session({ 'line_items[0][price]': 'price_pro', success_url: 'https://app.example.com/ok' });
    expect(await open(s.url, { method: 'POST', headers: HTML })).toMatchObject({ status: 303, location: 'https://app.example.com/ok' });
    expect(await open(s.url, { method: 'POST', headers: HTML })).toMatchObject({ status: 409, type: 'application/json', text: JSON.stringify({ error: `checkout session ${s.id} is paid already` }) });
    const noSuccess = await session({ 'line_items[0][price]': 'price_pro' });
    const paid = await open(noSuccess.url, { method: 'POST', headers: HTML });
    expect(paid).toMatchObject({ status: 200, type: 'application/json' });
    expect(JSON.parse(paid.text)).toMatchObject({ paid: true, subscription: expect.stringMatching(/^sub_/), customer: expect.stringMatching(/^cus_/), webhookStatus: 0 });
  });

  it('Cancel: a browser goes back to cancel_url, anyone else (or a session without one) gets {canceled: true}; the session stays open', async () => {
    const s = await session({ 'line_items[0][price]': 'price_pro', cancel_url: 'https://app.example.com/back' });
    const cancel = `${fake.url}/c/cancel/${s.id}`;
    expect(await open(cancel, { method: 'POST', headers: HTML })).toMatchObject({ status: 303, location: 'https://app.example.com/back' });
    expect(await open(cancel, { method: 'POST' })).toMatchObject({ status: 200, type: 'application/json', text: '{"canceled":true}' });
    const noCancel = await session({});
    expect(await open(`${fake.url}/c/cancel/${noCancel.id}`, { method: 'POST', headers: HTML })).toMatchObject({ status: 200, text: '{"canceled":true}' });
    expect((await open(s.url)).text).toContain('<title>Checkout</title>');
  });

  it('an unknown session or page: a page for a browser or a GET, JSON for a script; another method is 405', async () => {
    const s = await session({});
    for (const url of [`${fake.url}/c/pay/cs_test_none`, `${fake.url}/c/refund/${s.id}`, `${fake.url}/c/pay/${s.id}/more`]) {
      const page = await open(url);
      expect(page, url).toMatchObject({ status: 404, type: 'text/html; charset=utf-8' });
      expect(page.text, url).toContain('<title>No such checkout session</title>');
      expect(await open(url, { method: 'POST', headers: HTML }), url).toMatchObject({ status: 404, type: 'text/html; charset=utf-8' });
      expect(await open(url, { method: 'POST' }), url).toMatchObject({ status: 404, type: 'application/json', text: '{"error":"no such checkout session"}' });
    }
    expect(await open(s.url, { method: 'PUT' })).toMatchObject({ status: 405, type: 'application/json', text: '{"error":"GET or POST"}' });
    expect(await open(`${fake.url}/c/cancel/${s.id}`)).toMatchObject({ status: 405, text: '{"error":"GET or POST"}' });
  });
});

describe('the double\'s data directory', () => {
  it('is made private, its secret once, its state written whole, its address announced and forgotten', () => {
    const root = mkdtempSync(path.join(tmpdir(), 'stripe-fake-dir-'));
    try {
      const dir = path.join(root, 'a', 'b');
      const data = openDataDir(dir);
      expect(statSync(dir).mode & 0o777).toBe(0o700);
      expect(statSync(path.join(dir, 'webhook-secret')).mode & 0o777).toBe(0o600);
      expect(data).toMatchObject({ dir, secret: expect.stringMatching(/^whsec_[0-9a-f]{64}$/), state: undefined });
      expect(runningFakeUrl(dir)).toBeUndefined();
      data.announce('http://127.0.0.1:12111');
      expect(runningFakeUrl(dir)).toBe('http://127.0.0.1:12111');
      const state = { customers: [], subscriptions: [], checkouts: [], meterEvents: [] };
      data.save(state);
      expect(readdirSync(dir).sort()).toEqual(['state.json', 'url', 'webhook-secret']);
      expect(openDataDir(dir)).toMatchObject({ secret: data.secret, state });
      data.forget();
      expect(runningFakeUrl(dir)).toBeUndefined();
      data.forget();
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});

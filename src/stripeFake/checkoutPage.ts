// The double's hosted checkout page, where the gateway's Checkout URL leads (/c/pay/{session}): what
// the session sells, and a Pay and a Cancel button. Pay (POST to the same URL) makes the
// subscription and sends the events a paid checkout sends, then sends a browser on to the session's
// success_url, as Stripe does; a script (curl, a test) gets the outcome as JSON instead. Cancel
// sends the browser back to cancel_url and leaves the session open. Nothing is charged: the page
// says it is a test double.
import type http from 'node:http';
import type { FakeHolder } from './holder.js';
import { TriggerError } from './triggers.js';

const escape = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

function page(res: http.ServerResponse, status: number, title: string, body: string): void {
  res.writeHead(status, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' }).end(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${escape(title)}</title></head>
<body style="font-family: system-ui, sans-serif; max-width: 32rem; margin: 3rem auto">
<p style="background: #fff3cd; padding: .5rem">gateway stripe-fake: a test double of Stripe, not Stripe. Nothing is charged.</p>
${body}
</body></html>
`);
}

const redirect = (res: http.ServerResponse, url: string) => { res.writeHead(303, { location: url }).end(); };
const json = (res: http.ServerResponse, status: number, value: unknown) => { res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(value)); };

export async function checkoutPage(fake: FakeHolder, req: http.IncomingMessage, res: http.ServerResponse, path: string): Promise<void> {
  const match = /^\/c\/(pay|cancel)\/([^/]+)$/.exec(path);
  const session = match ? fake.checkouts.get(decodeURIComponent(match[2]!)) : undefined;
  const browser = /\btext\/html\b/.test(req.headers.accept ?? '');
  if (!match || !session) {
    if (browser || req.method === 'GET') return page(res, 404, 'No such checkout session', '<h1>No such checkout session</h1>');
    return json(res, 404, { error: 'no such checkout session' });
  }
  if (req.method === 'GET' && match[1] === 'pay') {
    if (session.subscription) return page(res, 200, 'Paid', `<h1>Paid</h1><p>Subscription ${escape(session.subscription)} is active.</p>`);
    const action = `/c/pay/${encodeURIComponent(session.id)}`;
    return page(res, 200, 'Checkout', `<h1>Subscribe</h1>
<p>Price <code>${escape(session.form['line_items[0][price]'] ?? '')}</code>, 9.00 € a month, for <code>${escape(session.form.client_reference_id ?? 'a customer')}</code>.</p>
<form method="post" action="${action}"><button type="submit" id="pay">Pay</button></form>
<form method="post" action="/c/cancel/${encodeURIComponent(session.id)}"><button type="submit" id="cancel">Cancel</button></form>`);
  }
  if (req.method !== 'POST') return json(res, 405, { error: 'GET or POST' });
  if (match[1] === 'cancel') return browser && session.form.cancel_url ? redirect(res, session.form.cancel_url) : json(res, 200, { canceled: true });
  try {
    const paid = await fake.pay(session.id);
    if (browser && session.form.success_url) return redirect(res, session.form.success_url);
    return json(res, 200, { paid: true, ...paid });
  } catch (err) {
    if (!(err instanceof TriggerError)) throw err;
    return json(res, 409, { error: err.message });
  }
}

// `gateway stripe-fake` and `gateway stripe-fake trigger` (CONTRACT §29): the Stripe double, run
// against one's own gateway.yaml, and the events a real account would send. The double is heavy
// (the `stripe` package): it is imported when the command runs, not for `--help`.
import path from 'node:path';
import { CommandError, UsageError, type Args } from './command.js';
// From the double's light modules only: its door (index.js) brings `stripe` with it.
import { DEFAULT_DATA_DIR, runningFakeUrl } from '../stripeFake/dataDir.js';
import { TRIGGER_PATH, TRIGGERS, type TriggerArgs, type TriggerResult } from '../stripeFake/triggers.js';

/** The port the double listens on by default: stripe-mock's, a port known to stand for Stripe's API on a laptop. */
export const DEFAULT_PORT = 12111;
export { DEFAULT_DATA_DIR, TRIGGERS };

const text = (value: string | boolean | undefined) => (typeof value === 'string' ? value : undefined);

function portOf(value: string | undefined): number {
  if (value === undefined) return DEFAULT_PORT;
  const port = Number(value);
  if (!/^\d+$/.test(value) || port > 65_535) throw new UsageError(`--port ${value}: expected a port number, 0 to 65535`);
  return port;
}

function forwardTo(value: string | undefined): string | undefined {
  if (value !== undefined && !/^https?:\/\/[^/]/.test(value)) throw new UsageError(`--forward-to ${value}: expected the gateway's webhook URL, such as http://127.0.0.1:8080/api/v1/billing/stripe/webhook`);
  return value;
}

/** Runs the double until SIGINT or SIGTERM; its address, data directory and webhook secret printed first. */
export async function stripeFakeCommand({ values }: Args): Promise<number> {
  const port = portOf(text(values.port));
  const target = forwardTo(text(values['forward-to']));
  const dir = text(values.data) ?? DEFAULT_DATA_DIR;
  const { deliveryLine, openDataDir, startStripeFake } = await import('../stripeFake/index.js');
  const data = openDataDir(dir);
  // HOST is the gateway's (the image sets it to 0.0.0.0): the double listens on loopback unless told.
  const fake = await startStripeFake({
    host: text(values.host) ?? '127.0.0.1', port, state: data.state, onChange: (state) => data.save(state),
    webhook: target ? { url: target, secret: data.secret } : undefined,
  }).catch((err: NodeJS.ErrnoException) => { throw new CommandError(`stripe-fake: cannot listen on port ${port}: ${err.code ?? err.message}`); });
  data.announce(fake.url);
  console.log([
    'stripe-fake: a test double of Stripe\'s API, for trying billing without a Stripe account; not Stripe, not for production',
    `listening on ${fake.url} (billing.stripe.apiBase), test keys only (sk_test_…, rk_test_…); data in ${path.resolve(dir)}`,
    `webhook secret ${data.secret} (the same for this data directory: billing.stripe.webhookSecrets)`,
    target ? `forwarding events to ${target}` : 'no --forward-to: events are made, not sent',
  ].join('\n'));
  const printed = { count: 0 };
  const report = setInterval(() => {
    for (const e of fake.sent.slice(printed.count)) console.log(deliveryLine(e));
    printed.count = fake.sent.length;
  }, 200);
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  clearInterval(report);
  data.forget();
  await fake.close();
  return 0;
}

/** Asks the double running on --data to make the change of EVENT and send its events; prints what was sent and answered. */
export async function stripeFakeTriggerCommand({ operands: [event], values }: Args): Promise<number> {
  if (!(TRIGGERS as readonly string[]).includes(event!)) throw new UsageError(`unknown event ${JSON.stringify(event)}; known: ${TRIGGERS.join(', ')}`);
  const dir = text(values.data) ?? DEFAULT_DATA_DIR;
  const url = runningFakeUrl(dir);
  if (!url) throw new CommandError(`no stripe-fake runs on ${path.resolve(dir)}: start \`gateway stripe-fake --data ${dir}\` first`);
  const args: TriggerArgs = {
    event: event!, customer: text(values.customer), price: text(values.price), status: text(values.status), subscription: text(values.subscription), session: text(values.session),
  };
  const res = await fetch(`${url}${TRIGGER_PATH}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(args) })
    .catch((err: Error) => { throw new CommandError(`stripe-fake at ${url} does not answer (${String(err.cause ?? err.message)}): is it still running?`); });
  const body = await res.json() as TriggerResult & { error?: string };
  if (!res.ok) throw new CommandError(`stripe-fake trigger ${event}: ${body.error ?? res.status}`);
  const { deliveryLine } = await import('../stripeFake/webhook.js');
  const { subscription: sub } = body;
  console.log(`subscription ${sub.id} of ${body.customer}: ${sub.status}, ${sub.items.data.map((i) => i.price.id).join(', ')}`);
  for (const e of body.events) console.log(deliveryLine(e));
  // Not sent for want of --forward-to is what was asked; sent and refused, or not delivered, is a failure.
  return body.events.every((e) => (e.status === null ? !e.error?.startsWith('not delivered') : e.status < 300)) ? 0 : 1;
}

// The double's objects and events against the `stripe` package's type definitions, at run time
// (CONTRACT §29): what the fake answers and sends is walked field by field, recursively, against
// the types the TypeScript compiler reads from node_modules/stripe (Stripe generates them from its
// OpenAPI description of STRIPE_API_VERSION). Every field sent must exist there with a value of its
// type (an enum's value among the enum's), and every field the type always has must be sent.
// The compile-time `satisfies` in src/stripeFake/ checks the code; this checks what goes out.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import Stripe from 'stripe';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STRIPE_API_VERSION } from '../../src/config/schema/billing.js';
import { startStripeFake, TRIGGERS, type StripeFake } from '../../src/stripeFake/index.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const STUB = path.join(ROOT, 'test/stripeFake/__stripe_types__.ts');
const TYPES = {
  event: 'Stripe.Event', subscription: 'Stripe.Subscription', session: 'Stripe.Checkout.Session', portal: 'Stripe.BillingPortal.Session',
  customer: 'Stripe.Customer', invoice: 'Stripe.Invoice', meterEvent: 'Stripe.Billing.MeterEvent',
} as const;

/** The compiler's view of the stripe package: one declared constant per type above. */
function stripeTypes(): { checker: ts.TypeChecker; types: Record<keyof typeof TYPES, ts.Type> } {
  const text = `import type Stripe from 'stripe';\n${Object.entries(TYPES).map(([name, type]) => `export declare const ${name}: ${type};`).join('\n')}\n`;
  const options: ts.CompilerOptions = {
    module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, target: ts.ScriptTarget.ES2022, strict: true, noEmit: true, skipLibCheck: true, types: [],
  };
  const host = ts.createCompilerHost(options);
  const { getSourceFile, fileExists, readFile } = host;
  host.getSourceFile = (file, language, ...rest) => (file === STUB ? ts.createSourceFile(file, text, language) : getSourceFile.call(host, file, language, ...rest));
  host.fileExists = (file) => file === STUB || fileExists.call(host, file);
  host.readFile = (file) => (file === STUB ? text : readFile.call(host, file));
  const program = ts.createProgram([STUB], options, host);
  const checker = program.getTypeChecker();
  const declarations = program.getSourceFile(STUB)!.statements.filter(ts.isVariableStatement).map((s) => s.declarationList.declarations[0]!);
  const types = Object.fromEntries(declarations.map((d) => [d.name.getText(), checker.getTypeAtLocation(d)])) as Record<keyof typeof TYPES, ts.Type>;
  return { checker, types };
}

/** The differences between a JSON value and a type: fields the type lacks, values not of their type, fields it always has but missing. */
function differences(checker: ts.TypeChecker, value: unknown, type: ts.Type, where: string): string[] {
  const parts = type.isUnion() ? type.types : [type];
  const shown = () => checker.typeToString(type).slice(0, 120);
  if (parts.some((t) => t.flags & (ts.TypeFlags.Any | ts.TypeFlags.Unknown))) return [];
  if (value === null) return parts.some((t) => t.flags & ts.TypeFlags.Null) ? [] : [`${where}: null, typed ${shown()}`];
  if (Array.isArray(value)) {
    const elements = parts.filter((t) => checker.isArrayType(t)).map((t) => checker.getTypeArguments(t as ts.TypeReference)[0]!);
    if (!elements.length) return [`${where}: an array, typed ${shown()}`];
    return value.flatMap((v, i) => closest(elements.map((e) => differences(checker, v, e, `${where}[${i}]`))));
  }
  if (typeof value === 'object') {
    const objects = parts.filter((t) => t.flags & ts.TypeFlags.Object && !checker.isArrayType(t)).filter((t) => discriminantsMatch(checker, value as Record<string, unknown>, t));
    if (!objects.length) return [`${where}: an object, typed ${shown()}`];
    return closest(objects.map((t) => objectDifferences(checker, value as Record<string, unknown>, t, where)));
  }
  const fits = parts.some((t) => (t.isLiteral() ? t.value === value
    : typeof value === 'string' ? t.flags & ts.TypeFlags.String
      : typeof value === 'number' ? t.flags & ts.TypeFlags.Number
        : typeof value === 'boolean' && t.flags & (ts.TypeFlags.Boolean | ts.TypeFlags.BooleanLiteral) && (!(t.flags & ts.TypeFlags.BooleanLiteral) || checker.typeToString(t) === String(value))));
  return fits ? [] : [`${where}: ${JSON.stringify(value)}, typed ${shown()}`];
}

/** The fewest differences among the candidates (none when one fits). */
const closest = (candidates: string[][]) => candidates.reduce((best, c) => (c.length < best.length ? c : best));

/** A union member whose `object` or `type` is a literal other than the value's is not the one meant (Stripe.Event's 250 members). */
function discriminantsMatch(checker: ts.TypeChecker, value: Record<string, unknown>, type: ts.Type): boolean {
  return ['object', 'type'].every((key) => {
    const prop = type.getProperty(key);
    if (!prop || typeof value[key] !== 'string') return true;
    const t = checker.getTypeOfSymbol(prop);
    const literals = (t.isUnion() ? t.types : [t]);
    return !literals.every((l) => l.isStringLiteral()) || literals.some((l) => (l as ts.StringLiteralType).value === value[key]);
  });
}

function objectDifferences(checker: ts.TypeChecker, value: Record<string, unknown>, type: ts.Type, where: string): string[] {
  const index = checker.getIndexInfoOfType(type, ts.IndexKind.String);
  const sent = Object.entries(value).flatMap(([key, v]) => {
    const prop = type.getProperty(key);
    if (prop) return differences(checker, v, checker.getTypeOfSymbol(prop), `${where}.${key}`);
    return index ? differences(checker, v, index.type, `${where}.${key}`) : [`${where}.${key}: not in ${checker.typeToString(type)}`];
  });
  const always = type.getProperties().filter((p) => !(p.flags & ts.SymbolFlags.Optional) && !(p.name in value)).map((p) => `${where}.${p.name}: missing (always in ${checker.typeToString(type)})`);
  return [...sent, ...always];
}

describe('the double\'s shapes, compared with the stripe package\'s types', { timeout: 120_000 }, () => {
  let compiled: ReturnType<typeof stripeTypes>;
  let fake: StripeFake;
  let server: http.Server;
  const events: unknown[] = [];
  const answers: Record<'subscription' | 'session' | 'portal' | 'customer' | 'meterEvent', unknown[]> = { subscription: [], session: [], portal: [], customer: [], meterEvent: [] };

  beforeAll(async () => {
    compiled = stripeTypes();
    server = http.createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => { body += c.toString(); });
      req.on('end', () => { events.push(JSON.parse(body)); res.writeHead(200).end('{}'); });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    fake = await startStripeFake();
    fake.deliverTo(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`, 'whsec_c2hhcGVz');
    // Every call the gateway makes, through the stripe library, and every event the fake sends.
    const raw = async (method: string, route: string, form: Record<string, string> = {}) => (await fetch(`${fake.url}${route}`, {
      method, headers: { authorization: 'Bearer sk_test_shapes', 'content-type': 'application/x-www-form-urlencoded' }, ...(method === 'POST' ? { body: new URLSearchParams(form) } : {}),
    })).json();
    const session = await raw('POST', '/v1/checkout/sessions', {
      mode: 'subscription', 'line_items[0][price]': 'price_premium_monthly', 'line_items[0][quantity]': '1', client_reference_id: 'user:42', 'metadata[owner_type]': 'user',
      'metadata[owner_id]': '42', 'subscription_data[metadata][owner_id]': '42', success_url: 'https://app.example.com/ok', cancel_url: 'https://app.example.com/back',
    }) as { id: string; url: string };
    answers.session.push(session);
    const paid = await (await fetch(session.url, { method: 'POST' })).json() as { subscription: string; customer: string };
    answers.subscription.push(await raw('GET', `/v1/subscriptions/${paid.subscription}`));
    answers.portal.push(await raw('POST', '/v1/billing_portal/sessions', { customer: paid.customer, return_url: 'https://app.example.com/back' }));
    answers.customer.push(await raw('POST', '/v1/customers', { email: 'ada@example.com', 'metadata[owner]': 'user:42' }), await raw('GET', `/v1/customers/${paid.customer}`));
    answers.meterEvent.push(await raw('POST', '/v1/billing/meter_events', {
      event_name: 'api_requests', identifier: 'gw_1', timestamp: '1790000000', 'payload[stripe_customer_id]': paid.customer, 'payload[value]': '3',
    }));
    await fake.trigger({ event: 'checkout.session.completed', customer: paid.customer, price: 'price_pro_monthly' });
    for (const event of TRIGGERS.filter((e) => e !== 'checkout.session.completed' && e !== 'customer.subscription.created')) await fake.trigger({ event, customer: paid.customer });
    answers.subscription.push(await raw('POST', `/v1/subscriptions/${paid.subscription}`, { cancel_at_period_end: 'true' }));
  });
  afterAll(async () => {
    await fake?.close();
    server?.close();
  });

  it('pins one API version, the stripe package\'s own, and every event says it', () => {
    expect(STRIPE_API_VERSION).toBe(Stripe.API_VERSION);
    expect(new Set(events.map((e) => (e as { api_version: string }).api_version))).toEqual(new Set([STRIPE_API_VERSION]));
  });

  it('sends every event type of Stripe\'s list, each field of it in Stripe.Event\'s type', () => {
    expect(new Set(events.map((e) => (e as { type: string }).type))).toEqual(new Set(TRIGGERS));
    for (const event of events) expect(differences(compiled.checker, event, compiled.types.event, (event as { type: string }).type)).toEqual([]);
  });

  it('answers the API calls with objects of Stripe\'s types', () => {
    for (const [name, values] of Object.entries(answers)) {
      expect(values.length, name).toBeGreaterThan(0);
      for (const value of values) expect(differences(compiled.checker, value, compiled.types[name as keyof typeof answers], name)).toEqual([]);
    }
  });

  it('would see a field Stripe does not send, a value outside an enum, and a field Stripe always sends missing', () => {
    const { checker, types } = compiled;
    const sub = answers.subscription[0] as Record<string, unknown>;
    const { currency: _currency, ...withoutCurrency } = sub;
    expect(differences(checker, { ...sub, plan_name: 'premium' }, types.subscription, 'sub')).toEqual([expect.stringMatching(/^sub\.plan_name: not in Subscription$/)]);
    expect(differences(checker, { ...sub, status: 'lapsed' }, types.subscription, 'sub')).toEqual([expect.stringMatching(/^sub\.status: "lapsed", typed /)]);
    expect(differences(checker, withoutCurrency, types.subscription, 'sub')).toEqual(['sub.currency: missing (always in Subscription)']);
    const event = events[0] as { data: { object: Record<string, unknown> } };
    expect(differences(checker, { ...event, data: { object: { ...event.data.object, livemode: 'no' } } }, types.event, 'e')).toEqual([expect.stringMatching(/^e\.data\.object\.livemode: "no", typed boolean$/)]);
  });
});

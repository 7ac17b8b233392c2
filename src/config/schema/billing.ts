// billing.stripe (CONTRACT §23): plans that follow payment. The secret key's mode (live or test)
// decides which events count; prices name plans, which schema.ts checks against the plans the
// file knows. `meter` names the Stripe meter the uses past a plan's allowance go to (monthly.overage).
import { z } from 'zod';
import { int, isUrl } from './values.js';
import { planName } from './routes.js';

const SECRET_KEY = /^(?:sk|rk)_(?:live|test)_[A-Za-z0-9_]+$/;
const WEBHOOK_SECRET = /^whsec_[A-Za-z0-9+/=_-]+$/;
const PRICE_ID = /^[A-Za-z0-9_-]{1,255}$/;

/**
 * The Stripe API version the gateway's client speaks and `gateway stripe-fake` answers in: pinned
 * here alone, to the `stripe` package's own (test/stripeFake/shapes.test.ts fails when they part).
 */
export const STRIPE_API_VERSION = '2026-10-28.endive';
/** Stripe's own API: a live key may reach nothing else (CONTRACT §29). */
export const STRIPE_API = 'https://api.stripe.com';

/** A live key (the schema's SECRET_KEY allows live and test keys only: any other is a test key). */
export const isLiveKey = (key: string) => /^(?:sk|rk)_live_/.test(key);
/** An apiBase that is not Stripe's own: a test double (a fake, a mock), never Stripe. */
export const isStripeDouble = (apiBase: string) => apiBase.replace(/\/+$/, '') !== STRIPE_API;

const httpUrl = (what: string) => z.string().refine((u) => isUrl(u, /^https?:$/), `expected an http:// or https:// URL (${what})`);

export const billingSchema = z.strictObject({
  stripe: z.strictObject({
    secretKey: z.string().regex(SECRET_KEY, 'expected a Stripe secret or restricted key: sk_live_…, sk_test_…, rk_live_… or rk_test_…')
      .meta({
        examples: ['${STRIPE_SECRET_KEY}'],
        description: 'A Stripe secret key or, better, a restricted key (docs/billing.md lists its rights); live or test decides which events count.',
      }),
    webhookSecrets: z.array(z.string().regex(WEBHOOK_SECRET, 'expected a webhook endpoint secret whsec_…')).min(1)
      .meta({
        examples: [['${STRIPE_WEBHOOK_SECRET}']],
        description: 'The webhook endpoint\'s signing secrets; several while Stripe rolls its secret (each is tried).',
      }),
    apiBase: httpUrl('Stripe\'s API, or a local fake of it').default('https://api.stripe.com')
      .meta({ description: 'Where Stripe\'s API is reached: https://api.stripe.com, or a test double such as `gateway stripe-fake` (with a test key only).' }),
    dashboardUrl: httpUrl('Stripe\'s dashboard').default('https://dashboard.stripe.com')
      .meta({ description: 'Stripe\'s dashboard, which the console links a customer and its subscriptions to (test-mode keys: its /test/ pages).' }),
    prices: z.record(z.string().regex(PRICE_ID, 'expected a Stripe price id such as price_1PqR…'), planName)
      .refine((prices) => Object.keys(prices).length > 0, 'expected at least one price: { price_id: plan }')
      .meta({
        examples: [{ price_premium_monthly: 'premium', price_pro_monthly: 'pro' }],
        description: 'Stripe price ids and the plan each gives; others are ignored.',
      }),
    successUrl: httpUrl('where Checkout sends the customer after paying').meta({ examples: ['https://app.example.com/billing?done=1'] }),
    cancelUrl: httpUrl('where Checkout sends the customer who goes back').meta({ examples: ['https://app.example.com/billing'] }),
    pastDueGraceDays: int(0, 365).default(7)
      .meta({ description: 'Days a past_due subscription keeps its plan, from the first time it was seen past_due.' }),
    meter: z.string().regex(/^[A-Za-z0-9_.:-]{1,100}$/, 'expected a Stripe meter\'s event name such as api_requests').optional()
      .meta({ examples: ['api_requests'], description: 'The event name of the Stripe Billing meter the uses past a plan\'s included allowance (monthly.overage: meter) are reported to.' }),
  }).refine((stripe) => !(isLiveKey(stripe.secretKey) && isStripeDouble(stripe.apiBase)), {
    path: ['apiBase'], message: `a live key (sk_live_, rk_live_) goes to ${STRIPE_API} only: a test double takes sk_test_ or rk_test_ keys`,
  }),
}).meta({ description: 'Plans that follow payment (docs/billing.md). Without it, /api/v1/billing/* are not the gateway\'s.' });

export type BillingConfig = z.output<typeof billingSchema>;

// billing.stripe as `gateway check` reads it (CONTRACT §23): prices must give plans the file
// knows, keys and secrets have Stripe's shapes, and a plan's metered overage needs `meter` (the
// Stripe meter its uses go to).
import { describe, expect, it } from 'vitest';
import { configProblems } from '../helpers/gateway.js';

const billing = (stripe: string) => `upstreams: { app: { url: http://127.0.0.1:3000 } }
billing:
  stripe:
    secretKey: rk_test_abc
    webhookSecrets: [whsec_abc]
    successUrl: https://app.example.com/billing?done=1
    cancelUrl: https://app.example.com/billing
${stripe}`;

describe('billing.stripe in gateway.yaml', () => {
  it('accepts prices that give known plans, with the defaults filled', () => {
    expect(configProblems(billing('    prices: { price_a: premium, price_b: pro }\n'))).toEqual([]);
    expect(configProblems(`plans: { limits: { team: { daily: 5 } } }\n${billing('    prices: { price_team: team }\n')}`)).toEqual([]);
  });

  it('refuses a price naming a plan nobody declared', () => {
    expect(configProblems(billing('    prices: { price_gold: gold }\n')).join('\n')).toMatch(/billing\.stripe\.prices\.price_gold: unknown plan "gold"; known: free, premium, pro/);
  });

  it('takes a meter, and refuses overage without one, a meter name Stripe would refuse, a key that is not Stripe\'s and a secret that is not whsec_', () => {
    const overage = 'plans: { limits: { premium: { monthly: { limit: 3, overage: meter } } } }\n';
    expect(configProblems(`${overage}${billing('    prices: { price_a: premium }\n    meter: api_requests\n')}`)).toEqual([]);
    expect(configProblems(`${overage}${billing('    prices: { price_a: premium }\n')}`).join('\n'))
      .toMatch(/plans\.limits\.premium\.monthly\.overage: overage: meter needs billing\.stripe\.meter/);
    expect(configProblems(`${overage}upstreams: { app: { url: http://127.0.0.1:3000 } }\n`).join('\n')).toMatch(/overage: meter needs billing\.stripe\.meter/);
    expect(configProblems(billing('    prices: { price_a: premium }\n    meter: "api requests!"\n')).join('\n')).toMatch(/billing\.stripe\.meter: .*event name/);
    expect(configProblems(billing('    prices: { price_a: premium }\n').replace('rk_test_abc', 'pk_live_abc')).join('\n')).toMatch(/billing\.stripe\.secretKey: .*restricted key/);
    expect(configProblems(billing('    prices: { price_a: premium }\n').replace('whsec_abc', 'secret')).join('\n')).toMatch(/billing\.stripe\.webhookSecrets\.0|webhookSecrets\[0\]/);
    expect(configProblems(billing('    prices: {}\n')).join('\n')).toMatch(/at least one price/);
  });
});

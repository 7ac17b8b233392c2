// Unit tests of src/webhooks/message.ts (CONTRACT §5, §24): one delivery attempt's headers, each
// secret's signature verified by the independent `standardwebhooks` implementation.
import { describe, expect, it } from 'vitest';
import { Webhook } from 'standardwebhooks';
import { deliveryHeaders, newWebhookSecret } from '../../src/webhooks/message.js';

describe('deliveryHeaders', () => {
  it('names the gateway, the message and the attempt\'s second, and signs with every secret, space-separated', () => {
    const [current, previous] = [newWebhookSecret(), newWebhookSecret()];
    const message = { id: 'msg_2Lq', body: '{"type":"user.created","timestamp":"2026-11-28T12:00:00.000Z","data":{"id":7}}' };
    const now = new Date();
    const headers = deliveryHeaders(message, [current, previous], now);
    expect(headers).toEqual({
      'content-type': 'application/json', 'user-agent': 'auth-gateway-webhooks/1', 'webhook-id': 'msg_2Lq',
      'webhook-timestamp': String(Math.floor(now.getTime() / 1000)), 'webhook-signature': expect.stringMatching(/^v1,[A-Za-z0-9+/=]{44} v1,[A-Za-z0-9+/=]{44}$/),
    });
    // Either secret alone verifies the delivery: a receiver in the middle of a rotation holds one of them.
    for (const secret of [current, previous]) expect(new Webhook(secret).verify(message.body, headers)).toEqual(JSON.parse(message.body));
    expect(() => new Webhook(newWebhookSecret()).verify(message.body, headers)).toThrow();
  });
});

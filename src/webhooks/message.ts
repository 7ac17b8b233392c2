// Alert webhooks in the Standard Webhooks format (CONTRACT §5): secrets, messages, signatures.
// Signing uses node:crypto directly: it is one HMAC, and keeping the `standardwebhooks` package
// out of production leaves the tests an independent implementation to verify against.
import { createHmac, randomBytes } from 'node:crypto';

export const SECRET_PREFIX = 'whsec_';
const SECRET_BYTES = 32; // Standard Webhooks asks for 24 to 64 bytes

export function newWebhookSecret(): string {
  return `${SECRET_PREFIX}${randomBytes(SECRET_BYTES).toString('base64')}`;
}

/** A message keeps its id across retries, so receivers can drop duplicates. */
export interface WebhookMessage {
  id: string;
  userId: number;
  type: string;
  /** the JSON body, fixed once: every attempt sends and signs the same bytes */
  body: string;
}

export function newMessage(userId: number, type: string, data: Record<string, unknown>, now: Date): WebhookMessage {
  return {
    id: `msg_${randomBytes(16).toString('base64url')}`,
    userId,
    type,
    body: JSON.stringify({ type, timestamp: now.toISOString(), data }),
  };
}

/** `v1,<base64 HMAC-SHA256(key, "{id}.{timestamp}.{body}")>`, the key being the secret's base64 part decoded. */
export function signature(secret: string, id: string, timestamp: number, body: string): string {
  const key = Buffer.from(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret, 'base64');
  return `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64')}`;
}

/**
 * The headers of one delivery attempt; the timestamp is the attempt's, so receivers' replay windows hold on retries.
 * Several secrets (operator hooks during a rotation, §24): one signature each, space-separated, as Standard Webhooks allows.
 */
export function deliveryHeaders(message: Pick<WebhookMessage, 'id' | 'body'>, secrets: readonly string[], now: Date): Record<string, string> {
  const timestamp = Math.floor(now.getTime() / 1000);
  return {
    'content-type': 'application/json',
    'user-agent': 'auth-gateway-webhooks/1',
    'webhook-id': message.id,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': secrets.map((k) => signature(k, message.id, timestamp, message.body)).join(' '),
  };
}

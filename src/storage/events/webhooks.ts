// webhooks: one alert webhook per user (UNIQUE user_id). The secret is kept as given: it must be
// read back to sign each delivery (the outbox's claim reads it, storage/events/webhookDeliveries.ts), so
// unlike keys and tokens it cannot be stored hashed.
import type { Queryable } from '../database/db.js';

/** Stores the user's webhook, replacing any earlier one in the same statement (no race leaves two). */
export async function upsertWebhook(db: Queryable, userId: number, url: string, secret: string): Promise<void> {
  await db.query(
    `INSERT INTO webhooks (user_id, url, secret) VALUES ($1, $2, $3)
     ON CONFLICT (user_id) DO UPDATE SET url = EXCLUDED.url, secret = EXCLUDED.secret, created_at = now()`,
    [userId, url, secret],
  );
}

/** Removes the user's webhook; false when there was none. */
export async function deleteWebhook(db: Queryable, userId: number): Promise<boolean> {
  return (await db.query('DELETE FROM webhooks WHERE user_id = $1 RETURNING id', [userId])).length === 1;
}

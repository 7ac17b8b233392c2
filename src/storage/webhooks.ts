// webhooks: one alert webhook per user (UNIQUE user_id). The secret is kept as given: it must be
// read back to sign each delivery, so unlike keys and tokens it cannot be stored hashed.
import type { Plan } from '../config/schema.js';
import type { Queryable } from './db.js';

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

export interface DeliveryTarget {
  url: string;
  secret: string;
  plan: Plan;
  is_active: number;
}

/** The user's webhook with the owner's current plan and active flag, read at each delivery attempt. */
export async function findDeliveryTarget(db: Queryable, userId: number): Promise<DeliveryTarget | undefined> {
  return (await db.query<DeliveryTarget>(
    `SELECT w.url, w.secret, u.plan, u.is_active FROM webhooks w JOIN users u ON u.id = w.user_id WHERE w.user_id = $1`,
    [userId],
  ))[0];
}

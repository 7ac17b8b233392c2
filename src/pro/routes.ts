// /api/v1/user/*: the signed-in user's own resources (CONTRACT §4).
import type { FastifyInstance } from 'fastify';
import { currentUser, requireUser } from '../guards/requireUser.js';
import type { Services } from '../services.js';
import { findById } from '../storage/users.js';

export async function userRoutes(app: FastifyInstance, opts: { services: Services }): Promise<void> {
  const { services } = opts;

  app.get('/me', { preHandler: requireUser(services) }, async (request) => {
    // Read from the database, not the cache: daily_usage changes on every counted use.
    const user = (await findById(services.db, currentUser(request).id)) ?? currentUser(request);
    return { user_id: user.id, email: user.email, plan: user.plan, daily_usage: user.daily_usage, last_usage_date: user.last_usage_date };
  });
}

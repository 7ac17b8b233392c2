// The account events (CONTRACT §13 and §5): auth.password_changed and auth.session_revoked, sent to
// a pro user's webhook in the Standard Webhooks format, verified with the standardwebhooks package.
// On a database of its own: on the run's shared one, any test gateway may claim (or, killed, hold)
// these messages, and the first attempt this file waits for would wait out that instance's lease.
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { sha256Hex } from '../../src/credentials/digest.js';
import {
  bearer, closeSql, describeWithServices, makeUser, newPassword, startTestGateway, testConfig, throwawayDatabase, type TestGateway, type TestUser, type ThrowawayDatabase,
} from '../helpers/gateway.js';
import { mailSettings, startSmtpCatcher, type SmtpCatcher } from '../helpers/smtp.js';
import { settledRows, startReceiver, type Delivery, type Receiver } from '../helpers/webhookReceiver.js';

describeWithServices('account webhook events', () => {
  let receiver: Receiver;
  let smtp: SmtpCatcher;
  let gw: TestGateway;
  let db: ThrowawayDatabase;

  beforeAll(async () => {
    [receiver, smtp, db] = await Promise.all([startReceiver(), startSmtpCatcher(), throwawayDatabase({ migrated: true })]);
    gw = await startTestGateway(testConfig({ mail: mailSettings(smtp), storage: db.storage }));
  });
  afterAll(async () => {
    await gw?.close();
    await receiver?.close();
    await smtp?.close();
    await db?.drop();
    await closeSql();
  });

  /** A pro user with a webhook to the receiver (on its own path); returns the user, its secret and its deliveries. */
  async function proWithWebhook(): Promise<{ user: TestUser; secret: string; deliveries: () => Delivery[] }> {
    const user = await makeUser(gw, { plan: 'pro' });
    const path = `/hook/${user.id}`;
    const res = await gw.post('/api/v1/user/webhook', { url: `${receiver.url.replace('/hook', path)}` }, { headers: bearer(user.access) });
    expect(res.status).toBe(201);
    return { user, secret: res.json.secret, deliveries: () => receiver.deliveries.filter((d) => d.path === path) };
  }

  async function event(deliveries: () => Delivery[], secret: string, type: string) {
    await expect.poll(() => deliveries().filter((d) => d.json.type === type).length).toBeGreaterThan(0);
    const [delivery] = deliveries().filter((d) => d.json.type === type);
    // Signed as Standard Webhooks say, with the user's secret.
    return new Webhook(secret).verify(delivery!.body, {
      'webhook-id': String(delivery!.headers['webhook-id']),
      'webhook-timestamp': String(delivery!.headers['webhook-timestamp']),
      'webhook-signature': String(delivery!.headers['webhook-signature']),
    }) as { type: string; timestamp: string; data: Record<string, unknown> };
  }

  it('auth.password_changed on a change, with the number of other sessions ended', async () => {
    const { user, secret, deliveries } = await proWithWebhook();
    await gw.post('/api/v1/auth/login', { email: user.email, password: user.password });
    await gw.post('/api/v1/auth/login', { email: user.email, password: user.password });
    const res = await gw.post('/api/v1/auth/password/change', { current_password: user.password, new_password: newPassword() }, { headers: bearer(user.access) });
    expect(res.status).toBe(200);
    const payload = await event(deliveries, secret, 'auth.password_changed');
    expect(payload).toEqual({ type: 'auth.password_changed', timestamp: expect.any(String), data: { method: 'change', revoked_sessions: 2 } });
  });

  it('auth.password_changed on a reset, with every session ended', async () => {
    const { user, secret, deliveries } = await proWithWebhook();
    await gw.post('/api/v1/auth/password/forgot', { email: user.email });
    const mail = await smtp.waitFor(user.email, 2);
    expect((await gw.post('/api/v1/auth/password/reset', { token: mail.token, new_password: newPassword() })).status).toBe(200);
    const payload = await event(deliveries, secret, 'auth.password_changed');
    expect(payload.data).toEqual({ method: 'reset', revoked_sessions: 1 });
  });

  it('auth.session_revoked when the user ends a session, once', async () => {
    const { user, secret, deliveries } = await proWithWebhook();
    const sessionOf = async (refreshToken: string) =>
      Number((await db.sql<{ session_id: string }>('SELECT session_id FROM refresh_tokens WHERE token_hash = $1', [sha256Hex(refreshToken)]))[0]!.session_id);
    const end = (id: number) => gw.request('DELETE', `/api/v1/user/sessions/${id}`, { headers: bearer(user.access) });
    const other = await gw.post('/api/v1/auth/login', { email: user.email, password: user.password });
    const id = await sessionOf(other.json.refresh_token);
    expect((await end(id)).status).toBe(200);
    const payload = await event(deliveries, secret, 'auth.session_revoked');
    expect(payload.data).toEqual({ session_id: id, current: false });
    // Ending it again ends nothing: no event. The current session's end, after it, is the marker.
    expect((await end(id)).status).toBe(200);
    const current = await sessionOf(user.refresh);
    expect((await end(current)).status).toBe(200);
    await expect.poll(() => deliveries().filter((d) => d.json.type === 'auth.session_revoked').length).toBe(2);
    expect(deliveries().filter((d) => d.json.type === 'auth.session_revoked').map((d) => d.json.data)).toEqual([{ session_id: id, current: false }, { session_id: current, current: true }]);
  });

  it('nothing for users below pro (the delivery checks the plan)', async () => {
    const { user, deliveries } = await proWithWebhook();
    await db.sql("UPDATE users SET plan = 'premium' WHERE id = $1", [user.id]);
    const res = await gw.post('/api/v1/auth/password/change', { current_password: user.password, new_password: newPassword() }, { headers: bearer(user.access) });
    expect(res.status).toBe(200);
    // Read in the outbox, not in this instance's metrics: every test gateway's worker shares the
    // database, so another file's may be the one that settles the message.
    const settled = (await settledRows(user.id, db.sql)).filter((r) => r.type === 'auth.password_changed');
    expect(settled.map((r) => r.status)).toEqual(['skipped']);
    expect(deliveries().filter((d) => d.json.type === 'auth.password_changed')).toEqual([]);
  });
});

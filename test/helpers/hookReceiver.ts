// Operator hooks (CONTRACT §24) under test: gateways on a database of their own (no other test
// file's instance, configured without hooks:, may claim a hook message), an admin listener on
// the first one, and an HTTPS receiver on loopback (the run's webhook certificate, trusted through
// webhooks.caFile; hooks: refuses plain http as §5 does). Signatures are checked with the
// independent `standardwebhooks` package, as an operator's backend would.
import { randomBytes } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { Webhook } from 'standardwebhooks';
import { buildAdminApp } from '../../src/admin/app.js';
import { ADMIN_KEY, bearer, startTestGateway, testConfig, throwawayDatabase, type TestGateway, type ThrowawayDatabase } from './gateway.js';
import { request } from './http.js';
import { mailSettings, startSmtpCatcher, type SmtpCatcher } from './smtp.js';
import type { LookupAll } from '../../src/webhooks/ssrf.js';
import { receiverCertificate, startReceiver, type Behaviour, type Delivery, type Receiver } from './webhookReceiver.js';

export const newHookSecret = () => `whsec_${randomBytes(32).toString('base64')}`;

export interface HookSetup {
  db: ThrowawayDatabase;
  gateways: TestGateway[];
  receiver: Receiver;
  secrets: string[];
  admin(method: string, path: string, json?: unknown): ReturnType<typeof request>;
  close(): Promise<void>;
}

export interface HookOptions {
  instances?: number;
  behaviour?: Behaviour;
  /** hooks: overrides (url is the receiver's unless given) */
  hooks?: Record<string, unknown>;
  webhooks?: Record<string, unknown>;
  /** other settings (organizations, mail) */
  config?: Record<string, unknown>;
  /**
   * organizations enabled, with the mail they need (to an SMTP catcher of the set-up's own, closed
   * with it); 'sso': with organizations.sso too (CONTRACT §31: domains, SAML and SCIM are the gateway's only then)
   */
  organizations?: true | 'sso';
  /** the receiver's URL names this host instead of 127.0.0.1 (resolved through `lookup`) */
  host?: string;
  lookup?: LookupAll;
}

export async function startHookSetup(options: HookOptions = {}): Promise<HookSetup> {
  const db = await throwawayDatabase({ migrated: true });
  const receiver = await startReceiver(receiverCertificate(), options.behaviour);
  const secrets = [newHookSecret()];
  const gateways: TestGateway[] = [];
  let adminApp: FastifyInstance | undefined;
  let smtp: SmtpCatcher | undefined;
  const close = async () => {
    await adminApp?.close();
    await Promise.all(gateways.map((gw) => gw.close()));
    await receiver.close();
    await smtp?.close();
    await db.drop();
  };
  try {
    if (options.organizations) {
      smtp = await startSmtpCatcher();
      const mail = { ...mailSettings(smtp), invitationUrl: 'https://a.example/j?token={token}' };
      const organizations = options.organizations === 'sso' ? { enabled: true, sso: {} } : { enabled: true };
      options = { ...options, config: { organizations, mail, ...options.config } };
    }
    const url = options.host ? receiver.url.replace('127.0.0.1', options.host) : receiver.url;
    const hooks = { url, secrets, allowPrivateNetworks: true, ...options.hooks };
    for (let i = 0; i < (options.instances ?? 1); i++) {
      const config = testConfig({ ...options.config, storage: db.storage, webhooks: { retries: 3, timeout: '3s', ...options.webhooks }, hooks });
      gateways.push(await startTestGateway(config, { webhookLookup: options.lookup }));
    }
    adminApp = await buildAdminApp(gateways[0]!.services);
    const adminUrl = await adminApp.listen({ host: '127.0.0.1', port: 0 });
    return {
      db, gateways, receiver, secrets: hooks.secrets as string[], close,
      admin: (method, path, json) => request(adminUrl, method, path, { headers: bearer(ADMIN_KEY), json }),
    };
  } catch (err) {
    await close();
    throw err;
  }
}

/** Verifies a delivery with `secret`, as the operator's backend does; returns the payload. */
export function verifiedHook(secret: string, d: Delivery): { type: string; timestamp: string; data: Record<string, unknown> } {
  return new Webhook(secret).verify(d.body, {
    'webhook-id': String(d.headers['webhook-id']),
    'webhook-timestamp': String(d.headers['webhook-timestamp']),
    'webhook-signature': String(d.headers['webhook-signature']),
  }) as never;
}

/** The hook messages in the outbox, oldest first. */
export async function hookRows(db: ThrowawayDatabase): Promise<Array<{ id: string; subject: string; type: string; status: string; attempts: number; last_error: string | null }>> {
  return db.sql('SELECT id, subject, type, status, attempts, last_error FROM webhook_deliveries WHERE subject IS NOT NULL ORDER BY seq');
}

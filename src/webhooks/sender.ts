// Sending one webhook attempt (CONTRACT §5): the target is checked against SSRF (ssrf.ts) when the
// attempt starts, and the POST connects to the very address that was checked, signed as Standard
// Webhooks (message.ts). What the attempt came to is data for the outbox worker (outbox.ts), which
// decides about retries; nothing here touches the database.
import http from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import { readFileSync } from 'node:fs';
import { rootCertificates } from 'node:tls';
import type { Logger } from 'pino';
import type { Config } from '../config/schema.js';
import type { ClaimedDelivery } from '../storage/events/index.js';
import { isLoopbackAddress } from '../http.js';
import { bareHost, checkTarget, parseWebhookUrl, type LookupAll, type ResolvedAddress } from './ssrf.js';
import type { Tracing } from '../telemetry/tracing.js';
import { deliveryHeaders } from './message.js';
import type { HooksConfig } from '../config/schema/hooks.js';

interface Target {
  url: string;
  secrets: readonly string[];
  allowPrivateNetworks: boolean;
  /** hooks.url may be plain http to a loopback receiver (CONTRACT §28); a user's webhook never. */
  loopbackHttp: boolean;
}

/** What one attempt came to; also the `outcome` label of gateway_webhook_deliveries_total. */
export type AttemptOutcome =
  | 'success' // 2xx
  | 'server_error' // 5xx or 429: retried
  | 'rejected' // any other status, redirects included (never followed): not retried
  | 'timeout' // no answer within webhooks.timeout: retried
  | 'network_error' // refused, reset, TLS failure, DNS failure: retried
  | 'blocked' // the target is (now) a non-public address: not retried
  | 'skipped'; // no webhook, or its owner is not an active pro user: nothing to send

export interface AttemptResult {
  outcome: AttemptOutcome;
  /** what went wrong, for the admin listing's last_error (never a secret) */
  error?: string;
}


type PostResult = { kind: 'status'; status: number } | { kind: 'timeout' } | { kind: 'network'; code: string } | { kind: 'aborted' };

export const describeError = (err: unknown) => String((err as { code?: unknown } | null)?.code ?? (err as Error | null)?.message ?? err);


export interface SenderDeps {
  config: Config['webhooks'];
  log: Logger;
  /** Sockets open at once (the outbox worker's concurrency). */
  maxSockets: number;
  /** Test seam: how webhook hosts are resolved (DNS rebinding, a resolver that never answers); the system's by default. */
  lookup?: LookupAll;
  /** With tracing: each attempt is a client span in the trace of the request that caused the message. */
  tracing?: Tracing;
  /** Where operator hooks go (CONTRACT §24), read at each attempt; without it, hook messages are skipped. */
  hooks?: () => HooksConfig | undefined;
}

export class WebhookSender {
  private readonly agent: https.Agent;
  private readonly loopbackAgent: http.Agent;
  private readonly config: Config['webhooks'];
  private readonly log: Logger;
  private readonly lookup: LookupAll | undefined;
  private readonly tracing: Tracing | undefined;
  private readonly hooks: () => HooksConfig | undefined;

  constructor(deps: SenderDeps) {
    this.hooks = deps.hooks ?? (() => undefined);
    this.config = deps.config;
    this.log = deps.log;
    this.lookup = deps.lookup;
    this.tracing = deps.tracing;
    // webhooks.caFile is trusted in addition to the public roots, never instead of them.
    const ca = deps.config.caFile ? [...rootCertificates, readCa(deps.config.caFile)] : undefined;
    // No keep-alive: every attempt opens its own connection to the address it has just checked.
    this.agent = new https.Agent({ keepAlive: false, maxSockets: deps.maxSockets, ...(ca ? { ca } : {}) });
    this.loopbackAgent = new http.Agent({ keepAlive: false, maxSockets: deps.maxSockets });
  }

  close(): void {
    this.agent.destroy();
    this.loopbackAgent.destroy();
  }

  /** Where a message goes and what signs it: a user's webhook, or hooks.url for an operator hook (§24). */
  private targetOf(job: ClaimedDelivery): Target | AttemptResult {
    if (job.subject !== null) {
      // The configuration of now, not of when the message was written: a URL or secret changed by SIGHUP applies to the next attempt.
      const hooks = this.hooks();
      if (!hooks) return { outcome: 'skipped', error: 'hooks: is not configured' };
      return { url: hooks.url, secrets: hooks.secrets, allowPrivateNetworks: hooks.allowPrivateNetworks, loopbackHttp: hooks.allowPrivateNetworks };
    }
    // Read by the claim, at the start of this attempt: a webhook deleted, or a plan lost, since the
    // event stops delivery.
    if (!job.url || !job.secret || job.plan !== 'pro' || job.is_active !== 1) return { outcome: 'skipped', error: 'no webhook, or its owner is not an active pro user' };
    return { url: job.url, secrets: [job.secret], allowPrivateNetworks: this.config.allowPrivateNetworks, loopbackHttp: false };
  }

  async attempt(job: ClaimedDelivery, signal: AbortSignal): Promise<AttemptResult> {
    const message = { id: job.id, body: job.body };
    const target = this.targetOf(job);
    if ('outcome' in target) return target;
    const url = parseWebhookUrl(target.url, { loopbackHttp: target.loopbackHttp });
    if (!url) return { outcome: 'blocked', error: 'the webhook URL is not a valid https URL' };
    const check = await checkTarget(url, { allowPrivateNetworks: target.allowPrivateNetworks, timeoutMs: this.config.timeout, lookup: this.lookup });
    if (check.kind === 'forbidden') {
      this.log.warn({ userId: job.user_id, subject: job.subject, host: url.host }, 'webhook target resolves to a non-public address: refused');
      return { outcome: 'blocked', error: `blocked: ${check.address} is not a public address` };
    }
    if (check.kind === 'unresolved') return { outcome: 'network_error', error: `DNS: ${describeError(check.error)}` };
    // Cleartext only to this machine: a name like localhost. must not resolve anywhere else.
    if (url.protocol === 'http:' && !isLoopbackAddress(check.target.address)) return { outcome: 'blocked', error: `blocked: plain http to ${check.target.address}, which is not loopback` };
    if (signal.aborted) return { outcome: 'network_error', error: 'aborted' };
    // The attempt's real time, not the gateway's clock: receivers hold it against their own clock
    // (their replay window).
    const headers = deliveryHeaders(message, target.secrets, new Date());
    const traced = this.tracing?.client('POST webhook', {
      'http.request.method': 'POST', 'server.address': bareHost(url), 'server.port': Number(url.port || (url.protocol === 'http:' ? 80 : 443)),
      'gateway.webhook.type': job.type, 'gateway.webhook.attempt': job.attempts,
    }, job.traceparent);
    if (traced) traced.inject(headers);
    // Not traced here (tracing off on this instance, or paused): the receiver still joins the
    // trace of the request, as a proxy that does not trace passes traceparent on.
    else if (job.traceparent) headers.traceparent = job.traceparent;
    const result = await this.post(url, check.target, headers, message.body, signal);
    if (traced) {
      if (result.kind === 'status') traced.span.setAttribute('http.response.status_code', result.status);
      if (result.kind !== 'status' || result.status >= 400) traced.span.setAttribute('error.type', result.kind === 'status' ? String(result.status) : result.kind).setStatus({ code: 2 /* ERROR */ });
      traced.span.end();
    }
    switch (result.kind) {
      case 'status':
        if (result.status >= 200 && result.status < 300) return { outcome: 'success' };
        return { outcome: result.status >= 500 || result.status === 429 ? 'server_error' : 'rejected', error: `HTTP ${result.status}` };
      case 'timeout':
        return { outcome: 'timeout', error: `no answer within ${this.config.timeout} ms` };
      case 'network':
        return { outcome: 'network_error', error: result.code };
      case 'aborted':
        return { outcome: 'network_error', error: 'aborted' };
    }
  }

  private post(url: URL, target: ResolvedAddress, headers: Record<string, string>, body: string, signal: AbortSignal): Promise<PostResult> {
    // The first outcome settles the promise; a later one (the error that follows a timeout's
    // destroy, say) changes nothing.
    return new Promise((finish: (result: PostResult) => void) => {
      // The connection goes to the address checkTarget() just approved, whatever DNS says now:
      // a second lookup is exactly what a rebinding attack needs. The certificate is still
      // checked against the URL's host name (and SNI sent for it), since `host` stays the name.
      const pinned: LookupFunction = (_hostname, options, callback) => {
        if (options?.all) callback(null, [{ address: target.address, family: target.family }]);
        else callback(null, target.address, target.family);
      };
      const plain = url.protocol === 'http:';
      const req = (plain ? http : https).request({
        method: 'POST',
        host: bareHost(url),
        port: url.port || (plain ? 80 : 443),
        path: `${url.pathname}${url.search}`,
        headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) },
        agent: plain ? this.loopbackAgent : this.agent,
        lookup: pinned,
      }, (res) => {
        finish({ kind: 'status', status: res.statusCode ?? 0 });
        // The answer's body is not used; read it away (the timer below still bounds it).
        res.resume();
      });
      const timer = setTimeout(() => {
        finish({ kind: 'timeout' });
        req.destroy();
      }, this.config.timeout);
      const abort = () => {
        finish({ kind: 'aborted' });
        req.destroy();
      };
      signal.addEventListener('abort', abort);
      req.on('close', () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', abort);
      });
      req.on('error', (err: NodeJS.ErrnoException) => finish({ kind: 'network', code: err.code ?? 'ERROR' }));
      req.end(body);
    });
  }

}

function readCa(file: string): Buffer {
  try {
    return readFileSync(file);
  } catch (err) {
    throw new Error(`webhooks.caFile: cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`, { cause: err });
  }
}

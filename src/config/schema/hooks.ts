// hooks (CONTRACT §24): events for the operator's own backend, one URL for the whole gateway,
// signed per Standard Webhooks with every secret listed (two during a rotation). Not the
// per-user alert webhooks of §5, though they share their outbox, timeout, retries and URL rules.
import { z } from 'zod';
import { parseWebhookUrl } from '../../http.js';
import { bool } from './values.js';

/** Every event the gateway sends to hooks.url, in the order docs/hooks.md lists them. */
export const HOOK_EVENTS = [
  'user.created', 'user.email_verified', 'user.deleted', 'user.plan_changed', 'user.active_changed',
  'org.created', 'org.member_added', 'org.member_removed', 'org.plan_changed',
  'api_key.created', 'api_key.revoked', 'billing.plan_changed',
  // CONTRACT §31.
  'org.role_changed', 'org.domain_verified', 'org.domain_unverified',
] as const;
export type HookEventType = (typeof HOOK_EVENTS)[number];

// Standard Webhooks: whsec_ then the base64 of random bytes; the spec suggests 24 to 64. 16 (128
// bits, HMAC-SHA256's floor) is accepted too: secrets made by other tools for an existing receiver
// (20 bytes is common) keep working, and anything shorter is refused as guessable.
const HOOK_SECRET = /^whsec_[A-Za-z0-9+/]{22,88}={0,2}$/;
const SECRET_MESSAGE = 'expected a signing secret whsec_<base64 of 16 to 64 bytes> (e.g. `echo whsec_$(openssl rand -base64 32)`)';

export const hooksSchema = z.strictObject({
  url: z.string().refine((u) => parseWebhookUrl(u, { loopbackHttp: true }) !== undefined,
    'expected an https:// URL (the operator\'s backend receiving the events), or http:// to a loopback address with allowPrivateNetworks: true')
    .meta({ examples: ['https://backend.example.com/gateway-events'] }),
  secrets: z.array(z.string().regex(HOOK_SECRET, SECRET_MESSAGE)).min(1).max(2)
    .meta({
      examples: [['${GATEWAY_HOOKS_SECRET}']],
      description: 'Signing secrets (whsec_…); the first is the new one. During a rotation list both: each signs (webhook-signature: "v1,<new> v1,<old>").',
    }),
  allowPrivateNetworks: bool().prefault(false)
    .meta({ description: 'true: the URL may be (or resolve to) a loopback or private address; false: refused at delivery, as for webhooks (§5).' }),
  events: z.array(z.enum(HOOK_EVENTS)).min(1).default([...HOOK_EVENTS])
    .meta({ description: 'The events sent; default: all of them.' }),
}).refine((hooks) => parseWebhookUrl(hooks.url, { loopbackHttp: true })?.protocol !== 'http:' || hooks.allowPrivateNetworks, {
  path: ['url'],
  message: 'an http:// URL is accepted only to a loopback receiver with allowPrivateNetworks: true (local development); use https:// otherwise',
}).meta({ description: 'Events for the operator\'s backend (docs/hooks.md): sign-ups, verifications, plan changes, deletions, keys. Without it, none are sent.' });

export type HooksConfig = z.output<typeof hooksSchema>;

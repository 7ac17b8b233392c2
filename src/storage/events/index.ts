// storage/events/'s one door (issue 73): nothing outside storage/ imports past it. Each file of the
// floor is exported by name and as a namespace (`users.findById`); a new file gets its two lines here.
// What is recorded and sent: the audit log, the webhooks and their deliveries (the outbox).
export * from './audit.js';
export * as audit from './audit.js';
export * from './webhooks.js';
export * as webhooks from './webhooks.js';
export * from './webhookDeliveries.js';
export * as webhookDeliveries from './webhookDeliveries.js';

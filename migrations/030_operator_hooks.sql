-- Events for the operator's backend (CONTRACT §24, hooks:) go through the webhook outbox (010):
-- same claim, lease, retries and webhook-id across attempts. A hook message has no user's webhook
-- behind it: user_id is NULL (a user.deleted must outlive the user's row, which the foreign key
-- would cascade), and `subject` names what its order is kept for ('user:<id>', 'org:<id>'): a
-- subject's next message is claimed only once the one before it is delivered or given up, in
-- `seq` order (created_at is the transaction's start, the same for two events of one change).
-- Rolling upgrade: the previous release's worker would claim a hook row and mark it skipped (it
-- finds no webhook for a NULL user): turn hooks: on once every instance runs this release.
ALTER TABLE webhook_deliveries ALTER COLUMN user_id DROP NOT NULL;
ALTER TABLE webhook_deliveries ADD COLUMN subject text;
ALTER TABLE webhook_deliveries ADD COLUMN seq bigserial;

-- The claim's "is an earlier message of this subject still pending?": pending hook rows only.
CREATE INDEX webhook_deliveries_subject ON webhook_deliveries (subject, seq) WHERE status = 'pending' AND subject IS NOT NULL;

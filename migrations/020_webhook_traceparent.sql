-- The W3C traceparent of the request that caused a webhook message (CONTRACT §17), when it was
-- traced: every delivery attempt, on whichever instance, continues that trace and hands it to the
-- receiver. NULL: the message came from no traced request.
ALTER TABLE webhook_deliveries ADD COLUMN traceparent text;

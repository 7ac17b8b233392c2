// pino with redaction: credentials never reach the logs, whatever a handler logs by mistake.
import { pino, type DestinationStream, type Logger } from 'pino';

export const REDACT_PATHS = [
  'req.headers.authorization', 'req.headers["x-api-key"]', 'req.headers.cookie', 'res.headers["set-cookie"]',
  'headers.authorization', 'headers["x-api-key"]', 'headers.cookie',
  '*.password', '*.password_hash', '*.refresh_token', '*.access_token', '*.api_token', '*.secret', '*.token',
  'password', 'refresh_token', 'access_token', 'api_token', 'secret', 'token',
];

export function createLogger(level = 'info', destination?: DestinationStream): Logger {
  return pino({ level, redact: { paths: REDACT_PATHS, censor: '[redacted]' } }, destination);
}

// The CLI's one way to a running gateway's admin API (--admin URL, CONTRACT §18): the admin key
// from the configuration (or an operator's token), a 10 s limit, and a CommandError that says what
// went wrong when the gateway cannot be reached. The audit log names what authenticated (CONTRACT
// §33): `admin` for the shared key, or the operator whose token it was; `cli` is only the CLI on
// direct storage.
import type { Config } from '../config/schema.js';
import { CommandError } from './command.js';

export interface AdminAnswer {
  status: number;
  json: Record<string, unknown>;
}

/**
 * The credential --admin sends: an operator's personal token in GATEWAY_OPERATOR_TOKEN (the audit
 * log then names that operator, CONTRACT §24), else the shared key; a CommandError with neither.
 */
export function adminKeyFor(config: Config, env: NodeJS.ProcessEnv = process.env): string {
  if (env.GATEWAY_OPERATOR_TOKEN) return env.GATEWAY_OPERATOR_TOKEN;
  if (!config.admin.apiKey) throw new CommandError('--admin needs admin.apiKey (GATEWAY_ADMIN_KEY) in the configuration, or an operator\'s token in GATEWAY_OPERATOR_TOKEN');
  return config.admin.apiKey;
}

/** A body of JSON lines (the imports), sent as it is; the limit of a call that writes thousands of rows. */
export interface JsonLines {
  lines: string;
  timeoutMs: number;
}

/** One admin API call; the answer's status and JSON body (an empty object when it has none). */
export async function callAdmin(base: string, key: string, method: string, path: string, body?: unknown): Promise<AdminAnswer> {
  const lines = body instanceof Object && 'lines' in body ? (body as JsonLines) : undefined;
  const type: Record<string, string> = body === undefined ? {} : { 'content-type': lines ? 'application/x-ndjson' : 'application/json' };
  let res: Response;
  try {
    res = await fetch(new URL(path, base), {
      method, headers: { authorization: `Bearer ${key}`, ...type },
      body: lines ? lines.lines : body === undefined ? undefined : JSON.stringify(body), signal: AbortSignal.timeout(lines?.timeoutMs ?? 10_000),
    });
  } catch (err) {
    throw new CommandError(`cannot reach the admin API at ${base}: ${(err as Error & { cause?: { code?: string } }).cause?.code ?? (err as Error).message}`);
  }
  const json = (await res.json().catch(() => ({}))) as Record<string, unknown>;
  return { status: res.status, json };
}

// The Lua scripts the limiters run in Redis, and the key scans they need: each script names one
// key (cluster-safe), and a scan visits every master node (a SCAN sees one node's keys).
import { masterNodes } from './client.js';
import { BACKGROUND_TIMEOUT_MS, type RedisBreaker } from './breaker.js';

// INCR and set the expiry in one step, so a crash between the two cannot leave an immortal key.
export const INCR_WITH_TTL = `local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return n`;

/**
 * Hands `drop` each batch of the keys matching `pattern` (a SCAN glob, written without the key
 * prefix, as the keys are), on every master node, and adds up what it dropped.
 */
export async function eachKeyBatch(redis: RedisBreaker, pattern: string, drop: (keys: string[]) => Promise<number>): Promise<number> {
  const prefix = redis.client.options.keyPrefix ?? '';
  const prefixed = `${escapeGlob(prefix)}${pattern}`;
  let dropped = 0;
  for (const node of masterNodes(redis.client)) {
    let cursor = '0';
    do {
      // SCAN does not apply ioredis' keyPrefix; DEL does, so strip it from what SCAN returns.
      const page = await redis.call(() => node.scan(cursor, 'MATCH', prefixed, 'COUNT', 1000), BACKGROUND_TIMEOUT_MS);
      if (!page) throw new Error('Redis did not answer a SCAN');
      const [next, keys] = page;
      cursor = next;
      if (keys.length) dropped += await drop(keys.map((k) => k.slice(prefix.length)));
    } while (cursor !== '0');
  }
  return dropped;
}

/** Drops the keys one by one (several at once would be refused across Cluster slots); how many went. */
export async function dropKeys(redis: RedisBreaker, keys: string[]): Promise<number> {
  const answers = await Promise.all(keys.map((key) => redis.call((client) => client.del(key), BACKGROUND_TIMEOUT_MS)));
  if (answers.includes(undefined)) throw new Error('Redis did not answer a DEL');
  return answers.reduce<number>((sum, n) => sum + (n ?? 0), 0);
}

function escapeGlob(text: string): string {
  return text.replace(/[*?[\]\\]/g, '\\$&');
}

// INCR and (re)arm the expiry in one step: a key can never be left without one.
export const INCR_WITH_WINDOW = `local n = redis.call('INCR', KEYS[1])
local ttl = redis.call('PTTL', KEYS[1])
if n == 1 or ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  ttl = tonumber(ARGV[1])
end
return {n, ttl}`;

// The per-minute bucket of pipeline/guards/minuteLimit.ts (GCRA, with leases of at most 1/leaseShare of what
// it holds). KEYS[1]: the user's bucket (its theoretical arrival time, ms). ARGV[1]: ms between two requests
// at the sustained rate, fractional unless perMinute divides 60,000 (PX takes whole ms only, and
// at least 1: past about 100 million a minute the interval is below a double's precision at
// today's epoch ms, so the time does not move at all and such a limit admits everything).
// ARGV[2]: requests handed back (an expired lease's rest), ARGV[3]: requests wanted.
// Answers { requests taken (0: refused), ms until the bucket is full again, ms to wait }.
export function minuteBucketScript(windowMs: number, leaseShare: number): string {
  return `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local interval = tonumber(ARGV[1])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0') - tonumber(ARGV[2]) * interval
if tat < now then tat = now end
local available = math.floor((${windowMs} - (tat - now)) / interval)
if available < 1 then
  if tonumber(ARGV[2]) > 0 then redis.call('SET', KEYS[1], tat, 'PX', math.max(1, math.ceil(tat - now))) end
  return {0, tat - now, tat + interval - ${windowMs} - now}
end
local taken = math.max(1, math.min(tonumber(ARGV[3]), math.floor(available / ${leaseShare})))
local next = tat + taken * interval
redis.call('SET', KEYS[1], next, 'PX', math.max(1, math.ceil(next - now)))
return {taken, next - now, 0}`;;
}

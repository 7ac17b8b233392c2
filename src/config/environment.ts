// What the environment sets over gateway.yaml (CONTRACT §1, §25, §28): PORT, HOST, ADMIN_*,
// DECISIONS_*, METRICS_*, REDIS_KEY_PREFIX, applied to the parsed file before validation (config/load.ts).
type Env = Record<string, string | undefined>;

/** What the environment sets over the file (CONTRACT §1, §25): a variable's name, where it goes, and whether it is a port. */
const ENV_OVERRIDES = [
  ['PORT', 'server', 'port'], ['HOST', 'server', 'host'],
  ['ADMIN_PORT', 'admin', 'port'], ['ADMIN_HOST', 'admin', 'host'],
  ['DECISIONS_PORT', 'decisions', 'port'], ['DECISIONS_HOST', 'decisions', 'host'],
  ['METRICS_PORT', 'metrics', 'port'], ['METRICS_HOST', 'metrics', 'host'], ['METRICS_TOKEN', 'metrics', 'token'],
  ['REDIS_KEY_PREFIX', 'storage', 'redisKeyPrefix'],
] as const;

/**
 * The file's values with the environment's overrides, before validation: the checks between
 * settings see what the gateway will run with (DECISIONS_PORT may open the listener a
 * decision-only route needs). An empty variable (an unset compose one) leaves the file's value.
 */
export function withEnvironment(raw: unknown, env: Env): { raw: unknown; problems: string[] } {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return { raw, problems: [] };
  const problems: string[] = [];
  const doc = raw as Record<string, unknown>;
  for (const [name, section, key] of ENV_OVERRIDES) {
    const text = env[name];
    if (!text) continue;
    const value = key === 'port' ? portOf(text) : text;
    if (value === undefined) {
      problems.push(`${name}: expected a port number, got ${JSON.stringify(text)}`);
      continue;
    }
    // A section that is not a map is left for the schema to refuse.
    if (doc[section] == null) doc[section] = { [key]: value };
    else if (sectionOf(doc, section)) (doc[section] as Record<string, unknown>)[key] = value;
  }
  return { raw: doc, problems };
}

/** A top-level section of the parsed file when it is a map. */
export function sectionOf(raw: unknown, section: string): Record<string, unknown> | undefined {
  const value = (raw as Record<string, unknown> | null)?.[section];
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
}

/** A port number from its text, or undefined. */
function portOf(text: string): number | undefined {
  const n = Number(text);
  return Number.isInteger(n) && n >= 0 && n <= 65535 ? n : undefined;
}

// Whose counters a use is counted on (CONTRACT §22): a user's, on the users row (003, 027), or an
// organization's pooled one, on the organizations row (035), with the same columns so that one
// statement of dailyUsage.ts serves both. The names below are the only SQL identifiers the counting
// statements take from outside their text: fixed here, never from a request.

/** Where a request's uses are counted: a user's counters, or an organization's pooled ones. */
export interface Counter {
  ownerType: 'user' | 'org';
  id: number;
}

/** Each owner type's row of counters, its column in metered_uses, and its table of refunds per day. */
export const COUNTER_SQL = {
  user: { table: 'users', owner: 'user_id', refunds: 'usage_refunds' },
  org: { table: 'organizations', owner: 'org_id', refunds: 'org_usage_refunds' },
} as const;

/** A counter's key in memory and in Redis: the user's id as before organizations, `o<id>` for an organization. */
export function counterKey(c: Counter): string {
  return c.ownerType === 'org' ? `o${c.id}` : String(c.id);
}

/** The counter a key names (counterKey's inverse); undefined for a key that names none. */
export function counterOfKey(key: string): Counter | undefined {
  const org = key.startsWith('o');
  const id = Number(org ? key.slice(1) : key);
  return Number.isSafeInteger(id) && key !== '' && key !== 'o' ? { ownerType: org ? 'org' : 'user', id } : undefined;
}

// The TXT look-up that proves a domain (CONTRACT §31), through organizations.sso.dns.resolvers (the
// system's when empty). What it answers tells the re-check apart: the name or the record is gone
// (NXDOMAIN, no TXT: a miss), or the resolver failed (a timeout, SERVFAIL, refused: no miss, since
// an outage of the resolver says nothing about who holds the domain).
import { Resolver } from 'node:dns/promises';

/** A name or its TXT records gone (NXDOMAIN, NODATA) is no records: a miss, as a record with another value is. */
export type TxtAnswer = { records: string[] } | { failed: string };

/** A look-up gets this long per try, two tries: a resolver that hangs costs a verification, not the gateway. */
const TIMEOUT_MS = 3000;

/** The TXT records at `name`, each one string (its chunks joined, as RFC 7208 reads them). */
export async function lookupTxt(name: string, resolvers: readonly string[]): Promise<TxtAnswer> {
  const resolver = new Resolver({ timeout: TIMEOUT_MS, tries: 2 });
  if (resolvers.length) resolver.setServers([...resolvers]);
  try {
    const records = await resolver.resolveTxt(name);
    return { records: records.map((chunks) => chunks.join('')) };
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOTFOUND' || code === 'ENODATA') return { records: [] };
    return { failed: code ?? String(err) };
  }
}

/** Whether the answer holds exactly `value` as one of its records. */
export const holds = (answer: TxtAnswer, value: string): boolean => 'records' in answer && answer.records.includes(value);

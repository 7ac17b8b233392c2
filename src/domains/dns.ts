// The TXT look-up that proves a domain (CONTRACT §31), through organizations.sso.dns.resolvers (the
// system's when empty). What it answers tells the re-check apart: the name or the record is gone
// (NXDOMAIN, no TXT: a miss), or the resolver failed (a timeout, SERVFAIL, refused: no miss, since
// an outage of the resolver says nothing about who holds the domain).
import { Resolver } from 'node:dns/promises';

/** A look-up gets this long per try, two tries: a resolver that hangs costs a verification, not the gateway. */
const TIMEOUT_MS = 3000;

/**
 * Whether `name` holds `value` as one of its TXT records, each read as one string (its chunks joined,
 * as RFC 7208 reads them). A name or records gone (NXDOMAIN, NODATA) is false, a miss; a resolver
 * that failed is `{ failed }` with its error code.
 */
export async function holdsTxt(name: string, value: string, resolvers: readonly string[]): Promise<boolean | { failed: string }> {
  const resolver = new Resolver({ timeout: TIMEOUT_MS, tries: 2 });
  if (resolvers.length) resolver.setServers([...resolvers]);
  try {
    const records = await resolver.resolveTxt(name);
    return records.some((chunks) => chunks.join('') === value);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOTFOUND' || code === 'ENODATA') return false;
    return { failed: code ?? String(err) };
  }
}

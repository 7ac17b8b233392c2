// Domains stay proven (CONTRACT §31): every DNS-verified domain's TXT record is looked up again
// once a day. Three days in a row without it (NXDOMAIN, or the value gone) and the domain becomes
// unverified: SAML, SCIM and `enforce` stop counting it, another organization may claim it, and
// the change is audited and sent as a hook. A resolver that fails is no miss: its outage says
// nothing about who holds the domain. An operator-verified domain is never re-checked. Run by the
// hourly housekeeping of every instance; each due domain is claimed by one (storage's
// claimRechecks), so the fleet looks each one up once a day.
import type { Logger } from 'pino';
import type { Audit } from '../audit.js';
import type { Database } from '../storage/database/index.js';
import { claimRechecks, recordRecheck } from '../storage/orgs/index.js';
import { holdsTxt } from './dns.js';
import { txtNameOf } from './names.js';

/** Consecutive daily misses that unverify a domain. */
export const MAX_MISSES = 3;
// A little under a day, so an hourly sweep that starts a few seconds late still checks daily.
const RECHECK_EVERY_MS = 23 * 3_600_000;
const BATCH = 200;

export interface RecheckDeps {
  db: Database;
  audit: Pick<Audit, 'record'>;
  clock: () => Date;
  log: Logger;
  resolvers: readonly string[];
}

/** One pass over the domains due; how many were looked up, missed, and unverified. */
export async function recheckDomains(deps: RecheckDeps): Promise<{ checked: number; missed: number; unverified: number; failed: number }> {
  const due = await claimRechecks(deps.db, deps.clock(), RECHECK_EVERY_MS, BATCH);
  const counts = { checked: due.length, missed: 0, unverified: 0, failed: 0 };
  for (const claim of due) {
    const found = await holdsTxt(txtNameOf(claim.domain), claim.txt_value, deps.resolvers);
    if (typeof found === 'object') {
      counts.failed++;
      deps.log.warn({ domain: claim.domain, error: found.failed }, 'domain re-check: the resolver failed; not counted as a miss');
      continue;
    }
    if (!found) counts.missed++;
    await deps.db.transaction(async (tx) => {
      const row = await recordRecheck(tx, claim.org_id, claim.domain, found, MAX_MISSES);
      if (row?.status !== 'unverified') return;
      counts.unverified++;
      await deps.audit.record({ type: 'org.domain_unverified', actor: 'system', data: { org_id: claim.org_id, domain: claim.domain, missed_checks: row.missed_checks } }, tx);
    });
  }
  if (counts.checked) deps.log.info(counts, 'domains re-checked');
  return counts;
}

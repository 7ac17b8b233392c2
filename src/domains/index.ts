// The domains room's one door (CONTRACT §31, "Domains" and "Domains stay proven"): domain names in
// their stored form and which may be claimed, the shipped list of public mail domains, the TXT
// look-up, and the daily re-check. The endpoints live with their callers: the organization's in
// orgs/domains.ts, the operator's in admin/orgs.ts; the re-check runs in housekeeping.ts.
export { claimable, emailDomain, normalizeDomain, txtNameOf } from './names.js';
export { holdsTxt } from './dns.js';
export { publicMailDomains, SHIPPED_PUBLIC_MAIL_DOMAINS } from './publicMail.js';
export { MAX_MISSES, recheckDomains, type RecheckDeps } from './recheck.js';

// An organization claims an account whose address nobody proved (CONTRACT §31, "Whose account"):
// whoever registered the address before the organization proved its domain may be anyone, so
// every way they had in ends in the claiming transaction: password, TOTP and recovery codes,
// passkeys, provider links, sessions with their access tokens, and personal API keys. The address
// is verified from then on (the organization's verified domain and its IdP or directory vouch).
// Organization keys stay: they are their organization's, not the account's.
import type { AccountWriters } from '../account/change.js';
import { revokeKeys } from '../keys/index.js';
import { removeAllLinks, removeSecondFactor, revokeAllForUser, users } from '../storage/accounts/index.js';
import type { Audit } from '../audit.js';
import { authorOf, type ManagingActor } from './managingActor.js';

/** Removes the account's ways in and verifies its address, in the locked account's transaction; true. */
export async function claimAccount(w: AccountWriters, audit: Pick<Audit, 'record'>, claim: { orgId: number; by: ManagingActor }): Promise<true> {
  const { tx, user, now } = w;
  const { author, via } = authorOf(claim.by);
  const password = await users.removePassword(tx, user.id, now);
  const factors = await removeSecondFactor(tx, user.id);
  const links = await removeAllLinks(tx, user.id);
  const sessions = await revokeAllForUser(tx, user.id, 'sso_claim');
  // Access tokens already issued are refused on every instance within a second (CONTRACT §33).
  await users.endOlderTokens(tx, user);
  const keys = await revokeKeys(tx, user.id);
  for (const key of keys) {
    await audit.record({ type: 'api_key.revoked', ...author, userId: user.id, data: { id: key.id, reason: 'sso_account_claimed', via } }, tx);
  }
  if (await users.markEmailVerified(tx, user.id, user.email, now)) await w.record('email.verified', { via, org_id: claim.orgId });
  await w.record('sso.account_claimed', {
    org_id: claim.orgId, via, password_removed: password, factors_removed: factors, links_removed: links.length, sessions_revoked: sessions, api_keys_revoked: keys.length,
  });
  return true;
}

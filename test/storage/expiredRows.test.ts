// The hourly purge of expired single-use tokens (src/housekeeping.ts): links, mfa_tokens and
// WebAuthn challenges that expired more than a day ago go; live ones, and ones only just
// expired, stay.
import { randomUUID } from 'node:crypto';
import { expect, it } from 'vitest';
import { blockGateway } from '../helpers/blockGateway.js';
import { describeWithServices, makeUser, sql } from '../helpers/gateway.js';

describeWithServices('expired single-use tokens', () => {
  const gateway = blockGateway();

  it('goes a day after its expiry, from every table that holds one; the rest stays', async () => {
    const gw = gateway();
    const user = await makeUser(gw);
    const hours = (n: number) => new Date(Date.now() + n * 3_600_000);
    const ages = { old: hours(-25), recent: hours(-1), live: hours(1) };
    const tag = randomUUID();
    for (const [age, expires] of Object.entries(ages)) {
      await sql("INSERT INTO email_tokens (user_id, purpose, token_hash, email, expires_at) VALUES ($1, 'magic', $2, $3, $4)", [user.id, `${tag}-${age}`, user.email, expires]);
      await sql("INSERT INTO mfa_tokens (token_hash, user_id, amr, expires_at) VALUES ($1, $2, '[\"pwd\"]', $3)", [`${tag}-${age}`, user.id, expires]);
      await sql("INSERT INTO webauthn_challenges (challenge_hash, purpose, expires_at) VALUES ($1, 'login', $2)", [`${tag}-${age}`, expires]);
    }
    const purged = await gw.services.housekeeping.sweep();
    for (const table of ['email_tokens', 'mfa_tokens', 'webauthn_challenges']) {
      expect(purged[table], table).toBeGreaterThanOrEqual(1);
      const key = table === 'webauthn_challenges' ? 'challenge_hash' : 'token_hash';
      const left = await sql<{ k: string }>(`SELECT ${key} AS k FROM ${table} WHERE ${key} LIKE $1 ORDER BY 1`, [`${tag}-%`]);
      expect(left.map((r) => r.k), table).toEqual([`${tag}-live`, `${tag}-recent`]);
    }
    expect(gw.logs.some((l) => l.includes('expired single-use tokens purged'))).toBe(true);
  });
});

// The WebAuthn ceremonies, one place for the users' passkeys (CONTRACT §14, routes.ts) and the
// operators' (§24, admin/operatorPasskeys.ts): @simplewebauthn/server checks the answers; what is
// ours is that each challenge is stored hashed and used up once across instances, that user
// verification is required, and that a sign-in checks and moves the passkey's counter under a row
// lock and the answer's userHandle names the passkey's owner, so a replayed, cloned or relayed
// answer is refused. Each caller passes its relying party and its tables.
import {
  generateAuthenticationOptions, generateRegistrationOptions, verifyAuthenticationResponse, verifyRegistrationResponse,
  type AuthenticationResponseJSON, type PublicKeyCredentialCreationOptionsJSON, type PublicKeyCredentialRequestOptionsJSON, type RegistrationResponseJSON,
} from '@simplewebauthn/server';
import type { FastifyBaseLogger } from 'fastify';
import { sha256Hex } from '../../credentials/digest.js';
import type { Queryable } from '../../storage/database/index.js';
import { passkeys } from '../../storage/accounts/index.js';

/** How long a ceremony may take, from its options to its answer. */
const CHALLENGE_TTL_MS = 5 * 60_000;

export interface RelyingParty {
  rpId: string;
  rpName: string;
  origins: string[];
}

/** Whose ceremony: the tables, and the WebAuthn user handle of an owner (no personal data). */
export interface PasskeyOwners {
  tables: passkeys.PasskeyTables;
  handleOf: (ownerId: number) => string;
}

const expires = (now: Date) => new Date(now.getTime() + CHALLENGE_TTL_MS);

/**
 * WebAuthn §7.2: the answer for a discoverable credential must carry a userHandle, and it must be
 * the credential's owner's, byte for byte (the canonical base64url, as browsers send it). It is
 * outside the signature: whoever relays an answer could drop it or name another account.
 */
const namesOwner = (owners: PasskeyOwners, handle: unknown, ownerId: number) => handle === Buffer.from(owners.handleOf(ownerId)).toString('base64url');

/**
 * Why a ceremony was refused, for the log: the library's error, never the answer itself, and its
 * first 200 characters (its message quotes what the answer claims, such as an origin of any length).
 */
const reasonOf = (err: unknown) => String(err).slice(0, 200);

export async function registrationOptions(
  db: Queryable, owners: PasskeyOwners, rp: RelyingParty, owner: { id: number; name: string }, now: Date,
): Promise<PublicKeyCredentialCreationOptionsJSON> {
  const options = await generateRegistrationOptions({
    rpName: rp.rpName, rpID: rp.rpId, userName: owner.name, userID: Buffer.from(owners.handleOf(owner.id)),
    attestationType: 'none', timeout: CHALLENGE_TTL_MS,
    // Discoverable: a sign-in starts without naming the account, the authenticator offers it (the
    // library sets the older requireResidentKey from residentKey).
    authenticatorSelection: { residentKey: 'required', userVerification: 'required' },
    excludeCredentials: await passkeys.credentialIdsOf(db, owner.id, owners.tables),
  });
  await passkeys.createChallenge(db, sha256Hex(options.challenge), 'register', owner.id, now, expires(now), owners.tables);
  return options;
}

/** The new credential if the answer verifies against a live challenge of this owner's (used up here), else undefined. */
export async function verifyRegistration(db: Queryable, owners: PasskeyOwners, rp: RelyingParty, ownerId: number, body: unknown, now: Date, log: FastifyBaseLogger) {
  const verified = await verifyRegistrationResponse({
    response: body as RegistrationResponseJSON,
    expectedChallenge: (challenge) => passkeys.useChallenge(db, sha256Hex(challenge), 'register', ownerId, now, owners.tables),
    expectedOrigin: rp.origins, expectedRPID: rp.rpId, requireUserVerification: true,
  }).catch((err: unknown) => {
    log.info({ ownerId, reason: reasonOf(err) }, 'passkey registration refused');
    return undefined;
  });
  return verified?.verified ? verified.registrationInfo.credential : undefined;
}

export async function authenticationOptions(db: Queryable, owners: PasskeyOwners, rpId: string, now: Date): Promise<PublicKeyCredentialRequestOptionsJSON> {
  // No allowCredentials: the authenticator offers the passkeys it holds for this rpId.
  const options = await generateAuthenticationOptions({ rpID: rpId, userVerification: 'required', timeout: CHALLENGE_TTL_MS });
  await passkeys.createChallenge(db, sha256Hex(options.challenge), 'login', null, now, expires(now), owners.tables);
  return options;
}

/** Whose credential an answer names (read without a lock; verifyAuthentication locks and checks). */
export async function claimedOwner(db: Queryable, owners: PasskeyOwners, body: unknown): Promise<number | undefined> {
  const id = (body as { id?: unknown } | undefined)?.id;
  return typeof id === 'string' && id ? passkeys.findOwner(db, id, owners.tables) : undefined;
}

/**
 * In `tx`, the owner's row locked first (their order): whether the answer is a sign-in by one of
 * `ownerId`'s passkeys. The challenge is used up whatever follows, so the same answer sent again
 * finds it gone; the passkey's counter moves, so a copy showing an old one is refused.
 */
export async function verifyAuthentication(tx: Queryable, owners: PasskeyOwners, rp: RelyingParty, ownerId: number, body: unknown, now: Date, log: FastifyBaseLogger): Promise<boolean> {
  const response = body as AuthenticationResponseJSON;
  const passkey = typeof response?.id === 'string' ? await passkeys.lockByCredentialId(tx, response.id, owners.tables) : undefined;
  if (!passkey || passkey.owner_id !== ownerId) return false;
  const verified = await verifyAuthenticationResponse({
    response,
    expectedChallenge: (challenge) => passkeys.useChallenge(tx, sha256Hex(challenge), 'login', null, now, owners.tables),
    expectedOrigin: rp.origins, expectedRPID: rp.rpId, requireUserVerification: true,
    credential: { id: passkey.credential_id, publicKey: passkey.public_key, counter: passkey.counter, transports: passkey.transports as never },
  }).catch((err: unknown) => {
    log.info({ ownerId, reason: reasonOf(err) }, 'passkey sign-in refused');
    return undefined;
  });
  if (!verified?.verified || !namesOwner(owners, response.response.userHandle, ownerId)) return false;
  await passkeys.recordUse(tx, passkey.id, verified.authenticationInfo.newCounter, now, owners.tables);
  return true;
}

// An organization's domains (CONTRACT §31, "Domains"): an owner claims one (guard `factor`), puts
// the TXT record it is given in the domain's DNS, and asks for the look-up; owners and admins list
// them; an owner releases one (`factor`). A domain is verified by at most one organization: the
// unique index of migration 042 decides between two verifying at once, on any instances. Look-ups
// are at most 10 per organization per hour, counted under the organization's row lock.
import { randomBytes } from 'node:crypto';
import type { FastifyInstance, FastifyRequest, preHandlerAsyncHookHandler } from 'fastify';
import { claimable, holdsTxt, normalizeDomain, txtNameOf } from '../domains/index.js';
import { sendError, successBody } from '../errors/index.js';
import { bearerOnly, errors, message } from '../openapi.js';
import { orgDomains as domains } from '../storage/orgs/index.js';
import { orgChange, orgRead, refuse, requireRole, type OrgChangeDeps } from './change.js';
import { actorOf, answer, DATE, field, ids, MANAGERS, object, OWNERS, pathId, STR, TAGS } from './common.js';

export interface DomainDeps extends OrgChangeDeps {
  bearer: preHandlerAsyncHookHandler[];
  factor: preHandlerAsyncHookHandler;
  /** organizations.sso.dns.resolvers: empty, the system's. */
  resolvers: readonly string[];
  /** The shipped public mail domains with organizations.sso.publicMailDomains'. */
  publicMail: ReadonlySet<string>;
}

/** A pending claim lives this long. */
export const CLAIM_TTL_MS = 7 * 86_400_000;
/** DNS look-ups per organization per hour. */
export const LOOKUPS_PER_HOUR = 10;

const tags = TAGS;
const params = object({ ...ids('id').properties, domain: STR }, ['id', 'domain']);
const DOMAIN = object({
  domain: STR, status: { enum: ['pending', 'verified', 'unverified'] }, txt_name: STR, txt_value: STR, verified_by: { enum: ['dns', 'operator', null] },
  verified_at: { ...DATE, nullable: true }, last_checked_at: { ...DATE, nullable: true }, expires_at: DATE,
});
const DOCS = {
  claim: {
    tags, summary: 'Claim a domain (owner, second factor): the TXT record that proves it', security: bearerOnly, params: ids('id'),
    body: object({ domain: STR }, ['domain']),
    response: { 201: DOMAIN, ...errors('badRequest', 'domainNotAllowed', 'domainTaken', 'orgNotFound', 'roleInsufficient', 'recentAuthRequired', 'tokenInvalid') },
  },
  list: {
    tags, summary: 'The organization\'s domains (owner, admin)', security: bearerOnly, params: ids('id'),
    response: { 200: object({ domains: { type: 'array', items: DOMAIN } }), ...errors('orgNotFound', 'roleInsufficient', 'tokenInvalid') },
  },
  release: {
    tags, summary: 'Release a domain (owner, second factor)', security: bearerOnly, params,
    response: { 200: message, ...errors('domainNotFound', 'orgNotFound', 'roleInsufficient', 'recentAuthRequired', 'tokenInvalid') },
  },
  verify: {
    tags, summary: 'Look the claim\'s TXT record up (owner); at most 10 look-ups per organization per hour', security: bearerOnly, params,
    response: { 200: DOMAIN, ...errors('domainNotFound', 'domainUnverified', 'domainTaken', 'rateLimited', 'orgNotFound', 'roleInsufficient', 'tokenInvalid') },
  },
};

/** A claim as the API shows it. */
export function domainView(row: domains.OrgDomain): Record<string, unknown> {
  return {
    domain: row.domain, status: row.status, txt_name: txtNameOf(row.domain), txt_value: row.txt_value, verified_by: row.verified_by,
    verified_at: row.verified_at, last_checked_at: row.last_checked_at, expires_at: row.expires_at,
  };
}

/** The path's domain in its stored form; undefined (answered 404) when it is no domain name. */
const pathDomain = (request: FastifyRequest) => normalizeDomain((request.params as Record<string, unknown>).domain);

export async function domainRoutes(app: FastifyInstance, deps: DomainDeps): Promise<void> {
  app.post('/:id/domains', { schema: DOCS.claim, preHandler: [...deps.bearer, deps.factor] }, async function claimDomain(request, reply) {
    const id = pathId(request, 'id');
    if (id === undefined) return sendError(reply, 'orgNotFound');
    return answer(reply, await orgChange(deps, actorOf(request), id, async (w) => {
      requireRole(w.role, OWNERS);
      const raw = field(request.body, 'domain');
      if (typeof raw !== 'string') refuse('badRequest');
      const domain = normalizeDomain(raw);
      if (!domain || !claimable(domain, deps.publicMail)) refuse('domainNotAllowed');
      const holder = await domains.verifiedOwnerOf(w.tx, domain);
      if (holder !== undefined && holder !== w.org.id) refuse('domainTaken');
      // 192 random bits, base64url: a value nobody can guess for a domain they do not hold.
      const value = `gateway-verify=${randomBytes(24).toString('base64url')}`;
      const row = await domains.claimDomain(w.tx, w.org.id, domain, value, w.now, new Date(w.now.getTime() + CLAIM_TTL_MS));
      if (row.status === 'pending') await w.record('org.domain_claimed', { domain });
      return domainView(row);
    }), 201);
  });

  app.get('/:id/domains', { schema: DOCS.list, preHandler: deps.bearer }, async function listDomains(request, reply) {
    const userId = actorOf(request).userId;
    return answer(reply, await orgRead(deps.db, userId, pathId(request, 'id'), MANAGERS, async () =>
      ({ domains: (await domains.domainsOf(deps.db, pathId(request, 'id')!, deps.clock())).map(domainView) })));
  });

  app.delete('/:id/domains/:domain', { schema: DOCS.release, preHandler: [...deps.bearer, deps.factor] }, async function releaseDomain(request, reply) {
    const id = pathId(request, 'id');
    if (id === undefined) return sendError(reply, 'orgNotFound');
    const outcome = await orgChange(deps, actorOf(request), id, async (w) => {
      requireRole(w.role, OWNERS);
      const domain = pathDomain(request);
      if (!domain || !(await domains.releaseDomain(w.tx, w.org.id, domain))) refuse('domainNotFound');
      await w.record('org.domain_released', { domain });
    });
    return 'refused' in outcome ? answer(reply, outcome) : successBody(reply, 'domainReleased');
  });

  app.post('/:id/domains/:domain/verify', { schema: DOCS.verify, preHandler: deps.bearer }, async function verifyDomain(request, reply) {
    const id = pathId(request, 'id');
    if (id === undefined) return sendError(reply, 'orgNotFound');
    const actor = actorOf(request);
    // The claim, and the look-up counted, under the locks; the look-up itself holds none.
    const counted = await orgChange(deps, actor, id, async (w) => {
      requireRole(w.role, OWNERS);
      const domain = pathDomain(request);
      const claim = domain === undefined ? undefined : await domains.findDomain(w.tx, w.org.id, domain);
      if (!claim) refuse('domainNotFound');
      if (claim.status === 'verified') return { claim, done: true };
      if (claim.status === 'pending' && claim.expires_at <= w.now) refuse('domainUnverified');
      if (!(await domains.countLookup(w.tx, w.org.id, w.now, LOOKUPS_PER_HOUR))) refuse('rateLimited');
      return { claim, done: false };
    });
    if ('refused' in counted) return answer(reply, counted);
    const { claim, done } = counted.ok;
    if (done) return domainView(claim);
    // A resolver that failed proves nothing either.
    if ((await holdsTxt(txtNameOf(claim.domain), claim.txt_value, deps.resolvers)) !== true) return sendError(reply, 'domainUnverified');
    try {
      return answer(reply, await orgChange(deps, actor, id, async (w) => {
        requireRole(w.role, OWNERS);
        // A claim replaced meanwhile (a new value) is proven by its own record only.
        const row = await domains.markVerified(w.tx, w.org.id, claim.domain, 'dns', w.now, claim.txt_value);
        if (!row) {
          const now = await domains.findDomain(w.tx, w.org.id, claim.domain);
          return now?.status === 'verified' ? domainView(now) : refuse(now ? 'domainUnverified' : 'domainNotFound');
        }
        await w.record('org.domain_verified', { domain: claim.domain, by: 'dns' });
        return domainView(row);
      }));
    } catch (err) {
      if (domains.isDomainTaken(err)) return sendError(reply, 'domainTaken');
      throw err;
    }
  });
}

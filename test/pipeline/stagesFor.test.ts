// stagesFor (issue 77) leaves out of a policy's list the guard stages that cannot apply under it.
// Held here to what it must never do: leave out a stage whose own `applies` would have said yes,
// for any policy, any organizations setting, and any state the stages before could leave a run in.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { GUARD_STAGES, stagesFor, type GuardPolicy, type GuardRun, type StageDeps } from '../../src/pipeline/stages.js';
import type { AuthResult } from '../../src/pipeline/guards/authenticate.js';
import { fuzzRuns } from '../helpers/fuzz.js';

const policies = fc.record({
  auth: fc.constantFrom('required', 'optional', 'none'),
  plans: fc.option(fc.constant(['pro']), { nil: undefined }),
  mfa: fc.option(fc.constantFrom('required', 'optional'), { nil: undefined }),
  dailyLimit: fc.option(fc.boolean(), { nil: undefined }),
  rateLimit: fc.option(fc.boolean(), { nil: undefined }),
  anyKey: fc.option(fc.boolean(), { nil: undefined }),
  bearerOnly: fc.option(fc.boolean(), { nil: undefined }),
  path: fc.option(fc.constant('/route'), { nil: undefined }),
  org: fc.option(fc.constantFrom('required', 'optional'), { nil: undefined }),
  roles: fc.option(fc.constant(['owner']), { nil: undefined }),
}) as fc.Arbitrary<GuardPolicy>;

// What authenticate can leave: nobody, or a caller by bearer token or by key, an organization key's included.
const auths = fc.oneof(
  fc.constant<AuthResult>({ kind: 'anonymous' }),
  fc.record({ method: fc.constantFrom('bearer', 'apiKey'), orgKey: fc.option(fc.constant({ orgId: 1, role: 'member' }), { nil: undefined }) })
    .map((a) => ({ kind: 'authenticated', user: { id: 1, plan: 'pro' }, acr: 'aal1', ...a }) as unknown as AuthResult),
);

const LIMITS = { perMinute: 10, daily: 100, monthly: null };

describe('stagesFor', () => {
  it('keeps every stage whose applies() says yes, for any policy, organizations setting and run state', () => {
    fc.assert(fc.property(policies, fc.boolean(), auths, fc.boolean(), fc.boolean(), (policy, orgs, auth, gatewayOrg, actingOrg) => {
      // Only reachable states: a caller only where the policy authenticates (the first stage is the only
      // one that sets it), an organization only where the Gateway-Org stage can run.
      const reached = policy.auth !== 'none' || policy.mfa === 'required' ? auth : { kind: 'anonymous' };
      const run = {
        policy, auth: reached, headers: gatewayOrg ? { 'gateway-org': '1' } : {}, deps: { orgs: orgs ? {} : undefined } as unknown as StageDeps,
        org: actingOrg && orgs && policy.path !== undefined ? { id: 1, role: 'owner' } : undefined, limits: LIMITS, quotas: [],
      } as unknown as GuardRun;
      const kept = stagesFor(policy, orgs);
      for (const stage of GUARD_STAGES) if (stage.applies(run)) expect(kept).toContain(stage);
    }), fuzzRuns(2000));
  });

  it('gives a route on auth: none without organizations no stage, and keeps the contract\'s order', () => {
    expect(stagesFor({ auth: 'none', path: '/public' }, false)).toEqual([]);
    const all = stagesFor({ auth: 'required', path: '/r', plans: ['pro'], mfa: 'required', dailyLimit: true, rateLimit: true, roles: ['owner'] }, true);
    const order = all.map((stage) => GUARD_STAGES.indexOf(stage));
    expect(order).toEqual([...order].sort((a, b) => a - b));
    expect(all.length).toBe(GUARD_STAGES.length - 1); // bearerOnly is not asked for
  });

  it('works each policy out once: the same list for the same policy', () => {
    const policy: GuardPolicy = { auth: 'required', path: '/r' };
    expect(stagesFor(policy, false)).toBe(stagesFor(policy, false));
    expect(stagesFor(policy, true)).not.toBe(stagesFor(policy, false));
  });
});

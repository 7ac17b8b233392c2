// refundOn's rule (CONTRACT §23), outcome by outcome: listed statuses, the gateway's 504 for a
// timeout only when 504 is listed, unreachable upstreams only with `unreachable`, nothing without refundOn.
import { describe, expect, it } from 'vitest';
import { refundable } from '../../src/pipeline/guards/refunds.js';

describe('refundable', () => {
  const policy = { statuses: [502, 503], unreachable: false };
  it('follows the listed statuses, 504 and unreachable upstreams included only when asked', () => {
    expect(refundable(policy, { status: 503 })).toBe(true);
    expect(refundable(policy, { status: 500 })).toBe(false);
    expect(refundable(policy, { failure: 'timeout' })).toBe(false);
    expect(refundable({ ...policy, statuses: [504] }, { failure: 'timeout' })).toBe(true);
    expect(refundable(policy, { failure: 'unreachable' })).toBe(false);
    expect(refundable({ ...policy, unreachable: true }, { failure: 'unreachable' })).toBe(true);
    expect(refundable(undefined, { status: 503 })).toBe(false);
  });
});

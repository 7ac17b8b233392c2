// What a SCIM reading function returns, or the SCIM error it throws as its status, scimType and
// detail (any other error is thrown on): for the pure tests of SCIM's grammars and documents.
import { ScimError } from '../../src/scim/errors.js';

export function scimOutcome(fn: () => unknown): unknown {
  try {
    return fn();
  } catch (err) {
    if (!(err instanceof ScimError)) throw err;
    return { status: err.status, scimType: err.scimType, detail: err.detail };
  }
}

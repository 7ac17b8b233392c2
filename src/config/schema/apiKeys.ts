// apiKeys (CONTRACT §21): who may hold keys, how many, and what new keys start with.
import { z } from 'zod';
import { int } from './values.js';
import { planName } from './routes.js';

/** CONTRACT §21: what an API key starts with before `_`; lower case, so it never looks like a key's own characters. */
export const API_KEY_PREFIX_RULE = /^[a-z][a-z0-9]{1,9}$/;
export const DEFAULT_API_KEY_PREFIX = 'gw';

// API keys for a public API (CONTRACT §21).
export const apiKeysSchema = z.strictObject({
  plans: z.union([z.literal('all'), z.array(planName).min(1)]).default(['pro'])
    .meta({ description: 'The plans whose users may create API keys (the spec\'s rule: pro); "all" for every plan.' }),
  maxPerOwner: int(1, 1000).default(10).meta({ description: 'Active keys a user may hold at once (a rolled key no longer counts).' }),
  prefix: z.string().regex(API_KEY_PREFIX_RULE, 'expected 2 to 10 lower-case letters and digits, starting with a letter').default(DEFAULT_API_KEY_PREFIX)
    .meta({ examples: ['acme'], description: 'What new keys start with, before `_` (the secret scanners\' rule); '
      + 'keys made under an earlier prefix keep working.' }),
}).prefault({});

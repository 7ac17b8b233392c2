// What the gateway's own endpoints accept as text (CONTRACT §26, issue 45). Postgres refuses NUL
// in text and in jsonb (22021 / 22P05): a NUL sent in a credential id, a passkey's name or an admin
// search answered 500 with a stack at error level. A lone surrogate is stored as U+FFFD, a
// different value than the one sent; other C0 controls end up in logs, mails and headers. None
// is ever part of a valid field, so a string holding one is refused here, once, for every own
// endpoint, wherever the value would go next. Deep nesting is refused too: no endpoint reads
// past a few levels, and code that walks a body recursively (JSON.stringify) throws on one a
// megabyte of `[` makes.
import type { FastifyInstance, FastifyReply, FastifyRequest, preHandlerHookHandler, RouteOptions } from 'fastify';
import { sendError } from '../errors/index.js';
import { withRefusal } from '../openapi.js';

// A C0 control (NUL, CR, LF, tab, …) or a UTF-16 surrogate standing alone (\p{Cs} under /u matches
// only those: a well-formed pair is one code point).
// eslint-disable-next-line no-control-regex -- finding control characters is the point
const UNFIT_TEXT = /[\u0000-\u001f\p{Cs}]/u;
// A free-form payload (an alert's data, relayed to a webhook) may carry newlines and tabs, as any
// JSON document does; only what storage cannot keep, or keeps altered, is refused.
// eslint-disable-next-line no-control-regex -- as above
const UNFIT_PAYLOAD = /[\u0000\p{Cs}]/u;
// The deepest a body of an own endpoint is read (a WebAuthn response: 3); an alert's data is an
// operator's document, given room to spare.
const MAX_DEPTH = 32;

/** Whether `text` holds a C0 control or a lone surrogate: never part of a valid field. */
export function isUnfitText(text: string): boolean {
  return UNFIT_TEXT.test(text);
}

/**
 * Whether any string of `value` (keys included) matches `unfit`, or it nests deeper than
 * MAX_DEPTH. Iterative: a recursive walk would itself overflow the stack on a deep value.
 */
export function hasUnfitValue(value: unknown, unfit: RegExp = UNFIT_TEXT): boolean {
  const pending: Array<[unknown, number]> = [[value, 0]];
  while (pending.length) {
    const [item, depth] = pending.pop()!;
    if (typeof item === 'string') {
      if (unfit.test(item)) return true;
    } else if (item !== null && typeof item === 'object') {
      if (depth >= MAX_DEPTH) return true;
      for (const [key, child] of Object.entries(item)) {
        if (unfit.test(key)) return true;
        pending.push([child, depth + 1]);
      }
    }
  }
  return false;
}

export interface InputRules {
  /**
   * Routes whose handlers read their fields themselves, with the spec's own answers (register,
   * login, …): full URLs (every method), or `METHOD url` for one method of a URL.
   */
  readsOwnFields?: readonly string[];
  /** Routes whose body is a free-form payload: only NUL, lone surrogates and deep nesting are refused there. */
  payloads?: readonly string[];
}

/**
 * Adds, to every route registered from here on in `app`'s scope, a last preHandler (after its
 * guards: a caller without credentials still gets the 401) that answers 400 `Requête invalide`
 * to a body, query string or path parameter holding unfit text; and documents that 400.
 */
export function refuseUnfitInput(app: FastifyInstance, rules: InputRules = {}): void {
  const own = new Set(rules.readsOwnFields);
  const payloads = new Set(rules.payloads);
  app.addHook('onRoute', (route: RouteOptions) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    if (own.has(route.url) || methods.every((m) => own.has(`${m} ${route.url}`))) return;
    const check = inputCheck(payloads.has(route.url) ? UNFIT_PAYLOAD : UNFIT_TEXT);
    const existing = route.preHandler;
    route.preHandler = existing === undefined ? [check] : [...(Array.isArray(existing) ? existing : [existing]), check];
    route.schema = withRefusal(route.schema, 'badRequest');
  });
}

function inputCheck(bodyRule: RegExp): preHandlerHookHandler {
  return function checkInput(request: FastifyRequest, reply: FastifyReply, done: (err?: Error) => void) {
    const { body, query, params } = request;
    if (hasUnfitValue(query) || hasUnfitValue(params) || (body !== undefined && hasUnfitValue(body, bodyRule))) {
      request.log.info({ reason: 'badRequest' }, 'request refused: unfit text in a field');
      sendError(reply, 'badRequest');
      return;
    }
    done();
  };
}

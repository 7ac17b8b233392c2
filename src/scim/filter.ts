// The two small grammars SCIM requests carry (RFC 7644 §3.4.2.2 and §3.5.2), cut down to what
// CONTRACT §31 serves: a list filter `<attribute> eq "<string>"` (userName, externalId,
// displayName), and a PATCH path `attr`, `attr.sub`, `attr[sub eq "v"]` or `attr[sub eq "v"].sub`
// (Entra ID's `emails[type eq "work"].value`, Okta's `members[value eq "…"]`). Anything else is
// refused as SCIM says (invalidFilter, invalidPath), never guessed at: a filter read loosely could
// select users it was not meant to, and the query it feeds is always bound to one organization.
import { scimError } from './errors.js';

export interface Comparison {
  /** The attribute as the caller allowed it (its canonical spelling). */
  attribute: string;
  value: string;
}

export interface PatchPath {
  attribute: string;
  /** `[sub eq "v"]` */
  filter?: { attribute: string; value: string };
  /** `.sub` after the attribute or its filter. */
  sub?: string;
}

const URN_PREFIX = /^urn:ietf:params:scim:schemas:core:2\.0:(?:User|Group):/i;
const NAME = /^[A-Za-z][\w$-]*$/;
// `name eq "value"`: the value a JSON string (its escapes, and its refusal of control characters,
// JSON.parse's), nothing after it.
const COMPARISON = /^\s*([A-Za-z][\w$:.-]*)\s+eq\s+("(?:[^"\\]|\\.)*")\s*$/i;
const MAX_FILTER = 1024;

/** The attribute's canonical spelling among `allowed` (SCIM names are case-insensitive), or undefined. */
function canonical(name: string, allowed: readonly string[]): string | undefined {
  const bare = name.replace(URN_PREFIX, '');
  return allowed.find((a) => a.toLowerCase() === bare.toLowerCase());
}

function comparison(text: string, allowed: readonly string[]): Comparison | undefined {
  const match = COMPARISON.exec(text);
  if (!match) return undefined;
  const attribute = canonical(match[1]!, allowed);
  if (!attribute) return undefined;
  // The regex took a JSON string literal's form: JSON.parse gives a string, or fails (a bad escape).
  let value: string;
  try {
    value = JSON.parse(match[2]!) as string;
  } catch {
    return undefined;
  }
  return { attribute, value };
}

/** A list's `filter`: one `eq` comparison of an attribute of `allowed`; else 400 invalidFilter. */
export function parseFilter(text: string, allowed: readonly string[]): Comparison {
  const found = text.length <= MAX_FILTER ? comparison(text, allowed) : undefined;
  return found ?? scimError(400, `Only filters of the form <${allowed.join('|')}> eq "<value>" are supported`, 'invalidFilter');
}

const PATH = /^([A-Za-z][\w$:.-]*?)(?:\[([^\]]*)\])?(?:\.([A-Za-z][\w$-]*))?$/;

const badPath = (text: string): never => scimError(400, `Unsupported PATCH path: ${text.slice(0, 100)}`, 'invalidPath');

/**
 * A PATCH `path` over attributes `allowed` (with sub-attributes of `subs`); undefined for an
 * attribute the gateway does not keep (Entra's title, phoneNumbers, the enterprise extension), which
 * the caller then ignores. A path it cannot read is 400 invalidPath.
 */
export function parsePatchPath(text: string, allowed: readonly string[], subs: readonly string[]): PatchPath | undefined {
  if (text.length > MAX_FILTER) return badPath(text);
  const match = PATH.exec(text.trim());
  if (!match) return badPath(text);
  const [, rawAttribute, filterText, rawSub] = match as unknown as [string, string, string | undefined, string | undefined];
  // The extension's own URN (urn:…:enterprise:2.0:User:employeeNumber) or a name we do not keep.
  const bare = rawAttribute.replace(URN_PREFIX, '');
  if (/^urn:/i.test(bare)) return undefined;
  // One name: PATH reads `attr.sub` as the attribute and its sub-attribute, so a dot left in the
  // name is one it could not (a filter or another part after it, a sub-attribute no name has).
  if (!NAME.test(bare)) return badPath(text);
  const attribute = canonical(bare, allowed);
  if (!attribute) return undefined;
  const sub = rawSub === undefined ? undefined : subs.find((s) => s.toLowerCase() === rawSub.toLowerCase()) ?? badPath(text);
  const filter = filterText === undefined ? undefined : comparison(filterText, subs) ?? badPath(text);
  return { attribute, ...(filter ? { filter } : {}), ...(sub ? { sub } : {}) };
}

// How SCIM values are read, whoever sends them: booleans as JSON or as Entra ID's "True"/"False"
// strings, strings as strings, and nothing else taken for either (a 400 invalidValue instead).
import { invalidValue, scimError } from './errors.js';

/** A boolean, or Entra ID's "True"/"False" (any case). */
export function bool(value: unknown, what: string): boolean {
  if (typeof value === 'boolean') return value;
  if (typeof value === 'string' && /^(true|false)$/i.test(value)) return value.toLowerCase() === 'true';
  return invalidValue(`${what} must be a boolean`);
}

const MAX_TEXT = 1024;

/** A string of at most 1024 characters with no NUL (Postgres cannot keep one). */
export function text(value: unknown, what: string): string {
  if (typeof value !== 'string' || value.length > MAX_TEXT || value.includes('\0')) return invalidValue(`${what} must be a string of at most ${MAX_TEXT} characters`);
  return value;
}

/** A string, or null (cleared). */
export const optionalText = (value: unknown, what: string): string | null => (value === null || value === undefined ? null : text(value, what));

export const isObject = (value: unknown): value is Record<string, unknown> => value !== null && typeof value === 'object' && !Array.isArray(value);

/** The PATCH `op`, read case-insensitively as Entra ID sends it (`Replace`, `Add`). */
export function opName(value: unknown): 'add' | 'replace' | 'remove' {
  const op = typeof value === 'string' ? value.toLowerCase() : undefined;
  if (op === 'add' || op === 'replace' || op === 'remove') return op;
  return invalidValue('op must be add, replace or remove');
}

export interface Operation {
  op: 'add' | 'replace' | 'remove';
  path: string | undefined;
  value: unknown;
}

const PATCH_SCHEMA = 'urn:ietf:params:scim:api:messages:2.0:PatchOp';
const MAX_OPERATIONS = 1000;

/** A PatchOp body's operations; a body that is none is 400 invalidSyntax. */
export function operations(body: unknown): Operation[] {
  const ops = isObject(body) ? body.Operations ?? body.operations : undefined;
  if (!Array.isArray(ops) || ops.length > MAX_OPERATIONS) return scimError(400, `A PATCH body is a ${PATCH_SCHEMA} with Operations`, 'invalidSyntax');
  return ops.map((raw): Operation => {
    if (!isObject(raw)) return scimError(400, 'Each operation is an object', 'invalidSyntax');
    const path = raw.path ?? raw.Path;
    if (path !== undefined && typeof path !== 'string') return scimError(400, 'path must be a string', 'invalidPath');
    return { op: opName(raw.op ?? raw.Op), path: path === '' ? undefined : path, value: raw.value ?? raw.Value };
  });
}

/** Operations with no path: each attribute of the value object becomes its own operation (RFC 7644 §3.5.2.1, .3). */
export function expanded(ops: Operation[]): Operation[] {
  return ops.flatMap((o) => {
    if (o.path !== undefined) return [o];
    if (!isObject(o.value)) return invalidValue('An operation without a path takes an object value');
    return Object.entries(o.value).map(([path, value]) => ({ op: o.op, path, value }));
  });
}

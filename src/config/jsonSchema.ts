// The JSON Schema of gateway.yaml (`gateway schema`, committed as gateway.schema.json for editors),
// generated from the zod schema so the two cannot disagree. It describes the file as written:
// the input side of every transform, and `${VAR}` references wherever the loader accepts them.
import { z } from 'zod';
import { ENV_REFERENCE } from './load.js';
import { configSchema, HTTP_METHODS } from './schema.js';

type JsonSchema = Record<string, unknown>;

const envReference = { $ref: '#/definitions/envReference' };
const booleanText = { type: 'string', enum: ['true', 'false'] };
const anyCase = { type: 'string', pattern: `^(${HTTP_METHODS.map((m) => [...m].map((c) => `[${c}${c.toLowerCase()}]`).join('')).join('|')})$` };

export function configJsonSchema(): JsonSchema {
  // draft-07: what the YAML language server (VS Code, Neovim, …) and JetBrains IDEs validate with.
  const { $schema, ...schema } = z.toJSONSchema(configSchema, { io: 'input', target: 'draft-07' }) as JsonSchema;
  return allowEnvReferences({
    $schema,
    title: 'gateway.yaml',
    description: 'Configuration of the auth gateway. `gateway check` validates a file, and the files it names, as `gateway start` would.',
    ...schema,
    definitions: {
      envReference: {
        type: 'string',
        pattern: ENV_REFERENCE.source,
        description: '${VAR} or ${VAR:-default}: replaced from the environment before the file is validated.',
      },
    },
  });
}

/**
 * A number written as text ("8080", as a ${VAR} gives it), within the number's own range, so that
 * the schema refuses "70000" for a port as the loader does. Whole numbers (int() in schema.ts: an
 * optional minus, digits, spaces around) from a minimum of 0 or more; the one fractional number, a
 * share from 0 to 1 (ratio: digits with a decimal point, "0.25", ".5", "1.0").
 */
function numberText(node: JsonSchema): JsonSchema {
  const min = (node.minimum as number | undefined) ?? (node.exclusiveMinimum === undefined ? 0 : (node.exclusiveMinimum as number) + 1);
  const max = (node.maximum as number | undefined) ?? Number.MAX_SAFE_INTEGER;
  if (node.type === 'number') {
    if (min !== 0 || max !== 1) throw new Error(`no text form for numbers from ${min} to ${max}`);
    return { type: 'string', pattern: '^\\s*(?:0+(?:\\.\\d*)?|0*1(?:\\.0*)?|\\.\\d+)\\s*$' };
  }
  if (!Number.isSafeInteger(min) || min < 0) throw new Error(`no text form for whole numbers from ${min}`);
  // Zero may be written -0 (Number("-0") is 0); leading zeros are read as nothing.
  const positive = integersBetween(Math.max(min, 1), max);
  const forms = [...(min === 0 ? ['-?0+'] : []), ...(positive.length ? [`0*(?:${positive.join('|')})`] : [])];
  return { type: 'string', pattern: `^\\s*(?:${forms.join('|')})\\s*$` };
}

/** Patterns for the whole numbers from `lo` to `hi` (1 or more), written without leading zeros. */
function integersBetween(lo: number, hi: number): string[] {
  const forms: string[] = [];
  for (let digits = String(lo).length; digits <= String(hi).length; digits++) {
    const from = digits === String(lo).length ? String(lo) : `1${'0'.repeat(digits - 1)}`;
    const to = digits === String(hi).length ? String(hi) : '9'.repeat(digits);
    forms.push(...sameLength(from, to));
  }
  return forms;
}

/** Patterns for the digit strings from `lo` to `hi`, both of one length. */
function sameLength(lo: string, hi: string): string[] {
  if (lo === hi) return [lo];
  const rest = lo.length - 1;
  const [a, b] = [Number(lo[0]), Number(hi[0])];
  const anyDigits = rest === 0 ? '' : rest === 1 ? '\\d' : `\\d{${rest}}`;
  if (a === b) return sameLength(lo.slice(1), hi.slice(1)).map((p) => `${a}${p}`);
  // lo to the end of its first digit, the first digits between in full, the start of hi's first digit to hi.
  const fromStart = /^0*$/.test(lo.slice(1));
  const toEnd = /^9*$/.test(hi.slice(1));
  const [first, last] = [fromStart ? a : a + 1, toEnd ? b : b - 1];
  return [
    ...(fromStart ? [] : sameLength(lo.slice(1), '9'.repeat(rest)).map((p) => `${a}${p}`)),
    ...(first <= last ? [`${first === last ? first : `[${first}-${last}]`}${anyDigits}`] : []),
    ...(toEnd ? [] : sameLength('0'.repeat(rest), hi.slice(1)).map((p) => `${b}${p}`)),
  ];
}

/**
 * The loader replaces `${VAR}` in any value before validating, and reads "20" or "true" where a
 * number or boolean is expected: so every value a plain string would not satisfy (a number, a
 * boolean, an enum, a pattern, a URL) also accepts a reference, or editors would flag valid files.
 */
function allowEnvReferences(node: JsonSchema): JsonSchema {
  const visit = (child: unknown) => (child && typeof child === 'object' ? allowEnvReferences(child as JsonSchema) : child);
  if (node.properties) node.properties = Object.fromEntries(Object.entries(node.properties).map(([key, value]) => [key, visit(value)]));
  if (typeof node.additionalProperties === 'object') node.additionalProperties = visit(node.additionalProperties);
  if (node.items) node.items = visit(node.items);
  if (node.type === 'object' || node.type === 'array') return node;
  // Methods are read in any case (routes[].methods): the enum completes the upper-case spelling.
  if (Array.isArray(node.enum) && node.enum.join() === HTTP_METHODS.join()) return { ...node, enum: undefined, anyOf: [{ enum: node.enum }, anyCase, envReference] };
  // The forms of a union too (storage.redis: a URL, a map of sentinels, a map of a cluster).
  // Only their maps and lists: the union as a whole takes a reference, its scalar forms stay as they are.
  const structure = (child: JsonSchema) => (child.type === 'object' || child.type === 'array' ? allowEnvReferences(child) : child);
  if (Array.isArray(node.anyOf)) return { ...node, anyOf: [...(node.anyOf as JsonSchema[]).map(structure), envReference] };
  // "8080" and "true" are read as the number and boolean they spell, as a ${VAR} value is.
  const spelled = node.type === 'integer' || node.type === 'number' ? [numberText(node)] : node.type === 'boolean' ? [booleanText] : [];
  const { default: fallback, description, ...value } = node;
  const plainString = (value.type === 'string' || (Array.isArray(value.type) && value.type.includes('string')))
    && !['enum', 'pattern', 'format'].some((constraint) => constraint in value);
  if (plainString) return node;
  return { ...(description ? { description } : {}), ...(fallback !== undefined ? { default: fallback } : {}), anyOf: [value, ...spelled, envReference] };
}

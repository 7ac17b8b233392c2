// The JSON Schema of gateway.yaml (`gateway schema`, committed as gateway.schema.json for editors),
// generated from the zod schema so the two cannot disagree. It describes the file as written:
// the input side of every transform, and `${VAR}` references wherever the loader accepts them.
import { z } from 'zod';
import { ENV_REFERENCE } from './load.js';
import { configSchema, HTTP_METHODS } from './schema.js';

type JsonSchema = Record<string, unknown>;

const envReference = { $ref: '#/definitions/envReference' };
const numberText = { type: 'string', pattern: '^\\s*-?\\d+\\s*$' };
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
  const spelled = node.type === 'integer' || node.type === 'number' ? [numberText] : node.type === 'boolean' ? [booleanText] : [];
  const { default: fallback, description, ...value } = node;
  const plainString = (value.type === 'string' || (Array.isArray(value.type) && value.type.includes('string')))
    && !['enum', 'pattern', 'format'].some((constraint) => constraint in value);
  if (plainString) return node;
  return { ...(description ? { description } : {}), ...(fallback !== undefined ? { default: fallback } : {}), anyOf: [value, ...spelled, envReference] };
}

// `gateway schema`: the JSON Schema of gateway.yaml, generated from the zod schema, committed as
// gateway.schema.json and named on the first line of the shipped gateway.yaml for editors.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, parseConfig } from '../../src/config/load.js';
import { HTTP_METHODS } from '../../src/config/schema.js';
import { ensureBuilt, gateway, ROOT } from '../helpers/cli.js';

const COMMITTED = path.join(ROOT, 'gateway.schema.json');

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** Whether the loader accepts `yaml` (only its own problems count: no routes, no upstreams needed). */
function loads(yaml: string): boolean {
  try {
    parseConfig(yaml, 'test.yaml');
    return true;
  } catch (err) {
    if (err instanceof ConfigError) return false;
    throw err;
  }
}

describe('gateway schema', { timeout: 60_000 }, () => {
  let schema: Json;
  beforeAll(() => {
    ensureBuilt();
    schema = JSON.parse(readFileSync(COMMITTED, 'utf8')) as Json;
  }, 120_000);

  it('prints exactly the committed gateway.schema.json (regenerate: npm run build && node dist/cli.js schema > gateway.schema.json)', async () => {
    const run = await gateway(['schema']);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(run.stdout, 'gateway.schema.json is stale: npm run build && node dist/cli.js schema > gateway.schema.json').toBe(readFileSync(COMMITTED, 'utf8'));
  });

  it('is named on the first line of the shipped gateway.yaml', () => {
    expect(readFileSync(path.join(ROOT, 'gateway.yaml'), 'utf8').split('\n')[0]).toBe('# yaml-language-server: $schema=./gateway.schema.json');
  });

  it('durations and sizes are strings with the pattern the loader applies, and their default as written', () => {
    const ttl = schema.properties.auth.properties.accessTokenTtl;
    expect(ttl).toMatchObject({ default: '15m', description: expect.stringContaining('duration') });
    const duration = new RegExp(ttl.anyOf[0].pattern);
    expect(ttl.anyOf[0].type).toBe('string');
    for (const text of ['500ms', '30s', '15m', '12h', '30d', '007s', '0s', '15', '15 m', '1.5h', '-5m', '10y', '5S']) {
      expect(duration.test(text), text).toBe(loads(`auth:\n  accessTokenTtl: "${text}"\n`));
    }
    const bodyLimit = schema.properties.server.properties.bodyLimit;
    expect(bodyLimit.default).toBe('1mb');
    const size = new RegExp(bodyLimit.anyOf.find((s: Json) => s.type === 'string' && s.pattern !== schema.definitions.envReference.pattern).pattern);
    for (const text of ['1mb', '64KB', '512b', '1024', '1Gb', '0kb', '1tb', '1.5mb', 'mb', '-1mb']) {
      expect(size.test(text), text).toBe(loads(`server:\n  bodyLimit: "${text}"\n`));
    }
  });

  it('enums are enums, plan names a pattern', () => {
    expect(schema.properties.auth.properties.jwt.properties.algorithm.anyOf[0].enum).toEqual(['HS256', 'EdDSA', 'ES256', 'RS256']);
    const route = schema.properties.routes.items.properties;
    expect(route.auth.anyOf[0].enum).toEqual(['required', 'optional', 'none']);
    // Plans are open (CONTRACT §12): a plan name, checked by its pattern.
    expect(route.plans.items.anyOf[0].pattern).toBe('^[a-z][a-z0-9_-]{0,31}$');
    expect(route.methods.items.anyOf[0].enum).toEqual([...HTTP_METHODS]);
  });

  it('every value that is not free text also accepts a ${VAR} reference, as the loader does', () => {
    const reference = new RegExp(schema.definitions.envReference.pattern);
    for (const text of ['${PORT}', '${PORT:-8080}', 'http://${HOST:-127.0.0.1}:3000']) expect(reference.test(text), text).toBe(true);
    for (const text of ['8080', '$PORT', '${}', '${1X}']) expect(reference.test(text), text).toBe(false);
    const server = schema.properties.server.properties;
    for (const value of [server.port, server.trustProxy, schema.properties.auth.properties.jwt.properties.algorithm]) {
      expect(value.anyOf).toContainEqual({ $ref: '#/definitions/envReference' });
    }
    expect(loads('server:\n  port: ${PORT:-8080}\n  trustProxy: ${TRUST:-true}\n')).toBe(true);
  });
});

// Every configuration example in README.md and docs/*.md is a configuration the gateway accepts:
// each ```yaml block goes through the real loader (parseConfig), so an example left behind by a
// change to the schema fails here instead of in a reader's terminal. A block marked `# fragment`
// is checked inside the smallest configuration it needs.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { parseConfig } from '../../src/config/load.js';
import { ROOT } from '../helpers/cli.js';
import { docsExample, docsPages, fencedBlocks, yamlExamples, type DocsExample } from '../helpers/docs.js';

// The environment the docs tell operators to set; examples may reference nothing else without a default.
const EXAMPLE_ENV = {
  DATABASE_URL: 'postgres://gateway@db.internal:5432/gateway',
  REDIS_URL: 'redis://redis.internal:6379',
  JWT_SECRET: 'an-example-secret-of-at-least-32-bytes',
  GATEWAY_ADMIN_KEY: 'an-example-admin-key-of-at-least-32-bytes',
  SMTP_URL: 'smtp://gateway:secret@smtp.example.com:587',
  METRICS_TOKEN: 'an-example-metrics-token',
  // docs/identity-providers.md: each provider's client, and a provider on this machine.
  GOOGLE_CLIENT_ID: 'example.apps.googleusercontent.com',
  GOOGLE_CLIENT_SECRET: 'an-example-client-secret',
  ENTRA_TENANT_ID: '00000000-0000-0000-0000-000000000000',
  ENTRA_CLIENT_ID: '11111111-1111-1111-1111-111111111111',
  ENTRA_CLIENT_SECRET: 'an-example-client-secret',
  KEYCLOAK_CLIENT_SECRET: 'an-example-client-secret',
  OKTA_CLIENT_ID: '0oa-example',
  OKTA_CLIENT_SECRET: 'an-example-client-secret',
  GITHUB_CLIENT_ID: 'Ov23liExample',
  GITHUB_CLIENT_SECRET: 'an-example-client-secret',
  GATEWAY_PUBLIC_URL: 'http://localhost:8080',
  APP_ORIGIN: 'http://127.0.0.1:5173',
  OIDC_ISSUER: 'http://127.0.0.1:9000',
  OIDC_CLIENT_ID: 'gateway',
  OIDC_CLIENT_SECRET: 'an-example-client-secret',
  // docs/billing.md: a Stripe restricted key and the webhook endpoint's secret.
  STRIPE_SECRET_KEY: 'rk_live_example',
  STRIPE_WEBHOOK_SECRET: 'whsec_example',
  // docs/hooks.md: the operator hooks' signing secret.
  GATEWAY_HOOKS_SECRET: 'whsec_0W+aDrgjja70tGL6v3fGucpS7lN8idkpcoSHqkKQ5ic=',
};

// What a fragment is completed with: the one upstream fragments' routes name. A top-level key the
// fragment has replaces the one here.
const MINIMAL_SECTIONS = { upstreams: 'upstreams:\n  app:\n    url: http://127.0.0.1:3000\n' };

function completed(example: DocsExample): string {
  if (!example.fragment) return example.text;
  const missing = Object.entries(MINIMAL_SECTIONS).filter(([key]) => !new RegExp(`^${key}:`, 'm').test(example.text));
  return [example.text, ...missing.map(([, text]) => text)].join('');
}

const where = (e: DocsExample) => `${e.file}:${e.line}${e.name ? ` (${e.name})` : ''}`;
const examples = yamlExamples();

describe('configuration examples in the docs', () => {
  it('finds them on the pages that show configurations', () => {
    const pages = new Set(examples.map((e) => e.file));
    for (const page of [
      'README.md', 'docs/configuration.md', 'docs/routing-and-headers.md', 'docs/upstream-identity.md', 'docs/operating.md', 'docs/decisions.md', 'docs/production.md', 'docs/accounts.md',
    ]) {
      expect(pages, page).toContain(page);
    }
  });

  it.each(examples.map((e) => [where(e), e] as const))('%s is accepted by the loader', (_where, example) => {
    expect(() => parseConfig(completed(example), where(example), EXAMPLE_ENV)).not.toThrow();
  });

  it('gives every named example a name of its own on its page', () => {
    const named = examples.filter((e) => e.name).map((e) => `${e.file}#${e.name}`);
    expect(named.length).toBeGreaterThan(0);
    expect(new Set(named).size).toBe(named.length);
  });

  it('leaves out only the YAML of other programs, which is YAML at least', () => {
    const others = docsPages().flatMap((file) => fencedBlocks(file)
      .filter((b) => b.lang === 'yaml' && !examples.some((e) => e.file === file && e.line === b.line))
      .map((b) => ({ where: `${file}:${b.line}`, text: b.text })));
    // Traefik's and Envoy's configurations, Prometheus' scrape of the metrics listener, deploy/kubernetes's kustomization and
    // manifests (test/ship/kubernetes.test.ts) and an OpenTelemetry Collector's, nothing else.
    expect(others.map((o) => o.where.split(':')[0])).toEqual(['docs/decisions.md', 'docs/decisions.md', 'docs/operating.md', ...Array(3).fill('docs/production.md'), 'docs/tracing.md']);
    for (const other of others) {
      expect(other.text.split('\n', 1)[0], other.where).toMatch(/not a gateway configuration$/);
      expect(() => parseYaml(other.text), other.where).not.toThrow();
    }
  });

  it('spells every configuration block `yaml`, so none escapes the check', () => {
    const others = docsPages().flatMap((file) => fencedBlocks(file).filter((b) => ['yml', 'YAML', 'YML'].includes(b.lang)).map((b) => `${file}:${b.line}`));
    expect(others).toEqual([]);
  });

  it('reads a named example as written, and refuses an unknown name', () => {
    const routing = docsExample('routing-and-headers', 'routing');
    expect(routing).toMatch(/^upstreams:/);
    expect(parseConfig(routing, 'routing', {}).routes.map((r) => r.path)).toContain('/api/v1/public');
    expect(() => docsExample('routing-and-headers', 'no-such-example')).toThrow(/expected one/);
  });

  it('catches a stale example: the loader refuses a key the schema does not have', () => {
    const stale: DocsExample = { file: 'test', line: 1, name: undefined, fragment: true, text: '# fragment\nplans:\n  freeDailyLimits: 2\n' };
    expect(() => parseConfig(completed(stale), 'stale', EXAMPLE_ENV)).toThrow(/plans: unknown key\(s\) "freeDailyLimits"/);
  });
});

// docs/production.md shows PgBouncer's and nginx's configurations inline, beside the files the
// tests run (test/ops/pgbouncer.test.ts, test/ops/rollingDeploy.test.ts): what a reader pastes must
// be what was tested. Each inline block, comments and spacing aside, is the example file's lines in order.
describe('docs/production.md: the inline PgBouncer and nginx blocks are the tested example files', () => {
  const lines = (text: string, comment: string) => text.split('\n').map((l) => l.split(comment)[0]!.trim().replace(/\s+/g, ' ')).filter(Boolean);
  it.each([['ini', 'docs/examples/pgbouncer.ini', ';'], ['nginx', 'docs/examples/nginx-upstream.conf', '#']] as const)('the %s block is %s', (lang, file, comment) => {
    // The systemd unit, ini too, is test/ship/systemd.test.ts's.
    const blocks = fencedBlocks('docs/production.md').filter((b) => b.lang === lang && b.name !== 'systemd-unit');
    expect(blocks).toHaveLength(1);
    const tested = lines(readFileSync(path.join(ROOT, file), 'utf8'), comment);
    const shown = lines(blocks[0]!.text, comment);
    // In order, each shown line being the next tested one; the file may add lines the page leaves out (logfile, pidfile).
    let at = 0;
    for (const line of shown) {
      at = tested.indexOf(line, at);
      expect(at, `${file} lacks "${line}" (or has it out of order)`).toBeGreaterThanOrEqual(0);
      at++;
    }
  });
});

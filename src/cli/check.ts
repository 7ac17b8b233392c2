// `gateway check`, `schema` and `openapi`: the configuration and the documents made from it.
import { consoleOffReasons, isLoopback } from '../admin/consoleOrigin.js';
import { configWarnings } from '../config/load.js';
import { DEFAULT_API_KEY_PREFIX, type Config } from '../config/schema.js';
import { knownPlans } from '../pipeline/plans.js';
import { columns, loadChecked, print, type Args } from './command.js';

export async function check({ config: configPath }: Args): Promise<number> {
  const { config, file } = await loadChecked(configPath);
  for (const warning of checkWarnings(config)) console.error(`${file}: warning: ${warning}`);
  return print(`${file}: valid\n\n${routeTable(config)}`);
}

/** Every warning of a valid file, in one list: the settings' own, and a console left off although it has a key. */
export function checkWarnings(config: Config): string[] {
  // A key without a console: the operator meant to use it.
  const consoleOff = config.admin.apiKey ? consoleOffReasons(config.admin) : [];
  // CONTRACT §25: the one moment an operator edits the list is the one to say what a removal does.
  const { previous } = config.auth.jwt;
  const listed = previous.length === 1 ? '1 key that only verifies' : `${previous.length} keys that only verify`;
  const keys = previous.length ? [`auth.jwt.previous lists ${listed}: removing one from the list ends every session it signed`] : [];
  return [
    ...configWarnings(config), ...consoleOff.map((reason) => `the console (/console/) is off: ${reason}`), ...keys,
    ...keyPrefixWarnings(config), ...organizationWarnings(config), ...metricsWarnings(config), ...portalWarnings(config), ...ssoWarnings(config),
  ];
}

/**
 * CONTRACT §22: acting for an organization needs the proxy in front (decisions) and the browser
 * (CORS) to carry what it takes, and a route's `org:` needs organizations to be enabled.
 */
function organizationWarnings(config: Config): string[] {
  const enabled = config.organizations?.enabled === true;
  const warnings: string[] = [];
  const orgRoutes = config.routes.filter((r) => r.org !== undefined || r.roles !== undefined).map((r) => r.path);
  if (!enabled && orgRoutes.length) {
    warnings.push(`routes ${orgRoutes.join(', ')} declare org or roles but organizations.enabled is off: nothing acts for an organization, org: required refuses every request`);
  }
  if (!enabled) return warnings;
  if (config.cors && !config.cors.headers.some((h) => h.toLowerCase() === 'gateway-org')) {
    warnings.push('cors.headers does not list Gateway-Org: browser pages cannot act for an organization (add gateway-org)');
  }
  return warnings;
}

/** CONTRACT §28: a metrics listener off loopback without a token lets anyone who reaches it read the traffic's shape. */
function metricsWarnings({ metrics }: Config): string[] {
  if (metrics.port === 0 || metrics.token !== undefined || isLoopback(metrics.host)) return [];
  return [`metrics.host: ${metrics.host} is not loopback and metrics.token is not set: anyone who reaches port ${metrics.port} reads /metrics; `
    + 'set metrics.token (METRICS_TOKEN) and give it to Prometheus as its bearer token, or keep the port on a network only Prometheus reaches'];
}

/** CONTRACT §30: the portal beside the routes trusts every upstream on its origin with customers' sessions. */
function portalWarnings(config: Config): string[] {
  const portal = config.portal;
  if (!portal?.enabled) return [];
  const warnings: string[] = [];
  if (portal.sharedOrigin) {
    warnings.push('portal.sharedOrigin: true serves the portal on every host, beside the routes: every upstream reachable on that origin is trusted with customers\' '
      + 'portal sessions (a page or script it serves could read any signed-in customer\'s account); leave it false to keep the portal on publicUrl\'s origin alone');
  }
  // The sign-in cookie of a provider sign-in (CONTRACT §15, §26) is set on auth.oidc.publicUrl's host: only there does it reach the portal's exchange.
  const oidc = config.auth.oidc;
  if (oidc && new URL(oidc.publicUrl).origin !== portal.publicUrl) {
    warnings.push(`the portal shows no provider buttons: auth.oidc.publicUrl (${oidc.publicUrl}) is not portal.publicUrl (${portal.publicUrl}), so the sign-in cookie `
      + 'set when a provider sign-in starts would not reach the portal\'s exchange; set auth.oidc.publicUrl to portal.publicUrl to show them');
  }
  // The same for SAML (CONTRACT §31): the ACS sets that cookie on organizations.sso.publicUrl's host.
  const sso = config.organizations?.enabled ? config.organizations.sso : undefined;
  const ssoUrl = sso && oidc ? sso.publicUrl ?? oidc.publicUrl : undefined;
  if (ssoUrl && new URL(ssoUrl).origin !== portal.publicUrl) {
    warnings.push(`the portal shows no "sign in with your organization": organizations.sso.publicUrl (or auth.oidc.publicUrl, ${ssoUrl}) is not portal.publicUrl `
      + `(${portal.publicUrl}), so the sign-in cookie the SAML ACS sets would not reach the portal's exchange; set it to portal.publicUrl to show it`);
  }
  return warnings;
}

/**
 * CONTRACT §31: domains and SCIM need organizations.sso alone; a SAML sign-in also returns to an
 * auth.oidc.returnTo entry and ends at its exchange, so without auth.oidc no SAML path is served.
 */
function ssoWarnings(config: Config): string[] {
  if (!config.organizations?.enabled || !config.organizations.sso || config.auth.oidc) return [];
  return ['organizations.sso without auth.oidc: domains and SCIM are served, SAML is not (its sign-ins return to an auth.oidc.returnTo entry '
    + 'and end at its exchange); add auth.oidc with publicUrl and returnTo (providers may be empty) to let organizations connect SAML'];
}

/**
 * CONTRACT §21: `gw_` is every gateway's default, so a secret scanner's rule for it cannot say whose
 * key it found. Said only where some plan may create keys (apiKeys.plans names a plan that exists).
 */
function keyPrefixWarnings(config: Config): string[] {
  const { plans, prefix } = config.apiKeys;
  if (prefix !== DEFAULT_API_KEY_PREFIX) return [];
  const known = knownPlans(config);
  if (plans !== 'all' && !plans.some((plan) => known.includes(plan))) return [];
  return [`apiKeys.prefix: new API keys start with the default ${prefix}_, which every gateway shares: set a prefix of your own (apiKeys.prefix: acme) `
    + 'so that secret scanners can tell your keys from others\'; keys made before keep working'];
}

export function routeTable(config: Config): string {
  const rows = [['PATH', 'METHODS', 'AUTH', 'PLANS', 'SCOPES', 'ORG', 'DAILY', 'PER MINUTE', 'UPSTREAM', 'FORWARDED AS']];
  for (const r of [...config.routes].sort((a, b) => a.path.localeCompare(b.path))) {
    const upstream = r.upstream === undefined ? undefined : config.upstreams[r.upstream]!;
    // roles imply org: required (CONTRACT §22); the roles that pass are what an operator checks.
    const org = r.roles ? `required (${r.roles.join(',')})` : r.org ?? '-';
    rows.push([r.path, r.methods?.join(',') ?? '*', r.mfa === 'required' ? `${r.auth} (mfa)` : r.auth, r.plans?.join(',') ?? '-', r.scopes?.join(',') ?? '-', org,
      r.dailyLimit ? 'yes' : '-', r.rateLimit ? 'yes' : '-',
      upstream ? `${r.upstream} (${upstream.url})` : '- (decision only)', upstream ? `${(r.rewritePrefix ?? r.path).replace(/\/+$/, '')}/…` : '-']);
  }
  return columns(rows);
}

export async function schema(): Promise<number> {
  const { configJsonSchema } = await import('../config/jsonSchema.js');
  return print(JSON.stringify(configJsonSchema(), null, 2));
}

export async function openapi(): Promise<number> {
  const [{ mkdtempSync, rmSync }, os, path, { configSchema }, { createLogger }, { startGateway }, { DOCUMENTED_OPTIONS }] = await Promise.all([
    import('node:fs'), import('node:os'), import('node:path'), import('../config/schema.js'), import('../telemetry/logger.js'), import('../server.js'), import('../openapi.js'),
  ]);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'gateway-openapi-'));
  const config = configSchema.parse({ ...DOCUMENTED_OPTIONS, server: { host: '127.0.0.1', port: 0 }, storage: { embeddedDir: dir }, admin: { host: '127.0.0.1', port: 0 } });
  const gateway = await startGateway(config, { log: createLogger('silent') });
  try {
    const { buildAdminApp } = await import('../admin/app.js');
    const admin = await buildAdminApp(gateway.services, { publicDocument: () => gateway.app.swagger() as Record<string, unknown> });
    const res = await admin.inject({ method: 'GET', url: '/openapi.json' });
    await admin.close();
    return print(JSON.stringify(res.json(), null, 2));
  } finally {
    await gateway.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

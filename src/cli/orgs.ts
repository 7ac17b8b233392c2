// `gateway orgs list|show|set-plan` (CONTRACT §22, operators): organizations read and their plan set
// directly in the database, as GET /admin/v1/orgs, GET /admin/v1/orgs/{id} and PUT …/plan do.
import { loadConfig } from '../config/load.js';
import { knownPlans } from '../pipeline/plans.js';
import type { Config } from '../config/schema.js';
import { adminKeyFor, callAdmin } from './adminClient.js';
import { columns, CommandError, print, UsageError, withDatabase, type Args } from './command.js';
import { managedByBilling, OVERRIDE_NOTE } from './users.js';

const LIST_MAX = 200;

function planOf(plan: string | undefined, plans: readonly string[]): string {
  if (plan === undefined || !plans.includes(plan)) throw new UsageError(`unknown plan ${JSON.stringify(plan ?? '')}: expected one of ${plans.join(', ')}`);
  return plan;
}

// storage/database/db.ts's parseIntegerId, without loading pg for a usage error: a positive 32-bit integer.
function orgIdOf(text: string | undefined): number {
  const id = text !== undefined && /^[1-9]\d{0,9}$/.test(text) && Number(text) <= 2 ** 31 - 1 ? Number(text) : undefined;
  if (id === undefined) throw new UsageError(`expected an organization id, not ${JSON.stringify(text ?? '')}`);
  return id;
}

export async function listOrgsCommand({ config: configPath, values }: Args): Promise<number> {
  const { config } = loadConfig(configPath);
  const query = (values.query as string | undefined)?.trim();
  const plan = values.plan === undefined ? undefined : planOf(values.plan as string, knownPlans(config));
  const limitText = (values.limit as string | undefined) ?? '50';
  const limit = /^\d{1,3}$/.test(limitText) ? Number(limitText) : NaN;
  if (!(limit >= 1 && limit <= LIST_MAX)) throw new UsageError(`--limit: expected a number from 1 to ${LIST_MAX}`);
  const [{ listOrganizations }, { listedView }] = await Promise.all([import('../storage/orgs/index.js'), import('../admin/orgs.js')]);
  const rows = await withDatabase(config, (db) => listOrganizations(db, { ...(query ? { query } : {}), ...(plan ? { plan } : {}), limit }));
  const orgs = rows.map(listedView);
  if (values.json) return print(JSON.stringify({ orgs }));
  // A name is its creator's words: JSON-quoted in the table, so no character of it can forge a column or a line.
  return print(columns([['ID', 'NAME', 'PLAN', 'MEMBERS', 'CREATED'], ...orgs.map((o) => [String(o.id), JSON.stringify(o.name), o.plan, String(o.member_count), o.created_at!])]));
}

export async function showOrgCommand({ config: configPath, operands: [idText], values }: Args): Promise<number> {
  const { config } = loadConfig(configPath);
  const id = orgIdOf(idText);
  const { orgDetail } = await import('../admin/orgs.js');
  const { planRules } = await import('../billing/operator.js');
  const org = await withDatabase(config, (db) => orgDetail(db, id, planRules(config, new Date())));
  if (!org) throw new CommandError(`no organization with id ${id}`);
  if (values.json) return print(JSON.stringify(org));
  const usage = (n: number | null) => (n === null ? '-' : String(n));
  const head = `organization ${org.id} ${JSON.stringify(org.name)}: plan ${org.plan}, created ${org.created_at}, daily usage ${usage(org.daily_usage)}, monthly usage ${usage(org.monthly_usage)}`;
  return print(`${head}\n${columns([['USER', 'EMAIL', 'ROLE', 'JOINED'], ...org.members.map((m) => [String(m.user_id), m.email, m.role, m.joined_at!])])}`);
}

export async function setOrgPlanCommand({ config: configPath, operands: [idText, planText], admin, values }: Args): Promise<number> {
  const { config } = loadConfig(configPath);
  const id = orgIdOf(idText);
  const plan = planOf(planText, knownPlans(config));
  const override = values.override === true;
  if (admin) return print(await setOrgPlanThroughAdmin(config, admin, { id, plan, override }));
  const [{ setOrganizationPlan }, { recordChange }, { hookWriterOf }, { operatorSetsPlan, planRules }] = await Promise.all([
    import('../storage/orgs/index.js'), import('../audit.js'), import('../hooks/hooks.js'), import('../billing/operator.js'),
  ]);
  // The change and its audit row in one transaction (CONTRACT §17), refused while billing manages
  // the plan and computes another unless --override (§29); the organizations trigger tells running gateways.
  const done = await withDatabase(config, (db) => db.transaction((tx) => operatorSetsPlan(tx, { type: 'org', id }, { plan, override }, planRules(config, new Date()), async (extra) => {
    // The organization's row is locked (operatorSetsPlan): it is there.
    const set = (await setOrganizationPlan(tx, id, plan))!;
    const data = { org_id: id, plan, previous: set.before.plan, ...extra };
    await recordChange(tx, { type: 'admin.org_plan_changed', actor: 'cli', userId: null, data }, new Date(), hookWriterOf(config, db));
    return { ...set, override: extra.override === true };
  })));
  const who = `organization ${id}`;
  if (done.outcome === 'managed') throw new CommandError(managedByBilling(who, done.billingPlan));
  if (done.outcome === 'gone') throw new CommandError(`no organization with id ${id}`);
  return print(`${who} ${JSON.stringify(done.result.after.name)}: plan ${done.result.before.plan} → ${plan}${done.result.override ? OVERRIDE_NOTE : ''}`);
}

/** `orgs set-plan --admin URL`: PUT /admin/v1/orgs/{id}/plan on a running gateway (on embedded storage, the way while it runs). */
async function setOrgPlanThroughAdmin(config: Config, base: string, { id, plan, override }: { id: number; plan: string; override: boolean }): Promise<string> {
  const done = await callAdmin(base, adminKeyFor(config), 'PUT', `/admin/v1/orgs/${id}/plan`, { plan, ...(override ? { override } : {}) });
  const who = `organization ${id}`;
  if (done.status === 404) throw new CommandError(`no organization with id ${id}`);
  if (done.status === 409 && typeof done.json.billing_plan === 'string') throw new CommandError(managedByBilling(who, done.json.billing_plan));
  if (done.status !== 200) throw new CommandError(`the admin API at ${base} answered ${done.status} ${JSON.stringify(done.json)}`);
  return `${who} ${JSON.stringify(done.json.name)}: plan set to ${plan}${(done.json.billing as { override_since?: unknown } | undefined)?.override_since ? OVERRIDE_NOTE : ''}`;
}

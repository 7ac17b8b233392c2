// `gateway users …` and `gateway audit`: accounts changed and listed, directly in the database or
// through a running gateway's admin API (--admin).
import { loadConfig } from '../config/load.js';
import { mailLinks } from '../config/schema/portal.js';
import { readIsoTime } from '../time.js';
import { knownPlans } from '../pipeline/plans.js';
import type { Database, Queryable } from '../storage/database/index.js';
import type { Config } from '../config/schema.js';
import { adminKeyFor, callAdmin } from './adminClient.js';
import type { HookFacts } from '../hooks/fromAudit.js';
import { columns, CommandError, print, UsageError, withDatabase, type Args } from './command.js';

type UserAction = 'set-plan' | 'deactivate' | 'activate' | 'reset-link' | 'delete';

export async function users(action: UserAction, { operands: [email, plan], config: configPath, admin, values }: Args): Promise<number> {
  const { config, file } = loadConfig(configPath);
  const plans = knownPlans(config);
  if (action === 'set-plan' && !plans.includes(plan ?? '')) throw new UsageError(`unknown plan ${JSON.stringify(plan ?? '')}: expected one of ${plans.join(', ')}`);
  const override = values.override === true;
  if (admin) return print(await usersThroughAdmin(action, email!, { plan, override }, admin, config));
  const resetUrl = config.mail ? mailLinks(config).reset : undefined;
  if (action === 'reset-link' && !resetUrl) throw new CommandError(`${file}: mail.resetUrl is not set: the link needs the application's reset page (a URL with {token})`);
  const [{ deleteUser, findByEmail, setActive }, { LINK_TTL_MS, makeLink }, { recordChange }, { hookWriterOf }] = await Promise.all([
    import('../storage/accounts/index.js'), import('../auth/links/links.js'), import('../audit.js'), import('../hooks/hooks.js'),
  ]);
  return print(await withDatabase(config, async (db) => {
    const user = await findByEmail(db, email!.trim().toLowerCase());
    if (!user) throw new CommandError(`no user with email ${email}`);
    const who = `user ${user.id} (${user.email})`;
    // Each change with its audit row (CONTRACT §17) and its operator hooks (§24), in one transaction.
    const hooks = hookWriterOf(config, db);
    const audited = (tx: Queryable, type: 'admin.plan_changed' | 'admin.user_deleted' | 'admin.active_changed', data?: Record<string, unknown>, facts?: HookFacts) =>
      recordChange(tx, { type, actor: 'cli', userId: user.id, data }, new Date(), hooks, facts);
    switch (action) {
      case 'set-plan':
        return setPlanDirectly(db, config, { id: user.id, who, plan: plan!, override }, audited);
      case 'reset-link': {
        const url = await makeLink(db, user, 'reset', resetUrl!, new Date());
        return `${who}: password reset link, single use, valid ${LINK_TTL_MS.reset / 60_000} minutes:\n${url}`;
      }
      case 'delete': {
        // As the admin API's erasure and the user's own deletion: an organization's last owner is kept (CONTRACT §22).
        const [{ lastOwnedBy }, { changeAccount }] = await Promise.all([import('../storage/orgs/index.js'), import('../account/change.js')]);
        const orphans = await lastOwnedBy(db, user.id);
        if (orphans.length) throw new CommandError(lastOwnerKept(who, orphans));
        await cancelBeforeErasure(config, db, user.id, who);
        // The user's row, then the organizations' (orgs/change.ts's order): no other owner leaves them meanwhile.
        const left = await changeAccount({ db, clock: () => new Date() }, { userId: user.id, mode: 'update' }, async ({ tx }) => {
          const last = await lastOwnedBy(tx, user.id);
          if (last.length) return last;
          const gone = await deleteUser(tx, user.id);
          if (gone) await audited(tx, 'admin.user_deleted', undefined, gone);
          return [];
        });
        if (left?.length) throw new CommandError(lastOwnerKept(who, left));
        return `${who}: deleted, with its sessions, API keys, webhook and links`;
      }
      default:
        await db.transaction(async (tx) => {
          if (await setActive(tx, user.id, action === 'activate')) await audited(tx, 'admin.active_changed', { active: action === 'activate' });
        });
        return `${who}: ${action === 'activate' ? 'active' : 'inactive'}`;
    }
  }));
}

type Audited = (tx: Queryable, type: 'admin.plan_changed', data: Record<string, unknown>, facts: HookFacts) => Promise<unknown>;

/**
 * As PUT /admin/v1/users/{id}/plan (CONTRACT §29): refused while billing manages the plan and
 * computes another, unless --override; the user and its subscription record in one transaction.
 */
async function setPlanDirectly(db: Database, config: Config, change: { id: number; who: string; plan: string; override: boolean }, audited: Audited): Promise<string> {
  const [{ writePlanFrom }, { operatorSetsPlan, planRules }] = await Promise.all([import('../storage/accounts/index.js'), import('../billing/operator.js')]);
  const { id, plan } = change;
  const done = await db.transaction((tx) => operatorSetsPlan(tx, { type: 'user', id }, change, planRules(config, new Date()), async (extra) => {
    // The user's row is locked (operatorSetsPlan): it is there.
    const { previousPlan } = (await writePlanFrom(tx, id, plan))!;
    await audited(tx, 'admin.plan_changed', { plan, ...extra }, { previous_plan: previousPlan });
    return { previous: previousPlan, override: extra.override === true };
  }));
  if (done.outcome === 'managed') throw new CommandError(managedByBilling(change.who, done.billingPlan));
  if (done.outcome === 'gone') throw new CommandError(`${change.who}: no longer exists`);
  return `${change.who}: plan ${done.result.previous} → ${plan}${done.result.override ? OVERRIDE_NOTE : ''}`;
}

/** What a plan change held against billing says. */
export const OVERRIDE_NOTE = ' (an override of billing\'s plan: it holds until billing computes another plan)';

/** Why a plan change was refused (409 plan_managed_by_billing), and what to do. */
export function managedByBilling(who: string, billingPlan: string): string {
  return `${who}: kept: its plan is managed by billing (a subscription gives ${billingPlan}); `
    + `set ${billingPlan}, or pass --override to hold another plan until billing computes a plan other than ${billingPlan}`;
}

type OrgName = { id: number; name: string };

/** Why an account stays: the organizations it is the last owner of, and what to do. */
function lastOwnerKept(who: string, orgs: OrgName[]): string {
  const named = orgs.map((o) => `${o.id} (${JSON.stringify(o.name)})`).join(', ');
  return `${who}: kept: the last owner of organization ${named}: make another member owner or delete the organization first`;
}

/**
 * As the admin API's erasure does (CONTRACT §23): with billing.stripe, the user's running
 * subscriptions are set to cancel at period end before the account goes; Stripe failing keeps it.
 */
async function cancelBeforeErasure(config: Config, db: Queryable, id: number, who: string): Promise<void> {
  if (!config.billing) return;
  const [{ StripeGateway, StripeUnavailable }, { cancelRunningSubscriptions }] = await Promise.all([import('../billing/stripe.js'), import('../billing/cancel.js')]);
  try {
    await cancelRunningSubscriptions(db, new StripeGateway(config.billing.stripe), { type: 'user', id });
  } catch (err) {
    if (!(err instanceof StripeUnavailable)) throw err;
    throw new CommandError(`${who}: kept: Stripe could not be told to cancel its subscriptions at period end (${err.message}); try again`);
  }
}

/**
 * A users command through a running gateway's admin API (CONTRACT §18): the way to change an
 * account while a gateway holds embedded storage, and a way that works on Postgres too.
 */
async function usersThroughAdmin(action: UserAction, email: string, { plan, override }: { plan?: string; override: boolean }, base: string, config: Config): Promise<string> {
  if (action === 'reset-link') {
    throw new CommandError('the admin API does not make reset links: run `gateway users reset-link` where it can open the database '
      + '(on embedded storage, with the gateway stopped), or let the user ask through password/forgot');
  }
  const key = adminKeyFor(config);
  const call = (method: string, path: string, body?: unknown) => callAdmin(base, key, method, path, body);
  const found = await call('GET', `/admin/v1/users?email=${encodeURIComponent(email)}`);
  if (found.status === 404) throw new CommandError(`no user with email ${email}`);
  if (found.status !== 200) throw new CommandError(`the admin API at ${base} answered ${found.status} ${JSON.stringify(found.json)}`);
  const user = found.json as { id: number; email: string; plan: string };
  const who = `user ${user.id} (${user.email})`;
  const done = action === 'set-plan' ? await call('PUT', `/admin/v1/users/${user.id}/plan`, { plan, ...(override ? { override } : {}) })
    : action === 'delete' ? await call('DELETE', `/admin/v1/users/${user.id}`)
      : await call('PUT', `/admin/v1/users/${user.id}/active`, { active: action === 'activate' });
  if (action === 'delete' && done.status === 409 && done.json.code === 'last_owner') throw new CommandError(lastOwnerKept(who, done.json.orgs as OrgName[]));
  // Told by its billing_plan (a code is in the body only with errors.codes).
  if (done.status === 409 && typeof done.json.billing_plan === 'string') throw new CommandError(managedByBilling(who, done.json.billing_plan));
  if (done.status !== 200) throw new CommandError(`the admin API at ${base} answered ${done.status} ${JSON.stringify(done.json)}`);
  if (action === 'set-plan') return `${who}: plan ${user.plan} → ${plan}${(done.json.billing as { override_since?: unknown } | undefined)?.override_since ? OVERRIDE_NOTE : ''}`;
  if (action === 'delete') return `${who}: deleted, with its sessions, API keys, webhook and links`;
  return `${who}: ${action === 'activate' ? 'active' : 'inactive'}`;
}

const LIST_MAX = 200;

export async function listUsersCommand({ config: configPath, values }: Args): Promise<number> {
  const { config } = loadConfig(configPath);
  const query = values.query as string | undefined;
  const plan = values.plan as string | undefined;
  const limitText = (values.limit as string | undefined) ?? '50';
  const limit = /^\d{1,3}$/.test(limitText) ? Number(limitText) : NaN;
  if (!(limit >= 1 && limit <= LIST_MAX)) throw new UsageError(`--limit: expected a number from 1 to ${LIST_MAX}`);
  const plans = knownPlans(config);
  if (plan !== undefined && !plans.includes(plan)) throw new UsageError(`unknown plan ${JSON.stringify(plan)}: expected one of ${plans.join(', ')}`);
  const { listUsers } = await import('../storage/accounts/index.js');
  const rows = await withDatabase(config, (db) => listUsers(db, { ...(query?.trim() ? { query: query.trim() } : {}), ...(plan ? { plan } : {}), limit }));
  const users = rows.map((u) => ({ id: u.id, email: u.email, plan: u.plan, is_active: u.is_active, created_at: u.created_at.toISOString(), external_id: u.external_id ?? null }));
  if (values.json) return print(JSON.stringify({ users }));
  return print(columns([['ID', 'EMAIL', 'PLAN', 'ACTIVE', 'CREATED'], ...users.map((u) => [String(u.id), u.email, u.plan, u.is_active ? 'yes' : 'no', u.created_at])]));
}

export async function auditCommand({ config: configPath, values }: Args): Promise<number> {
  const { config } = loadConfig(configPath);
  const [userText, type, sinceText, limitText = '50'] = [values.user, values.type, values.since, values.limit] as Array<string | undefined>;
  const limit = /^\d{1,3}$/.test(limitText) ? Number(limitText) : NaN;
  if (!(limit >= 1 && limit <= LIST_MAX)) throw new UsageError(`--limit: expected a number from 1 to ${LIST_MAX}`);
  const userId = userText === undefined ? undefined : /^[1-9]\d{0,9}$/.test(userText) ? Number(userText) : NaN;
  if (Number.isNaN(userId)) throw new UsageError('--user: expected a user id');
  // ISO 8601, UTC without an offset, whatever the operator's shell has in TZ (time.ts).
  const since = sinceText === undefined ? undefined : readIsoTime(sinceText);
  if (sinceText !== undefined && !since) throw new UsageError('--since: expected a time such as 2026-11-25T08:00:00Z');
  const { listAuditEvents } = await import('../storage/events/index.js');
  const rows = await withDatabase(config, (db) => listAuditEvents(db, { userId, type, since, limit }));
  const events = rows.map((e) => ({ id: e.id, at: e.at.toISOString(), type: e.type, actor: e.actor, user_id: e.user_id, ip: e.ip, user_agent: e.user_agent, data: e.data }));
  if (values.json) return print(JSON.stringify({ events }));
  // The user agent (whatever a client sent) stays out of the table; JSON escapes what data holds.
  const table = events.map((e) => [e.at, e.type, e.actor, e.user_id === null ? '-' : String(e.user_id), e.ip ?? '-', JSON.stringify(e.data)]);
  return print(columns([['AT', 'TYPE', 'ACTOR', 'USER', 'IP', 'DATA'], ...table]));
}

// `gateway operators …` (CONTRACT §24): operator accounts on direct storage, or through a running
// gateway's admin API with --admin (operatorsAdmin.ts). `add` prints the one-time enrolment link
// (built from the console's origin, §26), `token` a personal admin token, each shown once and
// stored hashed; every change with its audit event (actor `cli` here).
import { loadConfig } from '../config/load.js';
import type { Config } from '../config/schema.js';
import type { Queryable } from '../storage/database/index.js';
import { columns, CommandError, print, UsageError, withDatabase, type Args } from './command.js';
import { enrolmentLines, listOperatorsThroughAdmin, operatorsThroughAdmin, type OperatorAction } from './operatorsAdmin.js';

type CliAuditType = 'operator.created' | 'operator.role_changed' | 'operator.removed' | 'operator.mfa_reset' | 'operator.token_created';

const ROLES = ['viewer', 'support', 'admin'];

function roleOf(text: string | undefined): 'viewer' | 'support' | 'admin' {
  if (!ROLES.includes(text ?? '')) throw new UsageError(`--role: expected one of ${ROLES.join(', ')}, got ${JSON.stringify(text ?? '')}`);
  return text as 'viewer' | 'support' | 'admin';
}

/** Where the link points: the console's origin, never a guess (a listener on every address has no one name). */
async function enrolmentBase(config: Config): Promise<string> {
  const { linkOrigin } = await import('../admin/consoleOrigin.js');
  const base = linkOrigin(config.admin, config.admin.port);
  if (base === undefined) throw new CommandError('admin.host is every address and admin.publicUrl is not set: the enrolment link has no origin (set admin.publicUrl to the address operators open)');
  return base;
}

export async function operatorsCommand(action: OperatorAction, { operands: [emailText, roleText], config: configPath, admin, values }: Args): Promise<number> {
  const { config } = loadConfig(configPath);
  const email = (emailText ?? '').trim().toLowerCase();
  const role = action === 'add' ? roleOf(values.role as string | undefined) : action === 'set-role' ? roleOf(roleText) : undefined;
  const name = typeof values.name === 'string' ? values.name.trim() : '';
  if (action === 'token' && !name) throw new UsageError('--name: required (what the token is for, e.g. "laptop")');
  if (admin) return print(await operatorsThroughAdmin(action, email, role, admin, config));
  const base = action === 'add' || action === 'reset-mfa' ? await enrolmentBase(config) : '';
  const [ops, { insertAuditEvent }, tokens] = await Promise.all([import('../storage/operators/index.js'), import('../storage/events/index.js'), import('../admin/operatorTokens.js')]);
  // With no shared key, the last admin is the only way into the admin API (§24).
  const keepAnAdmin = !config.admin.apiKey;
  return print(await withDatabase(config, (db) => db.transaction(async (tx) => {
    const now = new Date();
    const audited = (type: CliAuditType, o: { id: number; email: string; role: string }, data = {}) =>
      insertAuditEvent(tx, { type, actor: 'cli', data: { operator_id: o.id, email: o.email, role: o.role, ...data } }, now);
    if (action === 'add') {
      const created = await ops.insertOperator(tx, email, role!, now);
      if (!created) throw new CommandError(`an operator with email ${email} exists already`);
      const url = await tokens.enrolmentLink(tx, created.id, now, base);
      await audited('operator.created', created);
      return `operator ${created.id} (${created.email}), role ${created.role}: ${enrolmentLines(url)}`;
    }
    const operator = await ops.findOperatorByEmail(tx, email);
    if (!operator) throw new CommandError(`no operator with email ${email}`);
    const who = `operator ${operator.id} (${operator.email})`;
    // A new link: the operator sets a password and a second factor again (§24).
    const link = () => tokens.enrolmentLink(tx, operator.id, now, base);
    return act(action, { tx, ops, tokens, keepAnAdmin, now, name, role, who, operator, audited, link, days: values.days as string | undefined });
  })));
}

interface ActDeps {
  tx: Queryable;
  ops: typeof import('../storage/operators/index.js');
  tokens: typeof import('../admin/operatorTokens.js');
  keepAnAdmin: boolean;
  now: Date;
  name: string;
  role?: 'viewer' | 'support' | 'admin';
  who: string;
  days?: string;
  link(): Promise<string>;
  operator: { id: number; email: string; role: string };
  audited(type: CliAuditType, o: { id: number; email: string; role: string }, data?: object): Promise<void>;
}

async function act(action: Exclude<OperatorAction, 'add'>, d: ActDeps): Promise<string> {
  const lastAdmin = `${d.who} is the last admin and admin.apiKey is empty: make another operator admin first`;
  switch (action) {
    case 'set-role': {
      const done = await d.ops.setOperatorRole(d.tx, d.operator.id, d.role!, d.keepAnAdmin);
      if ('refused' in done) throw new CommandError(lastAdmin);
      await d.audited('operator.role_changed', done.changed);
      return `${d.who}: role ${d.operator.role} → ${done.changed.role}`;
    }
    case 'remove': {
      const done = await d.ops.removeOperator(d.tx, d.operator.id, d.keepAnAdmin);
      if ('refused' in done) throw new CommandError(lastAdmin);
      await d.audited('operator.removed', done.changed);
      return `${d.who}: removed, with its tokens and second factor`;
    }
    case 'reset-mfa': {
      const removed = await d.ops.removeOperatorFactors(d.tx, d.operator.id);
      await d.audited('operator.mfa_reset', d.operator, { removed });
      return `${d.who}: second factor ${removed ? 'removed' : 'was not set'}; ${enrolmentLines(await d.link())}`;
    }
    default: {
      const days = d.days === undefined ? d.tokens.TOKEN_DAYS_DEFAULT : /^\d{1,3}$/.test(d.days) ? Number(d.days) : NaN;
      if (!(days >= 1 && days <= d.tokens.TOKEN_DAYS_MAX)) throw new UsageError(`--days: expected a number from 1 to ${d.tokens.TOKEN_DAYS_MAX}`);
      const minted = await d.tokens.mintOperatorToken(d.tx, d.operator.id, d.name, days, d.now);
      await d.audited('operator.token_created', d.operator, { token_id: minted.id, name: minted.name });
      return `${d.who}: token ${minted.id} "${minted.name}", role ${d.operator.role}, expires ${minted.expires_at.toISOString()} (shown once):\n${minted.token}`;
    }
  }
}

export async function listOperatorsCommand({ config: configPath, values, admin }: Args): Promise<number> {
  const { config } = loadConfig(configPath);
  const { listOperators } = await import('../storage/operators/index.js');
  const { operatorView } = await import('../admin/operatorTokens.js');
  const operators = admin
    ? await listOperatorsThroughAdmin(admin, config)
    : (await withDatabase(config, (db) => listOperators(db))).map(operatorView);
  if (values.json) return print(JSON.stringify({ operators }));
  const yes = (b: boolean) => (b ? 'yes' : 'no');
  return print(columns([['ID', 'EMAIL', 'ROLE', 'ENROLLED', 'MFA', 'CREATED'], ...operators.map((o) => [String(o.id), o.email, o.role, yes(o.enrolled), yes(o.mfa), o.created_at ?? ''])]));
}

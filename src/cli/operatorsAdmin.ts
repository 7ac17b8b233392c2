// `gateway operators … --admin URL` (CONTRACT §24): the operators commands through a running
// gateway's admin API, as `gateway users … --admin` does for accounts (the way while a gateway holds
// embedded storage). They need an admin: the shared key, or an admin operator's personal token in
// GATEWAY_OPERATOR_TOKEN (then the audit log names that operator). A token is never minted this
// way: an admin API credential does not mint another (§24).
import type { Config } from '../config/schema.js';
import { adminKeyFor, callAdmin, type AdminAnswer } from './adminClient.js';
import { CommandError } from './command.js';

export type OperatorAction = 'add' | 'set-role' | 'remove' | 'reset-mfa' | 'token';

interface OperatorView {
  id: number;
  email: string;
  role: string;
  enrolled: boolean;
  mfa: boolean;
  created_at: string | null;
  enrolment_url?: string | null;
}

/** The enrolment link's lines, as the direct-storage commands print them. */
export const enrolmentLines = (url: string) => `enrolment link, single use, valid 24 hours:\n${url}`;

function linkOrWhy(url: string | null | undefined): string {
  return url ? enrolmentLines(url) : 'no enrolment link: the admin listener is on every address and admin.publicUrl is not set (set it, then `gateway operators reset-mfa`)';
}

export async function operatorsThroughAdmin(action: OperatorAction, email: string, role: string | undefined, base: string, config: Config): Promise<string> {
  if (action === 'token') {
    throw new CommandError('a personal token is minted in the console (signed in with a second factor) or by `gateway operators token` on direct storage: an admin API credential never mints one');
  }
  const key = adminKeyFor(config);
  const call = async (method: string, path: string, body?: unknown): Promise<AdminAnswer> => {
    const answer = await callAdmin(base, key, method, path, body);
    if (answer.status >= 300) throw new CommandError(`the admin API at ${base} answered ${answer.status} ${JSON.stringify(answer.json)}`);
    return answer;
  };
  if (action === 'add') {
    const made = (await call('POST', '/admin/v1/operators', { email, role })).json as unknown as OperatorView;
    return `operator ${made.id} (${made.email}), role ${made.role}: ${linkOrWhy(made.enrolment_url)}`;
  }
  const operators = await operatorsOf(call);
  const operator = operators.find((o) => o.email === email);
  if (!operator) throw new CommandError(`no operator with email ${email}`);
  const who = `operator ${operator.id} (${operator.email})`;
  if (action === 'set-role') {
    const changed = (await call('PUT', `/admin/v1/operators/${operator.id}/role`, { role })).json as unknown as OperatorView;
    return `${who}: role ${operator.role} → ${changed.role}`;
  }
  if (action === 'remove') {
    await call('DELETE', `/admin/v1/operators/${operator.id}`);
    return `${who}: removed, with its tokens and second factor`;
  }
  const reset = (await call('DELETE', `/admin/v1/operators/${operator.id}/mfa`)).json as unknown as OperatorView;
  return `${who}: second factor ${operator.mfa ? 'removed' : 'was not set'}; ${linkOrWhy(reset.enrolment_url)}`;
}

async function operatorsOf(call: (method: string, path: string) => Promise<AdminAnswer>): Promise<OperatorView[]> {
  return (await call('GET', '/admin/v1/operators')).json.operators as OperatorView[];
}

/** `gateway operators list --admin URL`: GET /admin/v1/operators. */
export async function listOperatorsThroughAdmin(base: string, config: Config): Promise<OperatorView[]> {
  const key = adminKeyFor(config);
  const answer = await callAdmin(base, key, 'GET', '/admin/v1/operators');
  if (answer.status !== 200) throw new CommandError(`the admin API at ${base} answered ${answer.status} ${JSON.stringify(answer.json)}`);
  return answer.json.operators as OperatorView[];
}

// Users as an operator lists them (admin API, console, `gateway users list`): filtered, newest
// first, paged on the id.
import { type Queryable } from './db.js';
import { parseUserId, USER_COLUMNS, type User } from './users.js';

export interface UserFilter {
  /** An email substring (case-insensitive), an exact external_id (CONTRACT §27), or an exact id when it is one. */
  query?: string;
  plan?: string;
  active?: boolean;
  /** Only users with a smaller id: the keyset page after one already read. */
  beforeId?: number;
  limit: number;
}

/**
 * Users newest first. Pages are keyed on the id, not on an offset: users registered while an
 * operator pages get larger ids, so they never push a row into a later page twice or hide one.
 */
export async function listUsers(db: Queryable, filter: UserFilter): Promise<User[]> {
  const where: string[] = [];
  const params: unknown[] = [];
  const add = (condition: (p: string) => string, value: unknown) => {
    params.push(value);
    where.push(condition(`$${params.length}`));
  };
  if (filter.query) {
    const id = parseUserId(filter.query);
    // LIKE's own characters in the text are literal: an operator searching "a_b" means that.
    const pattern = `%${filter.query.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
    params.push(pattern);
    // An imported user is found by the id it had before, as written (external ids are case-sensitive).
    params.push(filter.query);
    const like = `(lower(email) LIKE $${params.length - 1} OR external_id = $${params.length})`;
    if (id === undefined) where.push(like);
    else add((p) => `(${like} OR id = ${p})`, id);
  }
  if (filter.plan !== undefined) add((p) => `plan = ${p}`, filter.plan);
  if (filter.active !== undefined) add((p) => `is_active = ${p}`, filter.active ? 1 : 0);
  if (filter.beforeId !== undefined) add((p) => `id < ${p}`, filter.beforeId);
  params.push(filter.limit);
  return db.query<User>(
    `SELECT ${USER_COLUMNS} FROM users ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY id DESC LIMIT $${params.length}`,
    params,
  );
}

// Users as an operator lists them (admin API, console, `gateway users list`): filtered, newest
// first, paged on the id.
import { type Queryable } from '../database/db.js';
import { Conditions, containsPattern } from '../database/listing.js';
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
  const conditions = new Conditions();
  if (filter.query) {
    const id = parseUserId(filter.query);
    const pattern = conditions.param(containsPattern(filter.query));
    // An imported user is found by the id it had before, as written (external ids are case-sensitive).
    const like = `(lower(email) LIKE ${pattern} OR external_id = ${conditions.param(filter.query)})`;
    if (id === undefined) conditions.push(like);
    else conditions.add((p) => `(${like} OR id = ${p})`, id);
  }
  if (filter.plan !== undefined) conditions.add((p) => `plan = ${p}`, filter.plan);
  if (filter.active !== undefined) conditions.add((p) => `is_active = ${p}`, filter.active ? 1 : 0);
  if (filter.beforeId !== undefined) conditions.add((p) => `id < ${p}`, filter.beforeId);
  const limit = conditions.param(filter.limit);
  return db.query<User>(`SELECT ${USER_COLUMNS} FROM users ${conditions.clause} ORDER BY id DESC LIMIT ${limit}`, conditions.params);
}

// An operator with a role and a personal token, made as `gateway operators add` and `gateway
// operators token` make them (no enrolment: the token is what the tests act with).
import { mintOperatorToken } from '../../src/admin/operatorTokens.js';
import type { Database } from '../../src/storage/database/db.js';
import { insertOperator, type OperatorRole } from '../../src/storage/operators/operators.js';
import { marker } from './gateway.js';

export interface OperatorWithToken {
  id: number;
  email: string;
  token: string;
  /** the token's id, as GET /admin/v1/operator/tokens lists it */
  tokenId: number;
}

export async function operatorWithToken(db: Database, role: OperatorRole): Promise<OperatorWithToken> {
  const email = `op-${marker()}@example.test`;
  const operator = (await insertOperator(db, email, role, new Date()))!;
  const { token, id: tokenId } = await mintOperatorToken(db, operator.id, 'laptop', 90, new Date());
  return { id: operator.id, email, token, tokenId };
}

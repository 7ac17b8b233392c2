// How a guard's calls to Redis and Postgres are traced (CONTRACT §17: the stages "with their Redis
// and Postgres calls"), apart from the SDK: the storage code takes a StoreCalls and does not know
// whether anything records it (telemetry/tracing.ts makes the traced one).

/** One kind of call to Redis or Postgres, as OpenTelemetry's database conventions name it. */
export interface StoreCall {
  system: 'redis' | 'postgresql';
  /** The command (EVALSHA) or the statement's verb (SELECT). */
  operation: string;
  /** The table, for Postgres. */
  collection?: string;
}

/** Runs a call to Redis or Postgres; traced, as a CLIENT span under the stage that makes it. */
export type StoreCalls = <T>(call: StoreCall, work: () => Promise<T>) => Promise<T>;

/** Not traced: the call alone. */
export const untraced: StoreCalls = (_call, work) => work();

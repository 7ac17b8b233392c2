// Property tests with a seed that is printed and can be given back: a case that failed once (in
// CI, say) replays with FUZZ_SEED=<seed>, and FUZZ_PATH=<path> (fast-check's report gives it)
// goes straight to the shrunk case.
import path from 'node:path';
import type { Parameters } from 'fast-check';
import { expect } from 'vitest';

/** fast-check parameters: numRuns, and the run's seed (FUZZ_SEED, else a fresh one), printed. */
export function fuzzRuns<T>(numRuns: number, extra: Parameters<NoInfer<T>> = {}): Parameters<T> {
  const given = process.env.FUZZ_SEED;
  const seed = given !== undefined && /^-?\d+$/.test(given) ? Number(given) : Math.floor(Math.random() * 0x7fffffff);
  const { testPath, currentTestName } = expect.getState();
  const file = testPath ? path.relative(process.cwd(), testPath) : '';
  console.info(`[fuzz] seed ${seed}: FUZZ_SEED=${seed} npx vitest run ${file} -t ${JSON.stringify(currentTestName?.split(' > ').at(-1) ?? '')}`);
  const replayPath = process.env.FUZZ_PATH;
  return { ...extra, numRuns, seed, ...(replayPath ? { path: replayPath } : {}) };
}

// A keyring reloads on an interval (CONTRACT §3, §25); a command that starts one and never closes it
// (a `gateway` command that signs or verifies once, then returns) must still exit, so that interval
// must not hold the process. Shared by the keyrings' tests, each with its own interval and set-up.
import { vi } from 'vitest';

/**
 * Starts what `start` makes while setInterval is watched, and answers, for each interval of
 * `intervalMs` it set, whether that timer holds the process (hasRef); closes it afterwards.
 */
export async function reloadTimersHoldingProcess(intervalMs: number, start: () => Promise<{ close(): Promise<void> }>): Promise<boolean[]> {
  const setInterval = vi.spyOn(globalThis, 'setInterval');
  let started: { close(): Promise<void> } | undefined;
  try {
    started = await start();
    const reloads = setInterval.mock.results.filter((_, i) => setInterval.mock.calls[i]![1] === intervalMs);
    return reloads.map((r) => (r.value as NodeJS.Timeout).hasRef());
  } finally {
    setInterval.mockRestore();
    await started?.close();
  }
}

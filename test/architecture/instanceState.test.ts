// Whatever a process holds, the instance owns and closes (STYLE 22): two gateways in one process
// (as every test file runs them) share no hasher child, closing one leaves the other working, and
// opening a database changes nothing process-wide (pg's type parsers).
import { readdirSync, readFileSync } from 'node:fs';
import pg from 'pg';
import { afterAll, expect, it } from 'vitest';
import { closeSql, describeWithServices, newEmail, startTestGateway, testConfig, type TestGateway } from '../helpers/gateway.js';

/** Pids of this process's password-hasher children (hasher.ts runs them with `node --input-type=module`). */
function hasherChildren(): number[] {
  return readdirSync('/proc').filter((entry) => {
    if (!/^\d+$/.test(entry)) return false;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === process.pid
        && readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes('--input-type=module');
    } catch {
      return false;
    }
  }).map(Number);
}

async function waitFor(check: () => boolean): Promise<void> {
  for (let i = 0; i < 100 && !check(); i++) await new Promise((r) => setTimeout(r, 20));
}

describeWithServices('what one instance holds', () => {
  const gateways: TestGateway[] = [];
  afterAll(async () => {
    await Promise.all(gateways.map((gw) => gw.close()));
    await closeSql();
  });

  const register = (gw: TestGateway) => gw.post('/api/v1/auth/register', { email: newEmail(), password: 'long-enough-password' });

  it.runIf(process.platform === 'linux')('each instance has a hasher child of its own, stopped when that instance closes', async () => {
    const before = hasherChildren();
    const a = await startTestGateway(testConfig());
    const b = await startTestGateway(testConfig());
    gateways.push(b);
    expect((await register(a)).status).toBe(201);
    expect((await register(b)).status).toBe(201);
    const started = hasherChildren().filter((pid) => !before.includes(pid));
    expect(started).toHaveLength(2);

    await a.close();
    await waitFor(() => hasherChildren().filter((pid) => started.includes(pid)).length === 1);
    expect(hasherChildren().filter((pid) => started.includes(pid))).toHaveLength(1);
    // The other instance hashes on, in its own child.
    expect((await register(b)).status).toBe(201);
    expect(hasherChildren().filter((pid) => started.includes(pid))).toHaveLength(1);
  });

  it('reads dates as text through its own connections, without changing pg for the rest of the process', async () => {
    const gw = await startTestGateway(testConfig());
    gateways.push(gw);
    const [row] = await gw.services.db.query<{ d: unknown }>("SELECT DATE '2026-11-23' AS d");
    expect(row!.d).toBe('2026-11-23');
    // Any other pg user in the process still gets pg's own parser: a Date.
    expect(pg.types.getTypeParser(1082)('2026-11-23')).toBeInstanceOf(Date);
  });
});

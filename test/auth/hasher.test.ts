// The password hasher child: it hashes at idle priority so logins never queue the proxy's
// threads, and a hasher that dies costs no login.
import { readdirSync, readFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { afterAll, describe, expect, it } from 'vitest';
import { MAX_WAITING_HASHES, Passwords } from '../../src/auth/password/passwords.js';

const SCHED_IDLE = 5;
const hasChrt = (() => {
  try {
    execFileSync('chrt', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

/** Fields of /proc/<pid>[/task/<tid>]/stat after the command name: index 0 is field 3 (state). */
function statFields(path: string): string[] {
  const stat = readFileSync(path, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
}

/** The hasher child of this test process, found by its parent pid and command line. */
function hasherPid(): number {
  const children = readdirSync('/proc').filter((entry) => {
    if (!/^\d+$/.test(entry)) return false;
    try {
      return Number(statFields(`/proc/${entry}/stat`)[1]) === process.pid
        && readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes('--input-type=module');
    } catch {
      return false; // exited while we looked
    }
  });
  expect(children).toHaveLength(1);
  return Number(children[0]);
}

describe('password hasher', () => {
  // One instance's hasher, as a gateway instance owns it (Instance.passwords).
  const passwords = new Passwords();
  afterAll(() => passwords.close());

  it('hashes and verifies through the child', async () => {
    const hash = await passwords.hash('correct horse battery');
    expect(hash).toMatch(/^\$argon2id\$v=19\$m=19456,t=2,p=1\$/);
    expect(await passwords.verify(hash, 'correct horse battery')).toBe(true);
    expect(await passwords.verify(hash, 'wrong horse battery')).toBe(false);
  });

  it.runIf(process.platform === 'linux' && hasChrt)('runs every thread of the child, argon2\'s pool included, at SCHED_IDLE', async () => {
    await passwords.hash('starts the pool');
    const pid = hasherPid();
    const threads = readdirSync(`/proc/${pid}/task`);
    expect(threads.length).toBeGreaterThan(1);
    // Field 41 of stat is the scheduling policy.
    const policies = threads.map((tid) => Number(statFields(`/proc/${pid}/task/${tid}/stat`)[38]));
    expect(new Set(policies)).toEqual(new Set([SCHED_IDLE]));
  });

  it('still verifies when the child is killed', async () => {
    const hash = await passwords.hash('survives a dead hasher');
    process.kill(hasherPid(), 'SIGKILL');
    expect(await passwords.verify(hash, 'survives a dead hasher')).toBe(true);
    expect(await passwords.verify(hash, 'not it')).toBe(false);
  });

  it(`answers 503 at once past ${MAX_WAITING_HASHES} waiting hashes, and serves the queued ones`, async () => {
    const hash = await passwords.hash('a long queue');
    // Two run, the rest wait: the queue is then exactly full.
    const queued = Array.from({ length: 2 + MAX_WAITING_HASHES }, () => passwords.verify(hash, 'a long queue'));
    await expect(passwords.verify(hash, 'a long queue')).rejects.toMatchObject({ code: 'storageUnavailable' });
    expect(await Promise.all(queued)).toEqual(queued.map(() => true));
    // Drained: the next one is served again.
    expect(await passwords.verify(hash, 'a long queue')).toBe(true);
  });
});

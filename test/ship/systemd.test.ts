// deploy/systemd/auth-gateway.service (CONTRACT §25): what systemd itself says of it
// (`systemd-analyze verify`: no unknown key, no value it would ignore, ExecStart runnable), the
// confinement the contract names, a stop that outlasts the drain, and docs/production.md showing
// the unit as it is. Without systemd-analyze the verify is skipped, saying why, unless
// REQUIRE_SERVICES=1 (CI), where that fails the run (.ci/run installs systemd).
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { SHUTDOWN_GRACE_MS } from '../../src/cli/start.js';
import { parseConfig } from '../../src/config/load.js';
import { ROOT } from '../helpers/cli.js';
import { docsBlock } from '../helpers/docs.js';

const UNIT = path.join(ROOT, 'deploy/systemd/auth-gateway.service');
const unit = readFileSync(UNIT, 'utf8');

/** The unit's `Key=value` settings of a section, a key given more than once keeping each value. */
function settings(section: string): Map<string, string[]> {
  const found = new Map<string, string[]>();
  let current = '';
  for (const line of unit.split('\n')) {
    const header = /^\[(\w+)\]$/.exec(line);
    if (header) current = header[1]!;
    const setting = /^(\w+)=(.*)$/.exec(line);
    if (setting && current === section) found.set(setting[1]!, [...(found.get(setting[1]!) ?? []), setting[2]!]);
  }
  return found;
}

const analyze = spawnSync('systemd-analyze', ['--version'], { stdio: 'ignore' }).status === 0;
if (!analyze && process.env.REQUIRE_SERVICES === '1') throw new Error('REQUIRE_SERVICES=1 but systemd-analyze is not installed (apt-get install -y systemd; .ci/run installs it)');
if (!analyze) console.warn('\n[tests] systemd-analyze not installed (apt-get install -y systemd): the unit\'s verify skipped\n');

describe('deploy/systemd/auth-gateway.service', () => {
  it.runIf(analyze)('passes systemd-analyze verify without a word', () => {
    const verify = spawnSync('systemd-analyze', ['verify', UNIT], { encoding: 'utf8' });
    expect(verify.stderr).toBe('');
    expect(verify.status).toBe(0);
  });

  it('runs under a user of its own in a read-only system, writing only to its state directory', () => {
    const service = settings('Service');
    expect(Object.fromEntries([...service].filter(([key]) => ['DynamicUser', 'ProtectSystem', 'NoNewPrivileges', 'StateDirectory'].includes(key)))).toEqual({
      DynamicUser: ['yes'], ProtectSystem: ['strict'], NoNewPrivileges: ['yes'], StateDirectory: ['auth-gateway'],
    });
    expect(Number(service.get('LimitNOFILE')?.[0])).toBeGreaterThanOrEqual(65536);
    expect(service.get('EnvironmentFile')).toEqual(['-/etc/auth-gateway/env']);
    expect(service.get('ExecReload')).toEqual(['/bin/kill -HUP $MAINPID']);
  });

  it('stops with SIGTERM and waits longer than the shipped gateway.yaml\'s drain and the time the gateway then gives requests in flight', () => {
    const service = settings('Service');
    expect(service.get('KillSignal')).toEqual(['SIGTERM']);
    const config = parseConfig(readFileSync(path.join(ROOT, 'gateway.yaml'), 'utf8'), 'gateway.yaml');
    expect(Number(service.get('TimeoutStopSec')?.[0]) * 1000).toBeGreaterThan(config.server.shutdownDelay + SHUTDOWN_GRACE_MS);
  });

  it('is the unit docs/production.md shows', () => {
    expect(docsBlock('production', 'systemd-unit')).toBe(unit);
  });
});

// npm run deps: the dependencies a major version (or, below 1.0, a minor one) behind their latest
// release, so that the next drift is seen when it starts, not found a year later (issue 47).
// Exit 1 when any is behind, so a scheduled job can alert on it; prints nothing else to parse.
// A package held back on purpose is listed in HELD_BACK with the major it stays behind and why:
// it is printed with its reason but does not fail the check, until a newer major than the one
// recorded comes out (then it is behind again, and the reason deserves a new look).
import { execFileSync } from 'node:child_process';

/** Behind on purpose: name → the latest major (or 0.minor) we decided not to take, and why. */
const HELD_BACK = {
  typescript: {
    latest: '7',
    why: 'TS 7, the native compiler, type-checks the project unchanged and does `npm run typecheck` (devDependency typescript-native, '
      + 'an alias of typescript@7: 8.6 s against 5.9\'s 22.8 s here). It ships no compiler API, so the `typescript` library stays on 5.9 for '
      + 'what calls one: typescript-eslint 8 refuses 7 (peer typescript <6.1.0, typescript-eslint issue 10940), test/package.test.ts calls '
      + 'ts.preProcessFile, Stryker\'s checker; and for the build, whose JavaScript 7 emits byte for byte the same (only source maps and the '
      + 'order of unions in .d.ts differ): one emitter for the gateway, the tests\' ensureBuilt and the previous release\'s build keeps them '
      + 'in step until 7 can be the only TypeScript.',
  },
  '@types/node': {
    latest: '26',
    why: 'Kept on the major of our Node floor (engines.node, 22): types of a newer Node would let code call APIs Node 22 lacks and still type-check.',
  },
  argon2: {
    latest: '0.45',
    why: '0.45 writes hashes with their parameters as m,p,t, against the PHC string format (m,t,p) that libargon2-based verifiers parse strictly '
      + '(ranisalt/node-argon2 issue 559); test/auth/hasher.test.ts and login.test.ts check the order.',
  },
};

/** The part of a version that npm's caret range holds fixed: the major, or 0.minor below 1.0. */
function rangeKey(version) {
  const [major, minor] = version.split('.');
  return major === '0' ? `0.${minor}` : major;
}

let report;
try {
  report = execFileSync('npm', ['outdated', '--json'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
} catch (err) {
  // npm outdated exits 1 when anything is outdated; its JSON is on stdout all the same.
  report = err.stdout;
}
const majorsBehind = Object.entries(JSON.parse(report || '{}'))
  .filter(([, v]) => v.current && v.latest && rangeKey(v.current) !== rangeKey(v.latest));
const line = (name, v) => `${name.padEnd(40)} ${v.current.padEnd(10)} → ${v.latest}`;
const isHeld = ([name, v]) => HELD_BACK[name]?.latest === rangeKey(v.latest);
const behind = majorsBehind.filter((entry) => !isHeld(entry));
const held = majorsBehind.filter(isHeld);
if (behind.length === 0) {
  console.log('every dependency is on its latest major' + (held.length ? `, except ${held.length} held back on purpose:` : ''));
} else {
  console.log(`${behind.length} behind a major (name, installed → latest):\n${behind.map(([name, v]) => line(name, v)).join('\n')}`);
  if (held.length) console.log(`\nand ${held.length} held back on purpose:`);
  process.exitCode = 1;
}
for (const [name, v] of held) console.log(`${line(name, v)}\n  why: ${HELD_BACK[name].why}`);

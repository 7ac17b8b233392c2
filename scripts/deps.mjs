// npm run deps: the dependencies a major version (or, below 1.0, a minor one) behind their latest
// release, so that the next drift is seen when it starts, not found a year later (issue 47).
// Exit 1 when any is behind, so a scheduled job can alert on it; prints nothing else to parse.
import { execFileSync } from 'node:child_process';

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
const outdated = Object.entries(JSON.parse(report || '{}'))
  .filter(([, v]) => v.current && v.latest && rangeKey(v.current) !== rangeKey(v.latest))
  .map(([name, v]) => `${name.padEnd(40)} ${v.current.padEnd(10)} → ${v.latest}`);
if (outdated.length === 0) {
  console.log('every dependency is on its latest major');
} else {
  console.log(`${outdated.length} behind a major (name, installed → latest):\n${outdated.join('\n')}`);
  process.exitCode = 1;
}

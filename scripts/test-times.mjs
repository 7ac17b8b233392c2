// .ci/run's report of a test tier: `node scripts/test-times.mjs <vitest json report> <tier>` prints
// the tier's files, their total time in tests, and the 10 slowest files (issue 69: the tiers must
// keep fitting CI's 45 minutes, and the file that grows is the one to look at). A file's time is
// from its first hook to its last (vitest's json reporter: startTime to endTime), so a gateway
// started in beforeAll counts; importing the file's modules does not. Every failed test is then
// listed with its failure (its first 30 lines, each cut at 3,000 characters), each line starting
// with "FAILED", so that .ci/run can repeat them in its closing summary: a CI log is often read
// from its end only, and a failure that shows up once in many runs (the failover test's counts)
// must be readable from there.
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';

const [report, tier = 'tests', suiteErrorsFile] = process.argv.slice(2);
if (report === undefined) {
  console.error('usage: node scripts/test-times.mjs <vitest json report> [tier] [suite errors json]');
  process.exit(2);
}
/** What scripts/suite-errors-reporter.mjs wrote, when it did. @type {{ file: string, where: string, message: string }[]} */
const suiteErrors = suiteErrorsFile && existsSync(suiteErrorsFile) ? JSON.parse(readFileSync(suiteErrorsFile, 'utf8')) : [];

/** @typedef {{ fullName: string, status: string, failureMessages: string[] }} TestResult */
/** @type {{ testResults: { name: string, startTime: number, endTime: number, status: string, message?: string, assertionResults: TestResult[] }[] }} */
const json = JSON.parse(readFileSync(report, 'utf8'));
const files = json.testResults
  .map((file) => ({ name: path.relative(process.cwd(), file.name), seconds: (file.endTime - file.startTime) / 1000, status: file.status }))
  .sort((a, b) => b.seconds - a.seconds);
const total = files.reduce((sum, file) => sum + file.seconds, 0);

console.log(`${tier}: ${files.length} files, ${total.toFixed(0)} s in tests (summed over files); the 10 slowest:`);
for (const file of files.slice(0, 10)) {
  console.log(`  ${file.seconds.toFixed(1).padStart(7)} s  ${file.name}${file.status === 'passed' ? '' : ` (${file.status})`}`);
}

for (const file of json.testResults) {
  const name = path.relative(process.cwd(), file.name);
  const failed = file.assertionResults.filter((test) => test.status === 'failed');
  for (const test of failed) console.log(`FAILED ${name} > ${test.fullName}: ${shown(test.failureMessages[0])}`);
  // A file can fail with no failed test: an error in a hook or at import. vitest's JSON report
  // keeps no message for a hook's error; scripts/suite-errors-reporter.mjs's file has it.
  if (failed.length === 0 && file.status === 'failed') {
    const errors = suiteErrors.filter((error) => error.file === name);
    if (errors.length === 0) console.log(`FAILED ${name}: ${shown(file.message || '(an error in a hook: the log above shows it)')}`);
    for (const error of errors) console.log(`FAILED ${name} > ${error.where}: ${shown(error.message)}`);
  }
}

/** A failure's first lines, the ones after the first marked "FAILED |" for .ci/run's summary. @param {string | undefined} text */
function shown(text) {
  const lines = (text ?? '(no message)').trim().split('\n').slice(0, 30).map((line) => line.slice(0, 3000));
  return lines.join('\nFAILED | ');
}

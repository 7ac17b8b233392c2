// A vitest reporter for .ci/run: the errors of hooks (a beforeAll that throws) and of files that
// fail to load, written as JSON to $SUITE_ERRORS_FILE for scripts/test-times.mjs. vitest's json
// reporter keeps none of them (a file whose beforeAll threw shows "failed" with its tests
// skipped and an empty message), so CI's closing summary could only say "the log above shows
// it", and the log kept of a CI run is its tail.
import { writeFileSync } from 'node:fs';

export default class SuiteErrorsReporter {
  /** @param {ReadonlyArray<import('vitest/node').TestModule>} modules */
  onTestRunEnd(modules) {
    const out = process.env.SUITE_ERRORS_FILE;
    if (!out) return;
    const failures = [];
    for (const module of modules) {
      const file = module.relativeModuleId;
      for (const error of module.errors()) failures.push({ file, where: '(the file itself)', message: described(error) });
      for (const suite of module.children.allSuites()) {
        for (const error of suite.errors()) failures.push({ file, where: suite.fullName, message: described(error) });
      }
    }
    writeFileSync(out, JSON.stringify(failures));
  }
}

/** @param {{ message?: string, stack?: string, name?: string }} error */
function described(error) {
  const text = error.stack || `${error.name ?? 'Error'}: ${error.message ?? '(no message)'}`;
  // vitest's own frames say nothing about the failure and would fill the summary's 30 lines.
  return text.split('\n').filter((line) => !line.includes('/node_modules/')).join('\n');
}

// The gateway runs on the Node versions package.json's `engines` allows (issue 27): on an older
// one it refuses at once with one line, rather than start and fail later on an API that is
// missing, or serve slower than measured. Imported first by the commands, so nothing else runs
// before it.
import { readFileSync } from 'node:fs';

/** One line saying what is needed, when `version` is older than `engines` (">=X.Y.Z"); undefined otherwise. */
export function nodeVersionProblem(version: string, engines: string): string | undefined {
  const floor = /^>=(\d+)\.(\d+)\.(\d+)$/.exec(engines.trim());
  if (!floor) return undefined;
  const need = floor.slice(1).map(Number);
  const have = version.replace(/^v/, '').split('.').map((part) => Number.parseInt(part, 10) || 0);
  for (let i = 0; i < 3; i++) {
    if (have[i]! > need[i]!) return undefined;
    if (have[i]! < need[i]!) {
      return `gateway: Node.js ${need.join('.')} or newer is needed, this is ${version.replace(/^v?/, 'v')} (npm start and npm test run on the one npm install brings; otherwise install a newer Node.js)`;
    }
  }
  return undefined;
}

const { engines } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { engines: { node: string } };
const problem = nodeVersionProblem(process.versions.node, engines.node);
if (problem) {
  process.stderr.write(`${problem}\n`);
  process.exit(1);
}

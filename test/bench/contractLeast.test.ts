// npm run bench and npm run instructions measure the gateway against the shared reference
// (../shared/bench/contract-least.mjs beside the project), or, in a clone of the project alone
// (CI), against the copy vendored in bench/: a copy that drifted would move every ratio to the
// floor and to the contract's least without a word, so it must be the reference byte for byte.
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const shared = path.resolve(root, '../shared/bench/contract-least.mjs');
const vendored = path.join(root, 'bench/contract-least.mjs');

describe('the bench\'s copy of the contract\'s least', () => {
  it('is the shared reference byte for byte', ({ skip }) => {
    if (!existsSync(shared)) skip(`no ${shared} beside the project (a clone of it alone): the vendored copy is all there is`);
    expect(readFileSync(vendored).equals(readFileSync(shared)), `${vendored} differs from ${shared}: copy it again`).toBe(true);
  });
});

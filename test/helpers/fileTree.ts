// A folder of the test's own holding some files (path → text, subfolders made as needed): mail
// templates, a gateway.yaml beside them. Removed by the test's afterAll (rmSync, recursive).
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

/** Writes `files` (path → text) under `dir`. */
export function writeTree(dir: string, files: Record<string, string>): void {
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(dir, name)), { recursive: true });
    writeFileSync(path.join(dir, name), text);
  }
}

/** A new temporary folder, named from `prefix`, holding `files`. */
export function fileTree(prefix: string, files: Record<string, string>): string {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  writeTree(dir, files);
  return dir;
}

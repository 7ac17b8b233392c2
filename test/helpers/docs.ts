// The configuration examples of README.md and docs/*.md, read as a reader copies them: every
// ```yaml block. test/docs/examples.test.ts validates them all with the real loader, and feature
// tests run a named one as it is written (docsExample), so an example that goes stale fails the suite.
//
// In the Markdown, a block is named by an HTML comment on the line before its fence, a block
// that is deliberately a part of a configuration starts with a `# fragment` line, and the YAML of
// another program (Traefik, Envoy: docs/decisions.md) says so on its first line, a comment ending
// in `not a gateway configuration`:
//
//   <!-- example: routing -->
//   ```yaml
//   # fragment
//   …
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { expect } from 'vitest';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const NAME = /^<!--\s*example:\s*([\w-]+)\s*-->$/;

export interface DocsExample {
  /** The page, relative to the repository root (README.md, docs/routing-and-headers.md). */
  file: string;
  /** Line of the opening fence, from 1. */
  line: number;
  name: string | undefined;
  /** `# fragment` first line: a part of a configuration, not a whole one. */
  fragment: boolean;
  /** The block's text, as written. */
  text: string;
}

/** README.md and every page under docs/, relative to the repository root. */
export function docsPages(): string[] {
  const pages = readdirSync(`${ROOT}docs`).filter((f) => f.endsWith('.md')).sort();
  return ['README.md', ...pages.map((f) => `docs/${f}`)];
}

/** The fenced blocks of a page with their info string (`yaml`, `sh`, …). */
export function fencedBlocks(file: string): Array<{ lang: string; line: number; name: string | undefined; text: string }> {
  const lines = readFileSync(`${ROOT}${file}`, 'utf8').split('\n');
  const blocks: Array<{ lang: string; line: number; name: string | undefined; text: string }> = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\S*)\s*$/.exec(lines[i]!);
    if (!open) continue;
    const start = i;
    let end = i + 1;
    while (end < lines.length && !/^```\s*$/.test(lines[end]!)) end++;
    if (end === lines.length) throw new Error(`${file}:${start + 1}: a code block is never closed`);
    const name = start > 0 ? NAME.exec(lines[start - 1]!.trim())?.[1] : undefined;
    blocks.push({ lang: open[1]!, line: start + 1, name, text: `${lines.slice(start + 1, end).join('\n')}\n` });
    i = end;
  }
  return blocks;
}

const OTHER_PROGRAM = /^#.*not a gateway configuration\s*$/m;

/** Every ```yaml block of README.md and docs/*.md that is a gateway configuration. */
export function yamlExamples(): DocsExample[] {
  return docsPages().flatMap((file) => fencedBlocks(file)
    .filter((block) => block.lang === 'yaml' && !OTHER_PROGRAM.test(block.text.split('\n', 1)[0]!))
    .map(({ line, name, text }) => ({ file, line, name, fragment: /^#\s*fragment\b/.test(text), text })));
}

/**
 * The YAML text of the example named `name` on a docs page: `page` is a page of docs/ without
 * `.md` ('routing-and-headers'), or 'README'.
 */
export function docsExample(page: string, name: string): string {
  const file = page === 'README' ? 'README.md' : `docs/${page}.md`;
  const found = yamlExamples().filter((example) => example.file === file && example.name === name);
  if (found.length !== 1) throw new Error(`${file}: ${found.length} yaml examples named ${JSON.stringify(name)}, expected one`);
  return found[0]!.text;
}

/**
 * The text of the block named `name` on a docs page, whatever its language: the proxy
 * configurations of docs/decisions.md (```nginx, ```caddy), which tests run as they are written.
 */
export function docsBlock(page: string, name: string): string {
  const file = page === 'README' ? 'README.md' : `docs/${page}.md`;
  const found = fencedBlocks(file).filter((block) => block.name === name);
  if (found.length !== 1) throw new Error(`${file}: ${found.length} blocks named ${JSON.stringify(name)}, expected one`);
  return found[0]!.text;
}

/** What each comment of a block says its output is: `# …` lines, and `command   # …` ends of lines. */
export function shownOutput(block: string): string[] {
  return block.split('\n').flatMap((line) => {
    const comment = /^\s*# (.*)$/.exec(line) ?? /\S\s{2,}# (.*)$/.exec(line);
    return comment ? [comment[1]!.trim()] : [];
  });
}

/** `shown` found in `output` in order, `…` standing for anything. */
export function expectShown(output: string, shown: string[]): void {
  let from = 0;
  for (const text of shown) {
    const pattern = new RegExp(text.split('…').map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('.*?'), 's');
    const match = pattern.exec(output.slice(from));
    expect(match, `${JSON.stringify(text)} in:\n${output.slice(from)}`).not.toBeNull();
    from += match!.index + match![0].length;
  }
}

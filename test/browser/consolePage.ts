// What the console's browser tests share (test/browser/console*.test.ts): a page axe-core can be
// injected into, axe's violations, screenshots into test-artifacts/console, a table's cells.
import { mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import type { Browser, BrowserContext, Page } from 'puppeteer-core';

const ARTIFACTS = path.join(import.meta.dirname, '../../test-artifacts/console');
const AXE = createRequire(import.meta.url).resolve('axe-core/axe.min.js');

/** A new page of `browser` (or of one of its contexts), 1200 × 900, that lets axe-core in. */
export async function consolePage(browser: Browser | BrowserContext): Promise<Page> {
  const page = await browser.newPage();
  // Only so axe can be injected: the console's own CSP refuses any script not its own.
  await page.setBypassCSP(true);
  await page.setViewport({ width: 1200, height: 900 });
  return page;
}

/** The rules axe-core finds broken on the page as it is now, and on how many elements. */
export async function axeViolations(page: Page): Promise<Array<{ id: string; nodes: number }>> {
  await page.addScriptTag({ path: AXE });
  return page.evaluate(async () => {
    const result = await (globalThis as unknown as { axe: { run(): Promise<{ violations: { id: string; nodes: unknown[] }[] }> } }).axe.run();
    return result.violations.map((v) => ({ id: v.id, nodes: v.nodes.length }));
  });
}

/** A full-page screenshot, test-artifacts/console/<name>.png. */
export async function screenshot(page: Page, name: string): Promise<void> {
  mkdirSync(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`), fullPage: true });
}

/** The cells' text of each row of the tables under `scope`. */
export function tableRows(page: Page, scope: string): Promise<string[][]> {
  return page.$$eval(`${scope} tbody tr`, (trs) => (trs as HTMLTableRowElement[]).map((tr) => [...tr.cells].map((td) => td.textContent ?? '')));
}

// A real browser for the tests: the system's Chromium (Debian package `chromium`; nothing can be
// downloaded here, so puppeteer-core drives the installed binary), headless, with a fresh profile
// each launch. Without Chromium the browser suites are skipped, unless REQUIRE_SERVICES=1 (CI, which
// installs it: .ci/run), where a missing browser fails the run.
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import puppeteer, { type Browser } from 'puppeteer-core';
import { describe } from 'vitest';
import { describeWithServices } from './gateway.js';

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const found = existsSync(CHROMIUM);
if (!found && process.env.REQUIRE_SERVICES === '1') {
  throw new Error(`REQUIRE_SERVICES=1 but there is no Chromium at ${CHROMIUM} (apt-get install chromium, or set CHROMIUM_PATH)`);
}
if (!found) console.warn(`\n[tests] no Chromium at ${CHROMIUM}: the browser suites are skipped\n`);

/** describe() for suites that need Chromium, Postgres and Redis. */
export const describeWithBrowser = found ? describeWithServices : describe.skip;

export interface TestBrowser {
  browser: Browser;
  close(): Promise<void>;
}

export async function launchBrowser(): Promise<TestBrowser> {
  const userDataDir = mkdtempSync(path.join(tmpdir(), 'gw-chromium-'));
  const launch = () => puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    userDataDir,
    // A machine just started reads Chromium from a cold disk: more than puppeteer's 30 s may pass.
    timeout: 90_000,
    // No sandbox (tests may run as root, in containers); nothing that phones home or updates itself.
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
  // Once more when Chromium fails to start (it happened once in CI, with nothing of the gateway's
  // involved yet); the first failure is printed, so a browser that never starts still fails the suite.
  const browser = await launch().catch((err: unknown) => {
    console.warn(`[tests] Chromium did not start, trying once more: ${String(err)}`);
    return launch();
  });
  return {
    browser,
    close: async () => {
      await browser.close();
      rmSync(userDataDir, { recursive: true, force: true });
    },
  };
}

export interface StaticSite {
  /** The site's origin: http://127.0.0.1:PORT */
  origin: string;
  close(): Promise<void>;
}

/** A web server of its own origin that serves `file` at `/` (and nothing else). */
export async function serveFile(file: string): Promise<StaticSite> {
  const html = readFileSync(file);
  const server = http.createServer((req, res) => {
    if (req.url?.split('?', 1)[0] !== '/') {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(html);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}

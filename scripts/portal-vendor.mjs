#!/usr/bin/env node
// The portal's third-party scripts, vendored into portal/ (docs/architecture.md says why): uPlot's
// browser build and style copied as they ship, and the qrcode package's encoder (CommonJS, with no
// browser build of its own) bundled into one ES module by rolldown, the bundler vitest's vite
// already installs. Run after updating either package; test/portal/vendor.test.ts fails while the
// copies in portal/ differ from what this writes.
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const require = createRequire(import.meta.url);
const version = (name) => JSON.parse(readFileSync(require.resolve(`${name}/package.json`), 'utf8')).version;

/** What portal/ should hold, file by file: name → contents. */
export async function vendored() {
  const { rolldown } = await import('rolldown');
  const bundle = await rolldown({ input: require.resolve('qrcode/lib/core/qrcode.js'), logLevel: 'silent' });
  const { output } = await bundle.generate({ format: 'esm', minify: true });
  await bundle.close();
  return {
    'uplot.js': readFileSync(require.resolve('uplot/dist/uPlot.iife.min.js'), 'utf8'),
    'uplot.css': readFileSync(require.resolve('uplot/dist/uPlot.min.css'), 'utf8'),
    'qrcode.js': `/*! qrcode ${version('qrcode')} (MIT), lib/core/qrcode.js bundled by scripts/portal-vendor.mjs */\n${output[0].code}`,
  };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  for (const [name, text] of Object.entries(await vendored())) {
    writeFileSync(path.join(ROOT, 'portal', name), text);
    console.log(`portal/${name}: ${Math.round(text.length / 1024)} KB`);
  }
}

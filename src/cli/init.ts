// `gateway init`: a commented gateway.yaml to start from (CONTRACT §28), never over an existing one.
// The profiles are files shipped with the package, so what init writes is what the docs and the
// tests read: `spec` is the repository's own gateway.yaml, `public-api` profiles/public-api.yaml.
import { writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { resolveConfigPath } from '../config/load.js';
import { CommandError, UsageError, type Args } from './command.js';

export const PROFILES = {
  spec: fileURLToPath(new URL('../../gateway.yaml', import.meta.url)),
  'public-api': fileURLToPath(new URL('../../profiles/public-api.yaml', import.meta.url)),
} as const;

export async function initCommand({ config, values }: Args): Promise<number> {
  const profile = String(values.profile ?? 'spec');
  if (!Object.hasOwn(PROFILES, profile)) throw new UsageError(`--profile: unknown profile ${JSON.stringify(profile)}; expected ${Object.keys(PROFILES).join(' or ')}`);
  const file = resolveConfigPath(config, process.env);
  const text = await readFile(PROFILES[profile as keyof typeof PROFILES], 'utf8');
  try {
    // wx: created here or not at all; an operator's file is never replaced, even by a race.
    writeFileSync(file, text, { flag: 'wx', mode: 0o644 });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') throw new CommandError(`${file} exists: init never overwrites a configuration (move it away, or name another file with --config)`);
    throw err;
  }
  console.log(`${file}: written (profile ${profile}); next: \`npx gateway check${config ? ` --config ${config}` : ''}\` shows its routes, \`npx gateway start\` serves them`);
  return 0;
}

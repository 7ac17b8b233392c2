// The double's data directory (`--data DIR`, default ./stripe-fake): its webhook secret, made once
// and kept (so a gateway configured with it works across restarts of the fake, as `stripe listen`'s
// does), the objects it holds (state.json, written after each change), and the address of the fake
// running on it (url), where `gateway stripe-fake trigger --data DIR` finds it. Nothing here reads
// STRIPE_WEBHOOK_SECRET: the double makes its own secret, never one of a real endpoint.
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { FakeState } from './fake.js';

export const DEFAULT_DATA_DIR = './stripe-fake';

export interface DataDir {
  dir: string;
  /** whsec_…: made on the first start with this directory, the same ever after. */
  secret: string;
  state: FakeState | undefined;
  save(state: FakeState): void;
  /** Says where the fake on this directory listens; undone by `forget` when it stops. */
  announce(url: string): void;
  forget(): void;
}

export function openDataDir(dir: string): DataDir {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const secretFile = path.join(dir, 'webhook-secret');
  if (!existsSync(secretFile)) writeFileSync(secretFile, `whsec_${randomBytes(32).toString('hex')}\n`, { mode: 0o600, flag: 'wx' });
  const secret = readFileSync(secretFile, 'utf8').trim();
  const stateFile = path.join(dir, 'state.json');
  const urlFile = path.join(dir, 'url');
  return {
    dir, secret,
    state: existsSync(stateFile) ? JSON.parse(readFileSync(stateFile, 'utf8')) as FakeState : undefined,
    save(state) {
      // Whole or not at all: a crash mid-write leaves the previous state.
      writeFileSync(`${stateFile}.tmp`, JSON.stringify(state));
      renameSync(`${stateFile}.tmp`, stateFile);
    },
    announce: (url) => writeFileSync(urlFile, `${url}\n`),
    forget: () => rmSync(urlFile, { force: true }),
  };
}

/** The URL of the fake running on `dir`, or undefined when none announced itself there. */
export function runningFakeUrl(dir: string): string | undefined {
  const file = path.join(dir, 'url');
  return existsSync(file) ? readFileSync(file, 'utf8').trim() : undefined;
}

// docs/hooks.md as a reader uses it: the example configuration, loaded verbatim by the real loader
// with GATEWAY_HOOKS_SECRET from the environment, and the page's verification snippet, run as
// written (a module beside the repository's node_modules), on what a gateway sends.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { ROOT } from '../helpers/cli.js';
import { docsBlock, docsExample } from '../helpers/docs.js';
import { closeSql, configProblems, describeWithServices, eventually, makeUser, startTestGateway, testConfigFromYaml, throwawayDatabase, type ThrowawayDatabase } from '../helpers/gateway.js';
import { HOOK_EVENTS } from '../../src/config/schema/hooks.js';
import { newHookSecret } from '../helpers/hookReceiver.js';
import { receiverCertificate, startReceiver, type Receiver } from '../helpers/webhookReceiver.js';

type Verify = (headers: Record<string, unknown>, body: string) => { type: string; data: Record<string, unknown> } | null;

describeWithServices('docs/hooks.md', () => {
  let dir: string;
  let receiver: Receiver;
  let db: ThrowawayDatabase;
  const secret = newHookSecret();
  const saved = process.env.GATEWAY_HOOKS_SECRET;

  beforeAll(async () => {
    dir = mkdtempSync(path.join(ROOT, '.hooks-docs-'));
    receiver = await startReceiver(receiverCertificate());
    db = await throwawayDatabase({ migrated: true });
  });
  afterAll(async () => {
    rmSync(dir, { recursive: true, force: true });
    await receiver?.close();
    await db?.drop();
    await closeSql();
    if (saved === undefined) delete process.env.GATEWAY_HOOKS_SECRET;
    else process.env.GATEWAY_HOOKS_SECRET = saved;
  });

  it('the example reads its secret from ${GATEWAY_HOOKS_SECRET}, sends every event by default, and is refused without it', () => {
    const example = docsExample('hooks', 'hooks');
    const config = testConfigFromYaml(example, { GATEWAY_HOOKS_SECRET: secret });
    expect(config.hooks).toEqual({ url: 'https://backend.example.com/gateway-events', secrets: [secret], allowPrivateNetworks: false, events: [...HOOK_EVENTS] });
    expect(testConfigFromYaml(example.replace(/ {2}events:[^\]]*\][^\n]*\n/, ''), { GATEWAY_HOOKS_SECRET: secret }).hooks!.events).toEqual([...HOOK_EVENTS]);
    expect(configProblems(example).join('\n')).toContain('GATEWAY_HOOKS_SECRET');
    expect(configProblems(example.replace('${GATEWAY_HOOKS_SECRET}', 'whsec_short')).join('\n')).toContain('hooks.secrets[0]: expected a signing secret whsec_');
    // 15 bytes is refused, 16 (and the 20 other tools often make) accepted.
    const of = (bytes: number) => `whsec_${Buffer.alloc(bytes, 7).toString('base64')}`;
    expect(configProblems(example.replace('${GATEWAY_HOOKS_SECRET}', of(15))).join('\n')).toContain('hooks.secrets[0]: expected a signing secret whsec_');
    expect(configProblems(example.replace('${GATEWAY_HOOKS_SECRET}', of(16)))).toEqual([]);
    expect(configProblems(example.replace('${GATEWAY_HOOKS_SECRET}', of(20)))).toEqual([]);
    expect(configProblems(example.replace('https://backend', 'http://backend').replace('${GATEWAY_HOOKS_SECRET}', secret)).join('\n')).toContain('hooks.url: expected an https:// URL');
  });

  it('the verification snippet accepts what the gateway sends and refuses a forged body', async () => {
    // The example, pointed at the local receiver (loopback: allowed for this test only).
    const config = testConfigFromYaml(docsExample('hooks', 'hooks'), { GATEWAY_HOOKS_SECRET: secret });
    config.hooks = { ...config.hooks!, url: receiver.url, allowPrivateNetworks: true };
    const gw = await startTestGateway({ ...config, storage: { ...config.storage, postgres: db.storage.postgres, redisKeyPrefix: db.storage.redisKeyPrefix } });
    try {
      const user = await makeUser(gw);
      await eventually(() => receiver.deliveries.length >= 1, 10_000);
      const file = path.join(dir, 'verify-hook.mjs');
      writeFileSync(file, docsBlock('hooks', 'verify-hook'));
      process.env.GATEWAY_HOOKS_SECRET = secret;
      const { verifyHook } = (await import(pathToFileURL(file).href)) as { verifyHook: Verify };
      const d = receiver.deliveries[0]!;
      expect(verifyHook(d.headers, d.body)).toMatchObject({ type: 'user.created', data: { user_id: user.id, email: user.email, plan: 'free' } });
      expect(verifyHook(d.headers, d.body.replace('"free"', '"pro"'))).toBeNull();
      expect(verifyHook({ ...d.headers, 'webhook-signature': undefined }, d.body)).toBeNull();
    } finally {
      await gw.close();
    }
  });
});

// bench/least-with-storage.mjs runs the contract's least in a process that also holds a Postgres
// and a Redis connection: npm run bench and npm run instructions set it beside the plain least to
// tell what a gateway's sockets alone cost (docs/benchmark.md). A copy that no longer relayed as the
// reference does, or that quietly held no connection, would report a cost that is not there.
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import { closeSql, describeWithServices, eventually, sql, testServices } from '../helpers/gateway.js';
import { sparePort } from '../helpers/ports.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const NAME = 'least-with-storage';

describeWithServices('the contract\'s least holding a Postgres and a Redis connection', () => {
  let upstream: EchoUpstream;
  let least: ChildProcess;
  let url: string;

  beforeAll(async () => {
    upstream = await startEchoUpstream();
    upstream.handle = (_req, res) => {
      res.setHeader('x-request-id', 'the-upstream-s-own');
      res.end('{"ok":true}');
      return true;
    };
    const port = await sparePort();
    least = spawn(process.execPath, [path.join(root, 'bench/least-with-storage.mjs')], {
      cwd: root,
      stdio: ['ignore', 'ignore', 'inherit'],
      env: {
        PATH: process.env.PATH, PORT: String(port), CONTRACT: 'public',
        UPSTREAM: upstream.url,
        LEAST_REFERENCE: path.join(root, 'bench/contract-least.mjs'),
        STORAGE_POSTGRES: testServices!.postgres, STORAGE_REDIS: testServices!.redis,
      },
    });
    url = `http://127.0.0.1:${port}`;
    await eventually(async () => (await fetch(`${url}/ready`).catch(() => undefined))?.status === 200, 20_000, 100);
  }, 30_000);

  afterAll(async () => {
    least?.kill();
    await upstream?.close();
    await closeSql();
  });

  it('relays as the reference does: the contract\'s headers upstream, its own request id back', async () => {
    const res = await fetch(`${url}/some/path?q=1`, { headers: { 'x-forwarded-for': '203.0.113.9' } });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ ok: true });
    const sent = upstream.hits.at(-1)!.headers;
    expect(sent['x-forwarded-for']).toBe('127.0.0.1');
    expect(sent['x-forwarded-proto']).toBe('http');
    expect(res.headers.get('x-request-id')).toBe(sent['x-request-id']);
    expect(sent['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('holds one Postgres connection LISTENing and one Redis connection, each used again', async () => {
    const backends = await sql<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE application_name = $1', [NAME]);
    expect(backends).toHaveLength(1);
    // The once-a-second query replaces the LISTEN as the backend's last statement.
    await eventually(async () => (await sql<{ query: string }>('SELECT query FROM pg_stat_activity WHERE pid = $1', [backends[0]!.pid]))[0]?.query === 'SELECT 1', 5_000, 100);
    const redis = new Redis(testServices!.redis);
    try {
      const clients = (await redis.client('LIST') as string).split('\n').filter((line) => line.includes(` name=${NAME} `));
      expect(clients).toHaveLength(1);
      expect(clients[0]).toMatch(/ cmd=get /);
    } finally {
      redis.disconnect();
    }
  });
});

// storage.redis (CONTRACT §9): one URL, a Sentinel group or a Cluster. Addresses are read into
// { host, port } here, so the connection code parses nothing.
import { z } from 'zod';
import { optionalText, text } from './values.js';

const HOST_PORT = /^(?:\[([0-9A-Fa-f:.]+)\]|([^\s:[\]]+)):(\d{1,5})$/;
const hostPort = z.string().meta({ pattern: HOST_PORT.source, description: 'host:port ([v6 address]:port for IPv6).', title: 'host:port address', examples: ['10.0.0.1:26379', '10.0.0.2:26379'] })
  .transform((text, ctx) => {
    const m = HOST_PORT.exec(text.trim());
    const port = Number(m?.[3]);
    if (!m || port < 1 || port > 65535) {
      ctx.addIssue({ code: 'custom', message: `expected host:port such as 10.0.0.1:26379, got ${JSON.stringify(text)}` });
      return z.NEVER;
    }
    return { host: (m[1] ?? m[2])!, port };
  });
const REDIS_URL = /^(rediss?:\/\/.*)?$/;
const redisUrl = text.refine((url) => REDIS_URL.test(url), 'expected a redis:// or rediss:// URL (or a sentinels or cluster map)')
  .meta({ pattern: REDIS_URL.source, description: 'A redis:// or rediss:// URL; empty: no Redis.' });
const redisSentinel = z.strictObject({
  sentinels: z.array(hostPort).min(1).meta({ description: 'Sentinel addresses (host:port); the gateway asks them for the master of `name`, and again after a failover.' }),
  name: z.string().min(1).meta({ examples: ['mymaster'], description: 'The master group name the sentinels monitor (sentinel.conf `sentinel monitor NAME …`).' }),
  password: optionalText,
  sentinelPassword: optionalText,
});
const redisCluster = z.strictObject({
  cluster: z.array(hostPort).min(1).meta({ description: 'Some nodes of the Redis Cluster (host:port); the others are discovered.' }),
  password: optionalText,
});
export const redisSchema = z.union([redisUrl, redisSentinel, redisCluster], {
  error: 'expected a redis:// or rediss:// URL, a map with sentinels and name, or a map with cluster',
});
export type RedisSettings = z.output<typeof redisSchema>;

// `gateway health`: what a container's health check runs every few seconds.
import { get } from 'node:http';
import { loadConfig } from '../config/load.js';
import { CommandError, print, type Args } from './command.js';

export const HEALTH_TIMEOUT_MS = 2000;

export async function health({ config: configPath }: Args): Promise<number> {
  const { config } = loadConfig(configPath);
  const { host, port } = config.server;
  if (port === 0) throw new CommandError('server.port is 0 (any free port): there is no port to ask');
  // A listener on every address is reached on loopback; an IPv6 literal goes in brackets.
  const target = host === '0.0.0.0' || host === '' ? '127.0.0.1' : host === '::' ? '::1' : host;
  const url = `http://${target.includes(':') ? `[${target}]` : target}:${port}/healthz`;
  // node:http rather than fetch: no undici to load and no kept-alive socket to wait for, on a
  // command that runs every few seconds for the life of the container.
  const status = await new Promise<number>((resolve, reject) => {
    const req = get(url, { agent: false, timeout: HEALTH_TIMEOUT_MS }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('timeout', () => req.destroy(new Error(`no answer within ${HEALTH_TIMEOUT_MS} ms`)));
    req.on('error', (err: NodeJS.ErrnoException) => reject(new CommandError(`unhealthy: GET ${url}: ${err.code ?? err.message}`)));
  });
  if (status !== 200) throw new CommandError(`unhealthy: GET ${url} answered ${status}`);
  return print(`healthy: GET ${url} answered 200`);
}

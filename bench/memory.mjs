// Memory a connection holds while it waits (issue 48, item 9): what one idle keep-alive connection
// and one open WebSocket cost the gateway, next to what they cost the Node floor that relays upgrades
// (bench/common.mjs runUpgradeFloor: an upgrade as bytes piped both ways). Measured as the growth of the process's
// resident memory (/proc/<pid>/status, VmRSS) while BENCH_IDLE connections (1,000) are open after
// one request each, divided by their number; the median of BENCH_MEMORY_ROUNDS (3) rounds, the
// floor and the gateway in turn, after one round of each unmeasured. Resident memory grows by pages and V8 by heap chunks: with a
// thousand connections those steps are a small share of the figure, not its whole.
import net from 'node:net';
import { readFileSync } from 'node:fs';
import { positive, sleep } from './common.mjs';

const env = process.env;
const IDLE = Math.round(positive(env.BENCH_IDLE, 1_000));
const ROUNDS = Math.round(positive(env.BENCH_MEMORY_ROUNDS, 3));
// Long enough for the answers' garbage to be the young generation's, not the figure's.
const SETTLE_MS = 1_500;

/** Resident memory of `pid` in bytes; undefined without /proc. */
function residentBytes(pid) {
  try {
    const kb = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    return kb === undefined ? undefined : Number(kb) * 1024;
  } catch {
    return undefined;
  }
}

/** One keep-alive connection that sent one GET of `pathname` with `headers` and read its answer; resolves with the open socket. */
function idleConnection(url, pathname, headers) {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname, () => {
      const lines = Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join('');
      socket.write(`GET ${pathname} HTTP/1.1\r\nHost: ${hostname}:${port}\r\n${lines}\r\n`);
    });
    let seen = '';
    const onData = (chunk) => {
      seen += chunk.toString('latin1');
      // The echo upstream answers a small JSON body with Content-Length: the body's end is its closing brace.
      if (/^HTTP\/1\.1 200/.test(seen) && seen.includes('\r\n\r\n') && seen.trimEnd().endsWith('}')) {
        socket.off('data', onData);
        resolve(socket);
      } else if (/^HTTP\/1\.1 [^2]/.test(seen)) reject(new Error(`${url}${pathname} answered ${seen.slice(0, 12)}`));
    };
    socket.on('data', onData);
    socket.once('error', reject);
  });
}

/** One open WebSocket to `url` + `pathname` (ws), with `headers` on its handshake. */
async function openWebSocket(url, pathname, headers) {
  const { default: WebSocket } = await import('ws');
  const ws = new WebSocket(`${url.replace(/^http/, 'ws')}${pathname}`, { headers, perMessageDeflate: false });
  await new Promise((resolve, reject) => {
    ws.once('open', resolve);
    ws.once('error', reject);
  });
  return ws;
}

/** Bytes a connection made by `open` holds in process `pid`: resident memory with IDLE of them open, less before. */
async function perConnection(pid, open, close) {
  await sleep(SETTLE_MS);
  const before = residentBytes(pid);
  const held = [];
  // In batches: a thousand handshakes at once would measure the burst, not the connections.
  for (let i = 0; i < IDLE; i += 50) held.push(...(await Promise.all(Array.from({ length: Math.min(50, IDLE - i) }, open))));
  await sleep(SETTLE_MS);
  const after = residentBytes(pid);
  for (const c of held) close(c);
  await sleep(SETTLE_MS);
  return before === undefined || after === undefined ? undefined : (after - before) / IDLE;
}

const median = (values) => {
  const sorted = values.filter((v) => v !== undefined).sort((a, b) => a - b);
  return sorted.length ? sorted[Math.floor(sorted.length / 2)] : undefined;
};

/**
 * The memory rows: `http` ({ floor, gateway, pathname, headers }) for idle keep-alive connections,
 * `ws` (the same, to a WebSocket route and a floor in front of the WebSocket upstream) for sockets.
 */
export async function measureMemory({ http, ws }) {
  const rows = [];
  for (const [name, spec, connect, close] of [
    ['idle keep-alive connection', http, idleConnection, (s) => s.destroy()],
    ['open WebSocket', ws, openWebSocket, (s) => s.terminate()],
  ]) {
    const open = (target) => () => connect(target.url, spec.pathname, spec.headers);
    if (!spec) continue;
    // A first round unmeasured: the heap's first growth and the code compiled for the first
    // connections would be counted against them.
    await perConnection(spec.floor.pid, open(spec.floor), close);
    await perConnection(spec.gateway.pid, open(spec.gateway), close);
    const floor = [];
    const gateway = [];
    for (let round = 0; round < ROUNDS; round++) {
      floor.push(await perConnection(spec.floor.pid, open(spec.floor), close));
      gateway.push(await perConnection(spec.gateway.pid, open(spec.gateway), close));
    }
    rows.push({ name, floor: median(floor), gateway: median(gateway) });
  }
  return rows;
}

export function printMemory(rows) {
  const kib = (bytes) => (bytes === undefined ? '-' : (bytes / 1024).toFixed(1));
  console.log(`\n| memory a connection holds (KiB, resident; ${IDLE.toLocaleString('en')} open, median of ${ROUNDS}) | Node floor | gateway | gateway ÷ floor |`);
  console.log('|---|---:|---:|---:|');
  for (const { name, floor, gateway } of rows) {
    const ratio = floor && gateway !== undefined ? (gateway / floor).toFixed(1) : '-';
    console.log(`| ${name} | ${kib(floor)} | ${kib(gateway)} | ${ratio} |`);
  }
}

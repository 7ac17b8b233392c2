// The contract's least (contract-least.mjs) inside fastify, for `node bench/profile.mjs` with
// PROFILE_LEAST_IN_FASTIFY=1 (issue 77): one catch-all route, an onRequest hook putting the request
// id on the answer and an onResponse hook, the reply hijacked once the upstream answers, as the
// gateway's proxied path was before the direct lane (src/proxy/directLane.ts). What it serves
// against the least alone is what fastify's request, reply, hooks and router cost a relay.
// PORT, UPSTREAM and CONTRACT (`public` or `auth`) from env; fastify and undici from the project.
import { randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import path from 'node:path';

const load = createRequire(path.join(process.cwd(), 'package.json'));
const { Agent } = load('undici');
const Fastify = load('fastify');
const upstream = new URL(process.env.UPSTREAM);
const auth = process.env.CONTRACT === 'auth';
const agent = new Agent({ keepAliveTimeout: 60_000, connections: 128, pipelining: 1 });
const HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'te', 'trailer', 'host']);
if (auth) HOP.add('authorization');

const app = Fastify({ genReqId: () => randomUUID(), http: { requireHostHeader: false } });
// Answers counted by status, as the gateway's metrics count them.
const answered = {};
app.addHook('onRequest', (request, reply, done) => { reply.header('x-request-id', request.id); done(); });
app.addHook('onResponse', (_request, reply, done) => { answered[reply.statusCode] = (answered[reply.statusCode] ?? 0) + 1; done(); });
app.removeAllContentTypeParsers();
app.addContentTypeParser('*', (_request, payload, done) => done(null, payload));
app.route({ method: ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS'], url: '/*', handler: (request, reply) => {
  const req = request.raw;
  const headers = {};
  for (const [k, v] of Object.entries(req.headers)) if (!HOP.has(k)) headers[k] = v;
  headers['x-forwarded-for'] = req.socket.remoteAddress;
  headers['x-forwarded-proto'] = 'http';
  headers['x-forwarded-host'] = req.headers.host;
  headers['x-request-id'] = request.id;
  if (auth) Object.assign(headers, { 'x-user-id': '42', 'x-user-plan': 'premium', 'x-user-email': 'premium@bench.test', 'x-auth-method': 'bearer' });
  const res = reply.raw;
  agent.dispatch({ origin: upstream.origin, path: req.url, method: req.method, headers, body: req.method === 'GET' || req.method === 'HEAD' ? null : req }, {
    onRequestStart() {},
    onResponseStart(_c, status, upstreamHeaders) {
      const out = reply.getHeaders();
      for (const [k, v] of Object.entries(upstreamHeaders)) if (!HOP.has(k)) out[k] = v;
      res.writeHead(status, out);
      reply.hijack();
    },
    onResponseData(_c, chunk) { res.write(chunk); },
    onResponseEnd() { res.end(); },
    onResponseError(_c, err) { if (!res.headersSent) { res.writeHead(502); res.end(); } else res.destroy(err); },
  });
} });
process.on('SIGTERM', () => process.exit(0));
await app.listen({ port: Number(process.env.PORT), host: '127.0.0.1' });

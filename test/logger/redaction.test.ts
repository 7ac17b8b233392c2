// The production logger (createLogger) censors what REDACT_PATHS names, wherever a handler puts it:
// pino's fixed paths plus censorNested for the `*.name` ones (kept off pino for speed).
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/telemetry/logger.js';

function capture(level = 'debug') {
  const lines: string[] = [];
  const sink = new Writable({ write(chunk, _enc, cb) { lines.push(String(chunk)); cb(); } });
  const log = createLogger(level, sink);
  return { log, lines, text: () => lines.join(''), last: () => JSON.parse(lines.at(-1)!) as Record<string, unknown> };
}

describe('createLogger redaction', () => {
  it('censors top-level secret keys and request or response headers', () => {
    const { log, text, last } = capture();
    log.info({ password: 'pw-top-1', refresh_token: 'rt-top-2', access_token: 'at-top-3', api_token: 'ak-top-4', secret: 'sec-top-5', token: 'tok-top-6', keep: 'visible' }, 'm');
    expect(last()).toMatchObject({ password: '[redacted]', token: '[redacted]', keep: 'visible' });
    log.info({ req: { method: 'GET', headers: { authorization: 'Bearer hdr-7', 'x-api-key': 'hdr-8', cookie: 'hdr-9', accept: 'json' } } }, 'm');
    expect(last()).toMatchObject({ req: { method: 'GET', headers: { authorization: '[redacted]', accept: 'json' } } });
    log.info({ headers: { authorization: 'Bearer hdr-10', 'x-api-key': 'hdr-11', cookie: 'hdr-12' } }, 'm');
    log.info({ res: { headers: { 'set-cookie': 'hdr-13' } } }, 'm');
    for (const secret of ['pw-top-1', 'rt-top-2', 'at-top-3', 'ak-top-4', 'sec-top-5', 'tok-top-6', 'hdr-7', 'hdr-8', 'hdr-9', 'hdr-10', 'hdr-11', 'hdr-12', 'hdr-13']) {
      expect(text()).not.toContain(secret);
    }
  });

  it('censors secret keys one level down, in log objects, errors and child bindings, without touching the caller\'s object', () => {
    const { log, text, last } = capture();
    const body = { email: 'a@example.test', password: 'pw-nested-1', password_hash: 'hash-2', refresh_token: 'rt-3', access_token: 'at-4', api_token: 'ak-5', secret: 'sec-6', token: 'tok-7' };
    log.info({ body }, 'm');
    expect(last()).toMatchObject({ body: { email: 'a@example.test', password: '[redacted]', token: '[redacted]' } });
    expect(body.password).toBe('pw-nested-1');

    const err = Object.assign(new Error('boom'), { token: 'tok-err-8', code: 'E_X' });
    log.error({ err }, 'failed');
    expect(last()).toMatchObject({ err: { message: 'boom', code: 'E_X', token: '[redacted]' } });
    expect(String((last().err as { stack: string }).stack)).toContain('boom');

    log.child({ user: { id: 1, secret: 'sec-child-9' } }).info('m');
    expect(last()).toMatchObject({ user: { id: 1, secret: '[redacted]' } });

    for (const secret of ['pw-nested-1', 'hash-2', 'rt-3', 'at-4', 'ak-5', 'sec-6', 'tok-7', 'tok-err-8', 'sec-child-9']) {
      expect(text()).not.toContain(secret);
    }
  });

  it('leaves lines without secrets as they are', () => {
    const { log, last } = capture();
    log.info({ route: '/x', reason: 'tokenInvalid', userId: 3, list: [{ token: 'not-one-level' }] }, 'request denied');
    expect(last()).toMatchObject({ msg: 'request denied', route: '/x', reason: 'tokenInvalid', userId: 3 });
  });
});

describe('a request\'s child logger (request.log: the request id alone)', () => {
  it('writes lines at enabled levels with the bindings, and drops the others', () => {
    const { log, lines, last } = capture('info');
    const child = log.child({ reqId: 'r-1' });
    child.debug({ route: '/x' }, 'not written');
    child.trace('not written');
    expect(lines).toHaveLength(0);
    child.info({ route: '/x', body: { password: 'pw-lazy-1' } }, 'written');
    expect(last()).toMatchObject({ level: 30, reqId: 'r-1', route: '/x', body: { password: '[redacted]' }, msg: 'written' });
    child.warn('plain message %s', 'formatted');
    expect(last()).toMatchObject({ level: 40, reqId: 'r-1', msg: 'plain message formatted' });
    child.child({ component: 'c' }).error('nested');
    expect(last()).toMatchObject({ level: 50, reqId: 'r-1', component: 'c', msg: 'nested' });
    expect(child.level).toBe('info');
    child.level = 'debug';
    child.debug('now written');
    expect(last()).toMatchObject({ level: 20, reqId: 'r-1', msg: 'now written' });
  });

  it('writes a line with fields exactly as a child would, the request id first', () => {
    const { log, lines } = capture('info');
    log.child({ reqId: 'r-3' }).info({ route: '/x', reason: 'tooManyRequests' }, 'request denied');
    // With options, the ordinary pino child.
    log.child({ reqId: 'r-3' }, { level: 'info' }).info({ route: '/x', reason: 'tooManyRequests' }, 'request denied');
    const [lazy, child] = lines.map((line) => line.replace(/"time":\d+,/, ''));
    expect(lazy).toBe(child);
    expect(lazy).toMatch(/^\{"level":30,"pid":\d+,"hostname":"[^"]*","reqId":"r-3","route":"\/x","reason":"tooManyRequests","msg":"request denied"\}\n$/);
  });

  it('makes an ordinary child when the route sets log options', () => {
    const { log, last } = capture('info');
    const child = log.child({ reqId: 'r-2' }, { level: 'debug' });
    child.debug('route-level debug');
    expect(last()).toMatchObject({ level: 20, reqId: 'r-2' });
  });
});

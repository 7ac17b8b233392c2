// The address rules alone (no services needed). The endpoint tests check the same cases end to end.
import { describe, expect, it } from 'vitest';
import { checkTarget, isPublicAddress, parseWebhookUrl, systemLookup, type LookupAll } from '../../src/webhooks/ssrf.js';

const fixed = (answers: Record<string, string[]>): LookupAll => async (host) => {
  const list = answers[host];
  if (!list) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
  return list.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
};

describe('webhook target rules', () => {
  it('accepts only well-formed https URLs', () => {
    for (const bad of ['', 'example.com/hook', 'http://example.com/hook', 'ftp://example.com/', 'https://', 'javascript:alert(1)', `https://example.com/${'a'.repeat(2100)}`]) {
      expect(parseWebhookUrl(bad), bad).toBeUndefined();
    }
    expect(parseWebhookUrl('https://hooks.example.com:8443/a?b=c')?.href).toBe('https://hooks.example.com:8443/a?b=c');
  });

  it('judges addresses: only public unicast passes', () => {
    const refused = [
      '127.0.0.1', '127.255.255.254', '10.1.2.3', '172.16.0.1', '192.168.1.1', '169.254.169.254', '100.64.0.1', '0.0.0.0',
      '224.0.0.1', '255.255.255.255', '240.0.0.1', '192.0.2.1', '198.18.0.1',
      '::1', '::', 'fe80::1', 'fc00::1', 'fd12:3456::1', 'ff02::1', '::ffff:127.0.0.1', '::ffff:10.0.0.1', '::ffff:169.254.169.254',
      '::7f00:1', '64:ff9b::7f00:1', '2002:7f00:1::1', '2001:db8::1', 'not-an-address',
    ];
    for (const address of refused) expect(isPublicAddress(address), address).toBe(false);
    for (const address of ['93.184.215.14', '8.8.8.8', '2606:4700:4700::1111', '::ffff:93.184.215.14']) expect(isPublicAddress(address), address).toBe(true);
  });

  it('reads the URL host the way the connection would (127.1, 2130706433, 0x7f000001, brackets)', async () => {
    for (const url of ['https://127.1/', 'https://2130706433/', 'https://0x7f000001/', 'https://017700000001/', 'https://[::1]/', 'https://[::ffff:127.0.0.1]/', 'https://0/']) {
      const check = await checkTarget(new URL(url), { allowPrivateNetworks: false, timeoutMs: 1000, lookup: fixed({}) });
      expect(check.kind, url).toBe('forbidden');
    }
  });

  it('refuses a public-looking name that resolves to a private address, even once among public ones', async () => {
    const lookup = fixed({ 'hooks.example.com': ['127.0.0.1'], 'mixed.example.com': ['93.184.215.14', '10.0.0.7'], 'ok.example.com': ['93.184.215.14'] });
    expect(await checkTarget(new URL('https://hooks.example.com/x'), { allowPrivateNetworks: false, timeoutMs: 1000, lookup })).toEqual({ kind: 'forbidden', address: '127.0.0.1' });
    expect(await checkTarget(new URL('https://mixed.example.com/x'), { allowPrivateNetworks: false, timeoutMs: 1000, lookup })).toEqual({ kind: 'forbidden', address: '10.0.0.7' });
    expect(await checkTarget(new URL('https://ok.example.com/x'), { allowPrivateNetworks: false, timeoutMs: 1000, lookup })).toEqual({ kind: 'ok', target: { address: '93.184.215.14', family: 4 } });
    expect((await checkTarget(new URL('https://nowhere.example.com/x'), { allowPrivateNetworks: false, timeoutMs: 1000, lookup })).kind).toBe('unresolved');
  });

  it('counts a name with no DNS answer within timeoutMs as unresolved, instead of waiting for the resolver', async () => {
    const silent: LookupAll = () => new Promise(() => {});
    const check = await checkTarget(new URL('https://stuck.example.com/x'), { allowPrivateNetworks: false, timeoutMs: 100, lookup: silent });
    expect(check).toEqual({ kind: 'unresolved', error: new Error('stuck.example.com: no DNS answer within 100 ms') });
  });

  it('refuses localhost names whatever DNS answers (RFC 6761)', async () => {
    const lookup = fixed({ 'localhost.': ['93.184.215.14'], 'api.localhost': ['93.184.215.14'] });
    for (const url of ['https://localhost/', 'https://localhost./', 'https://LocalHost:8443/', 'https://api.localhost/']) {
      expect((await checkTarget(new URL(url), { allowPrivateNetworks: false, timeoutMs: 1000, lookup })).kind, url).toBe('forbidden');
    }
  });

  it('takes an address in the URL as it is, with its family, and a name that resolves to nothing as unresolved', async () => {
    const allowed = { allowPrivateNetworks: true, timeoutMs: 1000, lookup: fixed({ 'empty.example.com': [] }) };
    expect(await checkTarget(new URL('https://[2001:db8::7]/x'), allowed)).toEqual({ kind: 'ok', target: { address: '2001:db8::7', family: 6 } });
    expect(await checkTarget(new URL('https://192.0.2.7/x'), allowed)).toEqual({ kind: 'ok', target: { address: '192.0.2.7', family: 4 } });
    expect(await checkTarget(new URL('https://empty.example.com/x'), allowed)).toEqual({ kind: 'unresolved', error: new Error('empty.example.com: no address') });
  });

  it('the system\'s lookup answers every address of a name, each with its family', async () => {
    expect(await systemLookup('127.0.0.1')).toEqual([{ address: '127.0.0.1', family: 4 }]);
    expect(await systemLookup('::1')).toEqual([{ address: '::1', family: 6 }]);
  });

  it('allowPrivateNetworks lets private targets through, still resolved once', async () => {
    const lookup = fixed({ 'hooks.example.com': ['127.0.0.1'] });
    expect(await checkTarget(new URL('https://hooks.example.com/x'), { allowPrivateNetworks: true, timeoutMs: 1000, lookup })).toEqual({ kind: 'ok', target: { address: '127.0.0.1', family: 4 } });
  });
});

// Domain names as CONTRACT §31 stores them (src/domains/names.ts) and the public mail domains no
// organization may claim (src/domains/publicMail.ts), without a gateway: one stored form for every
// spelling of a name, nothing stored that is no host name, no claim of a public suffix, an IP
// address or a mail provider. End to end (claims, verification, the re-check): test/orgs/domains.test.ts.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { claimable, emailDomain, normalizeDomain, txtNameOf } from '../../src/domains/names.js';
import { parseDomainList, publicMailDomains, SHIPPED_PUBLIC_MAIL_DOMAINS } from '../../src/domains/publicMail.js';

describe('a domain\'s stored form', () => {
  it('is one form for every spelling: lower-case, the A-label, no trailing dot, no surrounding space', () => {
    for (const spelling of ['Bücher.example', 'xn--bcher-kva.example.', 'XN--BCHER-KVA.EXAMPLE', '  bücher.EXAMPLE.  ']) {
      expect(normalizeDomain(spelling)).toBe('xn--bcher-kva.example');
    }
    expect(normalizeDomain('Example.COM')).toBe('example.com');
    expect(normalizeDomain('a.b-c.example')).toBe('a.b-c.example');
    expect(normalizeDomain('1x.example')).toBe('1x.example');
  });

  it('is nothing for what no host name is: no text, one label, a label that starts or ends with a dash, an empty label, a character no host has', () => {
    for (const bad of [undefined, null, 42, {}, '', ' ', '.', 'localhost', 'example', '-a.example', 'a-.example', 'a..example', 'a_b.example', 'a b.example', 'a/b.example', 'exa mple.com']) {
      expect(normalizeDomain(bad), JSON.stringify(bad)).toBeUndefined();
    }
  });

  it('keeps labels of 63 characters and names of 253, no longer; refuses long text before reading it', () => {
    const label63 = 'a'.repeat(63);
    expect(normalizeDomain(`${label63}.example`)).toBe(`${label63}.example`);
    expect(normalizeDomain(`${label63}a.example`)).toBeUndefined();
    expect(normalizeDomain('a'.repeat(61) + 'b.example')).toBe('a'.repeat(61) + 'b.example');
    // 4 labels of 61 and one of 5: 61*4 + 5 + 4 dots = 253.
    const at253 = [...Array(4).fill('a'.repeat(61)), 'abcde'].join('.');
    expect(at253).toHaveLength(253);
    expect(normalizeDomain(at253)).toBe(at253);
    expect(normalizeDomain(`${at253}x`)).toBeUndefined();
    expect(normalizeDomain(`${'a.'.repeat(512)}com`)).toBeUndefined();
    expect(normalizeDomain(` ${'a.'.repeat(511)}c`)).toBeUndefined();
    // Over 1024 characters nothing is read, even a name that spaces pad; 1024 are read.
    expect(normalizeDomain(`${' '.repeat(1013)}example.com`)).toBe('example.com');
    expect(normalizeDomain(`${' '.repeat(1014)}example.com`)).toBeUndefined();
  });

  it('returns an IP address as it is written (lower-case), for the caller to refuse', () => {
    expect(normalizeDomain('192.0.2.1')).toBe('192.0.2.1');
    expect(normalizeDomain('192.0.2.1.')).toBe('192.0.2.1');
    expect(normalizeDomain('2001:DB8::1')).toBe('2001:db8::1');
    expect(normalizeDomain('[2001:DB8::1]')).toBe('[2001:db8::1]');
    // Brackets only around the whole address.
    expect(normalizeDomain('::[1]')).toBeUndefined();
    expect(normalizeDomain('[::]1')).toBeUndefined();
  });

  it('reads an email\'s domain after its last @, in the stored form; nothing without an @', () => {
    expect(emailDomain('Jo@Bücher.example')).toBe('xn--bcher-kva.example');
    expect(emailDomain('"a@b"@corp.example')).toBe('corp.example');
    expect(emailDomain('jo.example.com')).toBeUndefined();
    expect(emailDomain('jo@')).toBeUndefined();
    expect(emailDomain('@corp.example')).toBe('corp.example');
  });

  it('names the TXT record that proves a domain', () => {
    expect(txtNameOf('corp.example')).toBe('_gateway-verify.corp.example');
  });
});

describe('which domains may be claimed', () => {
  const none = new Set<string>();

  it('a registrable domain and its subdomains, under an ICANN or a private suffix', () => {
    expect(claimable('corp.example.com', none)).toBe(true);
    expect(claimable('example.com', none)).toBe(true);
    expect(claimable('example.co.uk', none)).toBe(true);
    expect(claimable('team.github.io', none)).toBe(true);
  });

  it('never a public suffix (the private section too), an unknown suffix\'s top, an IP address or a public mail domain', () => {
    for (const suffix of ['com', 'co.uk', 'github.io', 'blogspot.com']) expect(claimable(suffix, none), suffix).toBe(false);
    expect(claimable('192.0.2.1', none)).toBe(false);
    expect(claimable('2001:db8::1', none)).toBe(false);
    expect(claimable('[2001:db8::1]', none)).toBe(false);
    expect(claimable('::ffff:192.0.2.1', none)).toBe(false);
    expect(claimable('10.0.0.1', none)).toBe(false);
    expect(claimable('gmail.com', new Set(['gmail.com']))).toBe(false);
    expect(claimable('corp.gmail.com', new Set(['gmail.com']))).toBe(true);
  });
});

describe('public mail domains', () => {
  it('reads a list file: one a line, # comments, blank lines and CRLF; names each line that is no domain with its number', () => {
    expect(parseDomainList('# ours\r\nMail.Example\r\n\r\n  other.example  # a comment\nbücher.example.\n')).toEqual({
      domains: ['mail.example', 'other.example', 'xn--bcher-kva.example'], problems: [],
    });
    expect(parseDomainList('ok.example\nnot a domain\n\nlocalhost # one label\n')).toEqual({
      domains: ['ok.example'], problems: ['line 2: "not a domain" is not a domain name', 'line 4: "localhost" is not a domain name'],
    });
    expect(parseDomainList(`${'x'.repeat(100)}\n`).problems).toEqual([`line 1: "${'x'.repeat(80)}" is not a domain name`]);
  });

  it('ships each domain once, in its stored form, a name anyone may register under a public suffix', () => {
    expect(SHIPPED_PUBLIC_MAIL_DOMAINS.length).toBeGreaterThanOrEqual(60);
    expect(new Set(SHIPPED_PUBLIC_MAIL_DOMAINS).size).toBe(SHIPPED_PUBLIC_MAIL_DOMAINS.length);
    for (const domain of SHIPPED_PUBLIC_MAIL_DOMAINS) {
      expect(normalizeDomain(domain), domain).toBe(domain);
      expect(claimable(domain, new Set()), domain).toBe(true);
      expect(claimable(domain, new Set(SHIPPED_PUBLIC_MAIL_DOMAINS)), domain).toBe(false);
    }
  });

  it('the shipped list, with a file\'s domains added; a file with a line that is no domain stops the start, naming it', async () => {
    expect(await publicMailDomains(undefined)).toEqual(new Set(SHIPPED_PUBLIC_MAIL_DOMAINS));
    expect(SHIPPED_PUBLIC_MAIL_DOMAINS).toContain('gmail.com');
    const dir = await mkdtemp(path.join(tmpdir(), 'public-mail-'));
    try {
      const good = path.join(dir, 'good.txt');
      await writeFile(good, 'mail.corp.example\n');
      const domains = await publicMailDomains(good);
      expect(domains.has('mail.corp.example')).toBe(true);
      expect(domains.has('gmail.com')).toBe(true);
      expect(domains.size).toBe(SHIPPED_PUBLIC_MAIL_DOMAINS.length + 1);
      const bad = path.join(dir, 'bad.txt');
      await writeFile(bad, 'a.example\nb\nc\nd\ne\n');
      // The first three lines it names, no more.
      await expect(publicMailDomains(bad)).rejects.toThrow(new Error(
        `organizations.sso.publicMailDomains: ${bad}: line 2: "b" is not a domain name; line 3: "c" is not a domain name; line 4: "d" is not a domain name`));
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

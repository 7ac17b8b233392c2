// An organization's domains (CONTRACT §31, "Domains", "Domains stay proven"), on two instances
// with docs/enterprise-sso.md's configuration, TXT records served by a loopback DNS server, and
// the page's shell examples run as written.
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildAdminApp } from '../../src/admin/app.js';
import { docsBlock, docsExample } from '../helpers/docs.js';
import { startDnsServer, type DnsServer } from '../helpers/dnsServer.js';
import { ADMIN_KEY, bearer, closeSql, describeWithServices, eventually, sql, startTwoGateways, testConfigFromYaml, type TestGateway, type TestUser } from '../helpers/gateway.js';
import { request } from '../helpers/http.js';
import { startSmtpCatcher, type SmtpCatcher } from '../helpers/smtp.js';
import { createOrg, invite, join, verifiedUser } from './helpers.js';

describeWithServices('organization domains', () => {
  let smtp: SmtpCatcher;
  let dns: DnsServer;
  let gws: [TestGateway, TestGateway];
  let admin: FastifyInstance;
  let adminUrl: string;
  let dir: string;

  beforeAll(async () => {
    smtp = await startSmtpCatcher();
    dns = await startDnsServer();
    dir = mkdtempSync(path.join(tmpdir(), 'gw-domains-'));
    writeFileSync(path.join(dir, 'more-public-domains.txt'), '# ours\nmail.example-isp.test\n');
    // docs/enterprise-sso.md's example as written, under docs/organizations.md's, but for the
    // resolver (the loopback DNS server) and the list's place.
    const ssoLines = docsExample('enterprise-sso', 'sso').replace('[1.1.1.1, 8.8.8.8]', `["${dns.address}"]`)
      .replace('./more-public-domains.txt', path.join(dir, 'more-public-domains.txt')).split('\n');
    const sso = ssoLines.slice(ssoLines.findIndex((l) => l.startsWith('  sso:'))).join('\n');
    const yaml = docsExample('organizations', 'organizations').replace(/( {2}maxOwnedPerUser:[^\n]*\n)/, `$1${sso}\n`);
    const config = testConfigFromYaml(yaml, { SMTP_URL: smtp.url });
    gws = await startTwoGateways({ ...config, errors: { ...config.errors, codes: true } });
    admin = await buildAdminApp(gws[0].services);
    adminUrl = await admin.listen({ host: '127.0.0.1', port: 0 });
  });
  afterAll(async () => {
    await admin?.close();
    await Promise.all((gws ?? []).map((gw) => gw.close()));
    await smtp?.close();
    await dns?.close();
    rmSync(dir, { recursive: true, force: true });
    await closeSql();
  });

  const as = (user: TestUser) => ({ headers: bearer(user.access) });
  const newDomain = () => `corp-${randomUUID().slice(0, 8)}.test`;
  async function ownedOrg(): Promise<{ owner: TestUser; id: number }> {
    const owner = await verifiedUser(gws[0], smtp);
    return { owner, id: await createOrg(gws[0], owner) };
  }
  const claim = (gw: TestGateway, id: number, owner: TestUser, domain: unknown) => gw.post(`/api/v1/orgs/${id}/domains`, { domain }, as(owner));
  const verify = (gw: TestGateway, id: number, owner: TestUser, domain: string) => gw.post(`/api/v1/orgs/${id}/domains/${encodeURIComponent(domain)}/verify`, {}, as(owner));
  /** The re-check's log lines (and an hourly task's failure) on either instance since the last call, as their message and fields. */
  function recheckLogs(): () => Array<Record<string, unknown>> {
    const read = gws.map((gw) => gw.logs.length);
    return () => gws.flatMap((gw, i) => {
      const lines = gw.logs.slice(read[i]);
      read[i] = gw.logs.length;
      return lines.map((line) => JSON.parse(line) as Record<string, unknown>);
    }).filter((line) => /^domain|hourly task/.test(String(line.msg)))
      .map(({ msg, domain, error, checked, missed, unverified, failed, err }) => JSON.parse(JSON.stringify({ msg, domain, error, checked, missed, unverified, failed, err })));
  }
  const events = (type: string, id: number) => sql<{ actor: string; data: Record<string, unknown> }>(
    "SELECT actor, data FROM audit_events WHERE type = $1 AND data->>'org_id' = $2 ORDER BY id", [type, String(id)]);

  it('the docs\' claim and verify, run as written: pending with a TXT value, 409 until the record is there, then verified', async () => {
    const { owner, id } = await ownedOrg();
    const domain = newDomain();
    const env = { PATH: process.env.PATH ?? '', GW: gws[0].url, ORG_ID: String(id), TOKEN: owner.access, DOMAIN: domain };
    const run = (block: string) => new Promise<Record<string, unknown>>((resolve, reject) => {
      execFile('bash', ['-e', '-c', docsBlock('enterprise-sso', block)], { env, timeout: 30_000 }, (err, stdout, stderr) => (err ? reject(new Error(stderr)) : resolve(JSON.parse(stdout))));
    });
    const claimed = await run('domain-claim');
    expect(claimed).toMatchObject({ domain, status: 'pending', txt_name: `_gateway-verify.${domain}`, verified_by: null, verified_at: null });
    expect(claimed.txt_value).toMatch(/^gateway-verify=[A-Za-z0-9_-]{32}$/);
    expect(new Date(claimed.expires_at as string).getTime() - Date.now()).toBeGreaterThan(6.9 * 86_400_000);
    expect(await run('domain-verify')).toMatchObject({ code: 'domain_unverified' });
    dns.setTxt(`_gateway-verify.${domain}`, ['v=spf1 -all', claimed.txt_value as string]);
    expect(await run('domain-verify')).toMatchObject({ domain, status: 'verified', verified_by: 'dns' });
    const listed = await gws[1].get(`/api/v1/orgs/${id}/domains`, as(owner));
    expect(listed.json.domains).toEqual([expect.objectContaining({ domain, status: 'verified', verified_by: 'dns', last_checked_at: expect.any(String) })]);
    expect((await events('org.domain_claimed', id)).map((e) => e.data)).toEqual([{ org_id: id, domain }]);
    expect(await events('org.domain_verified', id)).toEqual([{ actor: 'user', data: { org_id: id, domain, by: 'dns' } }]);
  });

  it('stores the A-label, lower-case, without the trailing dot; refuses IPs, public suffixes and public mail domains', async () => {
    const { owner, id } = await ownedOrg();
    const label = `Bücher-${randomUUID().slice(0, 6)}`;
    const res = await claim(gws[1], id, owner, `${label}.EXAMPLE.`);
    expect(res.status).toBe(201);
    expect(res.json.domain).toBe(`${new URL(`http://${label}.example`).hostname}`);
    expect(res.json.domain).toMatch(/^xn--/);
    for (const bad of ['192.0.2.1', '[2001:db8::1]', 'co.uk', 'github.io', 'com', 'gmail.com', 'GMAIL.com.', 'mail.example-isp.test', 'not a domain', 'a..b']) {
      const refused = await claim(gws[0], id, owner, bad);
      expect([refused.status, refused.json.code], bad).toEqual([400, 'domain_not_allowed']);
    }
    const notText = await claim(gws[0], id, owner, 42);
    expect([notText.status, notText.json.code]).toEqual([400, 'bad_request']);
  });

  it('only owners claim, verify and release; admins list; non-members get 404', async () => {
    const { owner, id } = await ownedOrg();
    const adminUser = await verifiedUser(gws[0], smtp);
    expect(await join(gws[0], adminUser, await invite(gws[0], smtp, id, owner, adminUser, 'admin'))).toBe(200);
    const stranger = await verifiedUser(gws[0], smtp);
    const domain = newDomain();
    expect((await claim(gws[0], id, owner, domain)).status).toBe(201);
    expect((await claim(gws[0], id, adminUser, newDomain())).json.code).toBe('role_insufficient');
    expect((await verify(gws[0], id, adminUser, domain)).json.code).toBe('role_insufficient');
    expect((await gws[0].get(`/api/v1/orgs/${id}/domains`, as(adminUser))).status).toBe(200);
    expect((await gws[0].get(`/api/v1/orgs/${id}/domains`, as(stranger))).status).toBe(404);
    expect((await verify(gws[0], id, owner, newDomain())).json.code).toBe('domain_not_found');
    const release = (who: TestUser, d: string) => gws[1].request('DELETE', `/api/v1/orgs/${id}/domains/${d}`, as(who));
    expect((await release(adminUser, domain)).status).toBe(403);
    expect((await release(owner, domain)).status).toBe(200);
    expect((await release(owner, domain)).json.code).toBe('domain_not_found');
    expect((await events('org.domain_released', id)).map((e) => e.data)).toEqual([{ org_id: id, domain }]);
  });

  it('10 look-ups per organization per hour across both instances, then 429', async () => {
    const { owner, id } = await ownedOrg();
    const domain = newDomain();
    expect((await claim(gws[0], id, owner, domain)).status).toBe(201);
    const answers = await Promise.all(Array.from({ length: 14 }, (_, i) => verify(gws[i % 2]!, id, owner, domain)));
    expect(answers.filter((a) => a.status === 409)).toHaveLength(10);
    expect(answers.filter((a) => a.status === 429)).toHaveLength(4);
    expect(dns.asked(`_gateway-verify.${domain}`)).toBeGreaterThanOrEqual(10);
  });

  it('two organizations verifying one domain at once, on two instances: one 200, one 409 domain_taken (3 rounds)', async () => {
    for (let round = 0; round < 3; round++) {
      const [a, b] = [await ownedOrg(), await ownedOrg()];
      const domain = newDomain();
      const values = [(await claim(gws[0], a.id, a.owner, domain)).json.txt_value, (await claim(gws[1], b.id, b.owner, domain)).json.txt_value];
      dns.setTxt(`_gateway-verify.${domain}`, values);
      const [ra, rb] = await Promise.all([verify(gws[0], a.id, a.owner, domain), verify(gws[1], b.id, b.owner, domain)]);
      expect([ra.status, rb.status].sort()).toEqual([200, 409]);
      expect([ra.json.code, rb.json.code]).toContain('domain_taken');
      expect(await sql("SELECT 1 FROM org_domains WHERE domain = $1 AND status = 'verified'", [domain])).toHaveLength(1);
      // The winner holds it: the other cannot claim it again either.
      const loser = ra.status === 200 ? b : a;
      expect((await claim(gws[0], loser.id, loser.owner, domain)).json.code).toBe('domain_taken');
    }
  });

  it('the daily re-check: 3 misses unverify (resolver failures do not count), an operator\'s domain is never re-checked', async () => {
    const { owner, id } = await ownedOrg();
    const [domain, byOperator] = [newDomain(), newDomain()];
    const value = (await claim(gws[0], id, owner, domain)).json.txt_value;
    dns.setTxt(`_gateway-verify.${domain}`, [value]);
    expect((await verify(gws[0], id, owner, domain)).status).toBe(200);
    expect((await claim(gws[0], id, owner, byOperator)).status).toBe(201);
    const adminCall = (d: string) => request(adminUrl, 'POST', `/admin/v1/orgs/${id}/domains/${d}/verify`, { headers: bearer(ADMIN_KEY), json: {} });
    expect((await adminCall(byOperator)).json).toMatchObject({ domain: byOperator, status: 'verified', verified_by: 'operator' });
    expect((await adminCall(newDomain())).status).toBe(404);
    expect((await events('org.domain_verified', id)).map((e) => [e.actor, e.data.by])).toEqual([['user', 'dns'], ['admin', 'operator']]);

    const row = async () => (await sql<{ status: string; missed_checks: number }>('SELECT status, missed_checks FROM org_domains WHERE org_id = $1 AND domain = $2', [id, domain]))[0];
    const dayPasses = () => sql("UPDATE org_domains SET last_checked_at = now() - interval '25 hours' WHERE org_id = $1", [id]);
    const sweep = async () => { await dayPasses(); await Promise.all(gws.map((gw) => gw.services.housekeeping.sweep())); };
    // What each sweep told the operators: the instance that claimed the domain logs its pass, the other nothing.
    const told = recheckLogs();
    const pass = (counts: { missed: number; unverified: number; failed: number }) => ({ msg: 'domains re-checked', checked: 1, ...counts });
    await sweep();
    expect(await row()).toEqual({ status: 'verified', missed_checks: 0 });
    expect(told(), 'the record still there').toEqual([pass({ missed: 0, unverified: 0, failed: 0 })]);
    dns.remove(`_gateway-verify.${domain}`);
    await sweep();
    expect(await row()).toEqual({ status: 'verified', missed_checks: 1 });
    expect(told()).toEqual([pass({ missed: 1, unverified: 0, failed: 0 })]);
    dns.fail(`_gateway-verify.${domain}`);
    await sweep();
    expect(await row()).toEqual({ status: 'verified', missed_checks: 1 });
    expect(told()).toEqual([
      { msg: 'domain re-check: the resolver failed; not counted as a miss', domain, error: 'ESERVFAIL' }, pass({ missed: 0, unverified: 0, failed: 1 }),
    ]);
    dns.setTxt(`_gateway-verify.${domain}`, []);
    await sweep();
    expect(told(), 'the name without TXT records (NODATA) is a miss').toEqual([pass({ missed: 1, unverified: 0, failed: 0 })]);
    dns.setTxt(`_gateway-verify.${domain}`, ['gateway-verify=someone-else']);
    await sweep();
    expect(await row()).toEqual({ status: 'unverified', missed_checks: 3 });
    expect(told()).toEqual([pass({ missed: 1, unverified: 1, failed: 0 })]);
    expect((await events('org.domain_unverified', id)).map((e) => [e.actor, e.data.domain])).toEqual([['system', domain]]);
    expect(dns.asked(`_gateway-verify.${byOperator}`)).toBe(0);
    const [operators] = await sql('SELECT status, verified_by FROM org_domains WHERE org_id = $1 AND domain = $2', [id, byOperator]);
    expect(operators).toEqual({ status: 'verified', verified_by: 'operator' });
    // Unverified, another organization may claim and verify it.
    const other = await ownedOrg();
    const next: string = (await claim(gws[1], other.id, other.owner, domain)).json.txt_value;
    // Its record in two chunks, as DNS providers split long TXT values (read as one string), beside another record.
    dns.setTxt(`_gateway-verify.${domain}`, ['v=spf1 -all', [next.slice(0, 10), next.slice(10)]]);
    expect((await verify(gws[1], other.id, other.owner, domain)).status).toBe(200);
  });

  it('a domain released while its re-check looks it up stays released: no miss recorded, nothing unverified, the pass logged', async () => {
    const { owner, id } = await ownedOrg();
    const domain = newDomain();
    const name = `_gateway-verify.${domain}`;
    dns.setTxt(name, [(await claim(gws[0], id, owner, domain)).json.txt_value]);
    expect((await verify(gws[0], id, owner, domain)).status).toBe(200);
    await sql("UPDATE org_domains SET last_checked_at = now() - interval '25 hours', missed_checks = 2 WHERE org_id = $1", [id]);
    dns.remove(name);
    const [told, asked] = [recheckLogs(), dns.asked(name)];
    const answer = dns.hold(name);
    const sweeping = Promise.all(gws.map((gw) => gw.services.housekeeping.sweep()));
    await eventually(() => dns.asked(name) > asked, 5000);
    expect((await gws[1].request('DELETE', `/api/v1/orgs/${id}/domains/${domain}`, as(owner))).status).toBe(200);
    answer();
    await sweeping;
    expect(await sql('SELECT domain FROM org_domains WHERE org_id = $1', [id])).toEqual([]);
    expect(await events('org.domain_unverified', id)).toEqual([]);
    const lines = told();
    expect(lines, JSON.stringify(lines)).toEqual([{ msg: 'domains re-checked', checked: 1, missed: 1, unverified: 0, failed: 0 }]);
  });

  it('a resolver that never answers is asked twice, then the verification is refused and the claim stays pending', async () => {
    const { owner, id } = await ownedOrg();
    const domain = newDomain();
    const name = `_gateway-verify.${domain}`;
    dns.setTxt(name, [(await claim(gws[0], id, owner, domain)).json.txt_value]);
    const answer = dns.hold(name);
    try {
      const res = await verify(gws[0], id, owner, domain);
      expect([res.status, res.json.code]).toEqual([409, 'domain_unverified']);
      expect(dns.asked(name), 'two tries, each given up on after its timeout').toBe(2);
    } finally {
      answer();
    }
    expect(await sql('SELECT status FROM org_domains WHERE org_id = $1', [id])).toEqual([{ status: 'pending' }]);
  });

  it('a claim verified already is answered again without a look-up; one claimed again stays verified, with no new claim recorded', async () => {
    const { owner, id } = await ownedOrg();
    const domain = newDomain();
    const name = `_gateway-verify.${domain}`;
    dns.setTxt(name, [(await claim(gws[0], id, owner, domain)).json.txt_value]);
    const verified = await verify(gws[0], id, owner, domain);
    expect(verified.status).toBe(200);
    const asked = dns.asked(name);
    const again = await verify(gws[1], id, owner, domain);
    expect([again.status, again.json]).toEqual([200, verified.json]);
    expect(dns.asked(name), 'no look-up for a verified claim').toBe(asked);
    expect(await sql('SELECT count(*)::int AS n FROM org_domain_lookups WHERE org_id = $1', [id]), 'nor one counted').toEqual([{ n: 1 }]);
    const reclaimed = await claim(gws[1], id, owner, domain);
    expect([reclaimed.status, reclaimed.json]).toEqual([201, verified.json]);
    expect(await events('org.domain_claimed', id)).toHaveLength(1);
    expect(await events('org.domain_verified', id)).toHaveLength(1);
  });

  it('a pending claim past its expiry is refused without a look-up, listed no more, and may be claimed anew', async () => {
    const { owner, id } = await ownedOrg();
    const domain = newDomain();
    const name = `_gateway-verify.${domain}`;
    dns.setTxt(name, [(await claim(gws[0], id, owner, domain)).json.txt_value]);
    await sql("UPDATE org_domains SET expires_at = now() - interval '1 second' WHERE org_id = $1", [id]);
    const res = await verify(gws[0], id, owner, domain);
    expect([res.status, res.json.code]).toEqual([409, 'domain_unverified']);
    expect(dns.asked(name)).toBe(0);
    expect(await sql('SELECT count(*)::int AS n FROM org_domain_lookups WHERE org_id = $1', [id])).toEqual([{ n: 0 }]);
    expect((await gws[1].get(`/api/v1/orgs/${id}/domains`, as(owner))).json).toEqual({ domains: [] });
    const anew = await claim(gws[1], id, owner, domain);
    expect([anew.status, anew.json.status]).toEqual([201, 'pending']);
    dns.setTxt(name, [anew.json.txt_value]);
    expect((await verify(gws[0], id, owner, domain)).json).toMatchObject({ domain, status: 'verified' });
  });

  it('a claim the daily re-check unverified is looked up again, whatever its first expiry', async () => {
    const { owner, id } = await ownedOrg();
    const domain = newDomain();
    dns.setTxt(`_gateway-verify.${domain}`, [(await claim(gws[0], id, owner, domain)).json.txt_value]);
    await sql("UPDATE org_domains SET status = 'unverified', expires_at = now() - interval '30 days' WHERE org_id = $1", [id]);
    expect((await verify(gws[1], id, owner, domain)).json).toMatchObject({ domain, status: 'verified', verified_by: 'dns' });
  });

  it('ids and domains in the path that are none: 404 org_not_found or domain_not_found, never a 500', async () => {
    const { owner, id } = await ownedOrg();
    const tooBig = '9999999999';
    expect((await claim(gws[0], tooBig as unknown as number, owner, newDomain())).json.code).toBe('org_not_found');
    expect((await verify(gws[0], tooBig as unknown as number, owner, newDomain())).json.code).toBe('org_not_found');
    expect((await gws[0].request('DELETE', `/api/v1/orgs/${tooBig}/domains/${newDomain()}`, as(owner))).json.code).toBe('org_not_found');
    expect((await gws[0].get(`/api/v1/orgs/${tooBig}/domains`, as(owner))).status).toBe(404);
    for (const bad of ['a..b', 'not a domain', '192.0.2.1']) {
      const verified = await verify(gws[0], id, owner, bad);
      expect([verified.status, verified.json.code], bad).toEqual([404, 'domain_not_found']);
      const released = await gws[1].request('DELETE', `/api/v1/orgs/${id}/domains/${encodeURIComponent(bad)}`, as(owner));
      expect([released.status, released.json.code], bad).toEqual([404, 'domain_not_found']);
    }
    expect(await events('org.domain_released', id)).toEqual([]);
  });

  describe('the claim changed while its record was looked up: the proof counts for the claim it was made for only', () => {
    /** Verifies with the record's answer held, makes `change` once the resolver was asked, then lets the answer go. */
    async function verifyAround(change: (ctx: { id: number; owner: TestUser; domain: string }) => Promise<void>) {
      const { owner, id } = await ownedOrg();
      const domain = newDomain();
      const name = `_gateway-verify.${domain}`;
      dns.setTxt(name, [(await claim(gws[0], id, owner, domain)).json.txt_value]);
      const answer = dns.hold(name);
      const verifying = verify(gws[0], id, owner, domain);
      try {
        await eventually(() => dns.asked(name) > 0, 2500);
        await change({ id, owner, domain });
      } finally {
        answer();
      }
      return { res: await verifying, id, domain };
    }

    it('claimed anew meanwhile (a new value): 409 domain_unverified, the new claim pending', async () => {
      const { res, id } = await verifyAround(async ({ id, owner, domain }) => {
        expect((await claim(gws[1], id, owner, domain)).status).toBe(201);
      });
      expect([res.status, res.json.code]).toEqual([409, 'domain_unverified']);
      expect(await sql('SELECT status FROM org_domains WHERE org_id = $1', [id])).toEqual([{ status: 'pending' }]);
      expect(await events('org.domain_verified', id)).toEqual([]);
    });

    it('the owner demoted meanwhile: 403 role_insufficient, the claim still pending', async () => {
      const { res, id } = await verifyAround(async ({ id, owner }) => {
        await sql("UPDATE memberships SET role = 'admin' WHERE org_id = $1 AND user_id = $2", [id, owner.id]);
      });
      expect([res.status, res.json.code]).toEqual([403, 'role_insufficient']);
      expect(await sql('SELECT status FROM org_domains WHERE org_id = $1', [id])).toEqual([{ status: 'pending' }]);
    });

    it('released meanwhile: 404 domain_not_found, nothing written back', async () => {
      const { res, id } = await verifyAround(async ({ id, owner, domain }) => {
        expect((await gws[1].request('DELETE', `/api/v1/orgs/${id}/domains/${domain}`, as(owner))).status).toBe(200);
      });
      expect([res.status, res.json.code]).toEqual([404, 'domain_not_found']);
      expect(await sql('SELECT domain FROM org_domains WHERE org_id = $1', [id])).toEqual([]);
    });

    it('verified by an operator meanwhile: 200 with the operator\'s verification, recorded once', async () => {
      const { res, id, domain } = await verifyAround(async ({ id, domain }) => {
        const byOperator = await request(adminUrl, 'POST', `/admin/v1/orgs/${id}/domains/${domain}/verify`, { headers: bearer(ADMIN_KEY), json: {} });
        expect(byOperator.status).toBe(200);
      });
      expect([res.status, res.json]).toEqual([200, expect.objectContaining({ domain, status: 'verified', verified_by: 'operator' })]);
      expect((await events('org.domain_verified', id)).map((e) => e.data.by)).toEqual(['operator']);
    });
  });
});

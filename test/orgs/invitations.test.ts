// What an organization's invitations decide (CONTRACT §22; issue 69: src/orgs/invitations.ts's
// mutation room found it untested): the invited address read as accounts store theirs, each
// refusal's code (not a string, not one mailbox, an id that is no number, mail not configured),
// the audit rows and log lines of a sending, a cancel and an acceptance, the mail's purpose and its
// lifetime in minutes, and an owner's invitation void once its inviter is no longer an owner.
import { rmSync } from 'node:fs';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { bearer, closeSql, describeWithServices, eventually, loggedLines, makeUser, sql, startTestGateway, type TestGateway, type TestUser } from '../helpers/gateway.js';
import { fileTree } from '../helpers/fileTree.js';
import { startSmtpCatcher, type SmtpCatcher } from '../helpers/smtp.js';
import { createOrg, invite, join, organizationsConfig, verifiedUser } from './helpers.js';

describeWithServices('an organization\'s invitations: what each one records and refuses', () => {
  let smtp: SmtpCatcher;
  let gw: TestGateway;
  let mailless: TestGateway;
  let dir: string;

  beforeAll(async () => {
    smtp = await startSmtpCatcher();
    dir = fileTree('gw-org-invitations-', {
      'fr/org_invitation.subject.txt': 'Rejoignez {{org_name}}\n',
      'fr/org_invitation.txt': '{{link}} (valable {{expires_in_minutes}} minutes)\n',
    });
    const config = organizationsConfig(smtp);
    gw = await startTestGateway({ ...config, mail: { ...config.mail!, templates: dir } });
    // The same database and keys, its SMTP relay empty (mail.smtp '': no mail is sent): nobody could receive an invitation.
    mailless = await startTestGateway({ ...config, mail: { ...config.mail!, smtp: '' } });
  });
  afterAll(async () => {
    await gw?.close();
    await mailless?.close();
    await smtp?.close();
    rmSync(dir, { recursive: true, force: true });
    await closeSql();
  });

  const as = (user: TestUser) => ({ headers: bearer(user.access) });
  const audited = (type: string, orgId: number) =>
    sql<{ data: Record<string, unknown> }>("SELECT data - 'org_id' AS data FROM audit_events WHERE type = $1 AND data->>'org_id' = $2 ORDER BY id", [type, String(orgId)])
      .then((rows) => rows.map((r) => r.data));

  it('reads the invited address as accounts store it; one that is not a string or not one mailbox is a 400', async () => {
    const owner = await verifiedUser(gw, smtp);
    const orgId = await createOrg(gw, owner);
    const res = await gw.post(`/api/v1/orgs/${orgId}/invitations`, { email: '  Guest.Name@Example.TEST ', role: 'member' }, as(owner));
    expect([res.status, res.json.email]).toEqual([201, 'guest.name@example.test']);
    for (const email of [42, ['a@example.test'], 'a@example.test, b@example.test', `${'a'.repeat(64)}@${'b'.repeat(260)}.test`]) {
      const refused = await gw.post(`/api/v1/orgs/${orgId}/invitations`, { email, role: 'member' }, as(owner));
      expect([refused.status, refused.json.code], JSON.stringify(email).slice(0, 40)).toEqual([400, 'bad_request']);
    }
    expect(await sql('SELECT email FROM org_invitations WHERE org_id = $1', [orgId])).toEqual([{ email: 'guest.name@example.test' }]);
  });

  it('a sending is audited, logged and mailed as an invitation, with its lifetime in minutes', async () => {
    const owner = await verifiedUser(gw, smtp);
    const guest = await makeUser(gw);
    const orgId = await createOrg(gw, owner);
    const res = await gw.post(`/api/v1/orgs/${orgId}/invitations`, { email: guest.email, role: 'admin' }, as(owner));
    expect(res.status).toBe(201);
    const id = res.json.id as number;
    expect(await audited('org.invitation_sent', orgId)).toEqual([{ invitation_id: id, email: guest.email, role: 'admin' }]);
    expect(loggedLines(gw, 'invitation sent').filter((l) => l.invitationId === id).map((l) => [l.userId, l.orgId])).toEqual([[owner.id, orgId]]);
    // docs/organizations.md's invitationTtl, 7 days (the second mail: the first verifies the address).
    expect((await smtp.waitFor(guest.email, 2)).text).toContain('(valable 10080 minutes)');
    // Logged once the relay has answered, a moment after the catcher holds it.
    await eventually(async () => loggedLines(gw, 'mail sent').some((l) => l.userId === owner.id && l.purpose === 'org_invitation'), 2000);
  });

  it('an id that is no number is a 404 of its own kind; a cancel is audited', async () => {
    const owner = await verifiedUser(gw, smtp);
    const orgId = await createOrg(gw, owner);
    for (const [method, url] of [['POST', '/api/v1/orgs/abc/invitations'], ['DELETE', '/api/v1/orgs/abc/invitations/1']]) {
      const res = await gw.request(method!, url!, { ...as(owner), json: { email: 'x@example.test', role: 'member' } });
      expect([res.status, res.json.code], url).toEqual([404, 'org_not_found']);
    }
    const unknown = await gw.request('DELETE', `/api/v1/orgs/${orgId}/invitations/abc`, as(owner));
    expect([unknown.status, unknown.json.code]).toEqual([404, 'invitation_not_found']);
    const made = await gw.post(`/api/v1/orgs/${orgId}/invitations`, { email: 'cancelled@example.test', role: 'member' }, as(owner));
    expect((await gw.request('DELETE', `/api/v1/orgs/${orgId}/invitations/${made.json.id}`, as(owner))).status).toBe(200);
    expect(await audited('org.invitation_cancelled', orgId)).toEqual([{ invitation_id: made.json.id }]);
  });

  it('an owner\'s invitation is void once its inviter is no longer an owner; a member\'s still works, and is logged', async () => {
    const [owner, second, heir, member] = [await verifiedUser(gw, smtp), await verifiedUser(gw, smtp), await verifiedUser(gw, smtp), await verifiedUser(gw, smtp)];
    const orgId = await createOrg(gw, owner);
    expect(await join(gw, second, await invite(gw, smtp, orgId, owner, second, 'owner'))).toBe(200);
    const [forHeir, forMember] = [await invite(gw, smtp, orgId, second, heir, 'owner'), await invite(gw, smtp, orgId, second, member, 'member')];
    // The second owner made an admin: what they may still grant is an admin's.
    expect((await gw.request('PUT', `/api/v1/orgs/${orgId}/members/${second.id}`, { ...as(owner), json: { role: 'admin' } })).status).toBe(200);
    const refused = await gw.post('/api/v1/orgs/invitations/accept', { token: forHeir }, as(heir));
    expect([refused.status, refused.json.code]).toEqual([400, 'link_invalid']);
    expect(await join(gw, member, forMember)).toBe(200);
    expect(loggedLines(gw, 'invitation accepted').filter((l) => l.orgId === orgId).map((l) => l.userId)).toEqual([second.id, member.id]);
    expect((await audited('org.member_added', orgId)).map((d) => [d.member_id, d.role])).toEqual([[second.id, 'owner'], [member.id, 'member']]);
  });

  it('without mail configured an invitation is refused (503) and nothing is stored', async () => {
    const owner = await verifiedUser(gw, smtp);
    const orgId = await createOrg(gw, owner);
    const res = await mailless.post(`/api/v1/orgs/${orgId}/invitations`, { email: 'nobody@example.test', role: 'member' }, as(owner));
    expect([res.status, res.json.code]).toEqual([503, 'mail_unavailable']);
    expect(await sql('SELECT count(*)::int AS n FROM org_invitations WHERE org_id = $1', [orgId])).toEqual([{ n: 0 }]);
  });
});

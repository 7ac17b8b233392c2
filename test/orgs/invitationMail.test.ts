// The invitation mail (CONTRACT §22): an organization's name is its creator's words, so in an
// operator's HTML template it is escaped text, never markup nor a link, and only the gateway's
// link starts a URL. And the migration that brought organizations only adds (expand-only).
import { readFileSync, rmSync } from 'node:fs';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { bearer, closeSql, describeWithServices, sql, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { fileTree } from '../helpers/fileTree.js';
import { startSmtpCatcher, type SmtpCatcher } from '../helpers/smtp.js';
import { createOrg, organizationsConfig, verifiedUser } from './helpers.js';

describeWithServices('the invitation mail', () => {
  let smtp: SmtpCatcher;
  let gw: TestGateway;
  let dir: string;

  beforeAll(async () => {
    smtp = await startSmtpCatcher();
    dir = fileTree('gw-org-mail-', {
      'fr/org_invitation.subject.txt': 'Rejoignez {{org_name}}\n',
      'fr/org_invitation.txt': '{{inviter_email}} vous invite dans {{org_name}} : {{link}}\n',
      'fr/org_invitation.html': '<p>{{inviter_email}} vous invite dans <b>{{org_name}}</b></p><p><a href="{{link}}">Rejoindre</a></p>\n',
    });
    const config = organizationsConfig(smtp);
    gw = await startTestGateway({ ...config, mail: { ...config.mail!, templates: dir } });
  });
  afterAll(async () => {
    await gw?.close();
    await smtp?.close();
    rmSync(dir, { recursive: true, force: true });
    await closeSql();
  });

  it('carries the organization\'s name escaped in HTML, as one line in the subject, and no link but the invitation\'s', async () => {
    const [owner, guest] = [await verifiedUser(gw, smtp), await verifiedUser(gw, smtp)];
    // Such a name is refused today (orgNames.security.test.ts); one stored before the rule is still mailed as text.
    const name = '<a href="https://evil.example/">Paie</a>';
    const id = await createOrg(gw, owner);
    await sql('UPDATE organizations SET name = $2 WHERE id = $1', [id, name]);
    expect((await gw.post(`/api/v1/orgs/${id}/invitations`, { email: guest.email, role: 'member' }, { headers: bearer(owner.access) })).status).toBe(201);
    const mail = await smtp.waitFor(guest.email, 2);
    expect(mail.subject).toBe(`Rejoignez ${name}`);
    // `/` and `=` are encoded too (§33).
    expect(mail.htmlSource).toContain('<b>&lt;a href&#61;&quot;https:&#47;&#47;evil.example&#47;&quot;&gt;Paie&lt;&#47;a&gt;</b>');
    expect(mail.htmlSource).not.toContain('href="https://evil.example/"');
    const invitation = /https:\/\/app\.example\.com\/join\?token=[\w-]+/.exec(mail.text)?.[0];
    expect(invitation).toBeDefined();
    expect([...mail.htmlSource!.matchAll(/href="([^"]*)"/g)].map((m) => m[1]!.replace(/&#47;/g, '/').replace(/&#61;/g, '='))).toEqual([invitation]);
  });

  it('a stored name\'s line breaks and bidi controls are each run one space: it can neither start a line of the mail nor reorder it', async () => {
    const [owner, guest] = [await verifiedUser(gw, smtp), await verifiedUser(gw, smtp)];
    const id = await createOrg(gw, owner);
    await sql('UPDATE organizations SET name = $2 WHERE id = $1', [id, 'Acme\r\n\r\nVotre\u202ecompte est bloqué']);
    expect((await gw.post(`/api/v1/orgs/${id}/invitations`, { email: guest.email, role: 'member' }, { headers: bearer(owner.access) })).status).toBe(201);
    const mail = await smtp.waitFor(guest.email, 2);
    expect(mail.subject).toBe('Rejoignez Acme Votre compte est bloqué');
    expect(mail.text).toContain('vous invite dans Acme Votre compte est bloqué :');
  });
});

it('migration 025 only adds: new tables, indexes and nullable columns, nothing dropped, renamed or made required', () => {
  const text = readFileSync(new URL('../../migrations/025_organizations.sql', import.meta.url), 'utf8').replace(/--.*$/gm, '').replace(/ON DELETE (CASCADE|SET NULL)/g, '');
  expect(text).not.toMatch(/\b(DROP|RENAME|TRUNCATE|DELETE|UPDATE)\b|ALTER\s+COLUMN|SET\s+NOT\s+NULL/i);
  for (const added of text.matchAll(/ALTER TABLE (\w+) ADD COLUMN ([^;]+);/g)) {
    expect(added[1]).toBe('api_tokens');
    expect(added[2], added[2]).not.toMatch(/NOT NULL/i);
  }
});

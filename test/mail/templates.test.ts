// Issue 49, mail templates (CONTRACT §20): docs/accounts.md's example run as written, a hostile
// address escaped for each part of a real multipart mail, every value cleaned for its context,
// the built-in French texts unchanged, and what `gateway check` refuses in a template folder.
import { rmSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkFiles } from '../../src/config/files.js';
import { MailTemplatesError, MailWords, mailWordsOf, readMailTemplates, renderMail } from '../../src/mail/index.js';
import { ensureBuilt, gateway } from '../helpers/cli.js';
import { docsBlock, docsExample } from '../helpers/docs.js';
import { closeSql, configProblems, describeWithServices, newPassword, startTestGateway, testConfigFromFile, type TestGateway } from '../helpers/gateway.js';
import { fileTree } from '../helpers/fileTree.js';
import { startSmtpCatcher, type SmtpCatcher } from '../helpers/smtp.js';

/** docs/accounts.md's templates, under `folder`. */
const DOCUMENTED = (folder = 'mail-templates/') => ({
  [`${folder}en/verify.subject.txt`]: docsBlock('accounts', 'mail-verify-subject'),
  [`${folder}en/verify.txt`]: docsBlock('accounts', 'mail-verify-text'),
  [`${folder}en/verify.html`]: docsBlock('accounts', 'mail-verify-html'),
});

describeWithServices('mail templates, sent (issue 49)', () => {
  let smtp: SmtpCatcher;
  let gw: TestGateway;
  let dir: string;

  beforeAll(async () => {
    smtp = await startSmtpCatcher();
    dir = fileTree('gateway-mail-templates-', {
      ...DOCUMENTED(),
      // A language the gateway has no built-in texts for, one kind of it.
      'mail-templates/de/reset.subject.txt': 'Neues Passwort für {{product}}\n',
      'mail-templates/de/reset.txt': 'Hallo {{email}},\n\n{{link}}\n\n(gültig {{expires_in_minutes}} Minuten)\n',
    });
    gw = await startTestGateway(testConfigFromFile(docsExample('accounts', 'mail-templates'), dir, { SMTP_URL: smtp.url }));
  });
  afterAll(async () => {
    await gw?.close();
    await smtp?.close();
    rmSync(dir, { recursive: true, force: true });
    await closeSql();
  });

  it('the documented example: text and HTML, the address escaped for each, no placeholder read twice', async () => {
    // A valid address with the characters HTML must not take as they are, and a placeholder's spelling.
    const email = `o'neil&co{{product}}-${Date.now()}@example.test`;
    const res = await gw.post('/api/v1/auth/register', { email, password: newPassword(), locale: 'en' });
    expect(res.status).toBe(201);
    const mail = await smtp.waitFor(email);
    expect(mail.contentType).toBe('multipart/alternative');
    expect(mail.subject).toBe('Confirm your Example account');
    expect(mail.from).toBe('Example <no-reply@example.com>');
    expect(mail.text).toContain(`To confirm that ${email} is your address, open this link within 1440 minutes:`);
    expect(mail.text).toContain('The Example team');
    expect(mail.link).toMatch(/^https:\/\/app\.example\.com\/verify-email\?token=[A-Za-z0-9_-]{43}$/);
    const encoded = email.replace('&', '&amp;').replace('\'', '&#39;');
    expect(mail.htmlSource).toContain(`<b>${encoded}</b>`);
    // The link too is encoded as every value is (§33: `/` and `=` besides the five); a client decodes it.
    const link = mail.link!.replace(/\//g, '&#47;').replace(/=/g, '&#61;');
    expect(mail.htmlSource).toContain(`<a href="${link}" title="Confirm ${encoded}">this link</a>`);
    expect(mail.htmlSource).not.toContain(email);
    // Other headers carry no value of the templates: the recipient is the account's address, once.
    expect(mail.recipients).toEqual([email]);
  });

  it('a language of the folder serves a request in it (negotiate), as the built-in ones do', async () => {
    const email = `de-${Date.now()}@example.test`;
    expect((await gw.post('/api/v1/auth/register', { email, password: newPassword() }, { headers: { 'accept-language': '*' } })).status).toBe(201);
    await smtp.waitFor(email);
    expect((await gw.post('/api/v1/auth/password/forgot', { email }, { headers: { 'accept-language': 'de-AT, en;q=0.5' } })).status).toBe(202);
    const mail = await smtp.waitFor(email, 2);
    expect(mail.subject).toBe('Neues Passwort für Example');
    expect(mail.link).toMatch(/^https:\/\/app\.example\.com\/reset-password\?token=[\w-]{43}$/);
    expect(mail.text.trimEnd()).toBe(`Hallo ${email},\n\n${mail.link}\n\n(gültig 30 Minuten)`);
    expect(mail.contentType).toBe('text/plain');
  });

  it('a language or kind the folder leaves out keeps the built-in text: plain French', async () => {
    const email = `fr-${Date.now()}@example.test`;
    expect((await gw.post('/api/v1/auth/register', { email, password: newPassword() })).status).toBe(201);
    const mail = await smtp.waitFor(email);
    expect(mail.subject).toBe('Confirmez votre adresse email');
    expect(mail.contentType).toBe('text/plain');
    expect(mail.html).toBe(false);
  });
});

describe('rendering a template', () => {
  const template = {
    subject: 'Welcome to {{product}}, {{email}}',
    text: 'Hello {{email}}, open {{link}}\n',
    html: '<p title="{{email}}">Hello {{email}}</p><a href="{{link}}">{{org_name}}</a>',
  };

  it('entity-encodes HTML text and quoted values, and leaves text parts as text', () => {
    const mail = renderMail(template, { email: '"<script>"@x.test', link: 'https://app.example.test/?a=1&b=2', product: 'P', org_name: '<img src=x onerror=alert(1)>' });
    expect(mail.html).toBe('<p title="&quot;&lt;script&gt;&quot;@x.test">Hello &quot;&lt;script&gt;&quot;@x.test</p>'
      + '<a href="https:&#47;&#47;app.example.test&#47;?a&#61;1&amp;b&#61;2">&lt;img src&#61;x onerror&#61;alert(1)&gt;</a>');
    expect(mail.text).toBe('Hello "<script>"@x.test, open https://app.example.test/?a=1&b=2\n');
    expect(mail.subject).toBe('Welcome to P, "<script>"@x.test');
  });

  it('removes C0, C1 and bidi controls from values in every part, and line breaks from the Subject', () => {
    const bidi = 'user\u202egnp.exe\u2066\u2069\u200e\u200f\u061c\u202a@x.test';
    const mail = renderMail(template, { email: `${bidi}\u0007\u0085\r\nBcc: victim@evil.test`, link: 'https://a.test/', product: 'P\tQ' });
    expect(mail.text).toBe('Hello usergnp.exe@x.testBcc: victim@evil.test, open https://a.test/\n');
    expect(mail.html).toContain('Hello usergnp.exe@x.testBcc: victim@evil.test</p>');
    expect(mail.subject).toBe('Welcome to PQ, usergnp.exe@x.testBcc: victim@evil.test');
    expect(mail.subject).not.toMatch(/[\r\n]/);
  });

  it('fills in one pass: a value that spells a placeholder stays as it is', () => {
    expect(renderMail(template, { email: '{{link}}', link: 'https://a.test/', product: '{{email}}' }).subject).toBe('Welcome to {{email}}, {{link}}');
  });

  it('the built-in French texts are the spec\'s, word for word', () => {
    const words = new MailWords({ language: 'fr' }, new Map(), 'auth-gateway');
    const values = { link: 'https://app.test/x?token=t', email: 'a@b.test', expires_in_minutes: 30 };
    expect(words.compose('reset', 'fr', values)).toEqual({
      subject: 'Réinitialisation de votre mot de passe',
      text: 'Bonjour,\n\nUne réinitialisation du mot de passe du compte a@b.test a été demandée.\nPour choisir un nouveau mot de passe, ouvrez ce lien dans les 30 minutes :\n\n'
        + 'https://app.test/x?token=t\n\nCe lien ne fonctionne qu’une fois. Si vous n’êtes pas à l’origine de cette demande, ignorez ce message : votre mot de passe ne change pas.\n',
    });
    expect(words.compose('magic', 'fr', values)).toEqual({
      subject: 'Votre lien de connexion',
      text: 'Bonjour,\n\nUne connexion au compte a@b.test a été demandée.\nPour vous connecter, ouvrez ce lien dans les 15 minutes :\n\n'
        + 'https://app.test/x?token=t\n\nCe lien ne fonctionne qu’une fois. Si vous n’êtes pas à l’origine de cette demande, ignorez ce message : personne ne peut se connecter sans lui.\n',
    });
    expect(words.compose('verify', 'fr', values)).toEqual({
      subject: 'Confirmez votre adresse email',
      text: 'Bonjour,\n\nPour confirmer que l’adresse a@b.test est bien la vôtre, ouvrez ce lien dans les 24 heures :\n\n'
        + 'https://app.test/x?token=t\n\nCe lien ne fonctionne qu’une fois. Si vous n’avez pas créé de compte, ignorez ce message.\n',
    });
  });
});

describe('gateway check and mail templates', () => {
  const dirs: string[] = [];
  const folder = (files: Record<string, string>) => {
    const dir = fileTree('gateway-mail-check-', files);
    dirs.push(dir);
    return dir;
  };
  const problemsOf = async (files: Record<string, string>) => (await readMailTemplates(folder(files))).problems.map((p) => p.slice(p.lastIndexOf(path.sep) + 1));
  const VALID = { 'en/reset.subject.txt': 'Reset\n', 'en/reset.txt': '{{link}}\n' };
  afterAll(() => { for (const dir of dirs) rmSync(dir, { recursive: true, force: true }); });

  it('accepts the documented templates', async () => {
    expect(await problemsOf(DOCUMENTED(''))).toEqual([]);
    expect(await problemsOf({ ...VALID, 'fr/org_invitation.subject.txt': '{{inviter_email}} vous invite dans {{org_name}}', 'fr/org_invitation.txt': '{{link}}', README: 'notes' })).toEqual([]);
    // <title> and <textarea> decode entities as text does: an encoded value cannot close them.
    expect(await problemsOf({ ...VALID, 'en/reset.html': '<title>{{product}}</title><p class=\'x\' data-x="{{email}}">{{email}}</p><a href="{{ link }}">go</a>' })).toEqual([]);
  });

  it.each([
    ['an unknown placeholder', { 'en/reset.txt': '{{link}} {{username}}' }, 'reset.txt:1: unknown placeholder {{username}} (reset has {{link}}, {{email}}, {{product}}, {{expires_in_minutes}})'],
    ['a placeholder of another kind', { 'en/reset.txt': '{{link}}\n{{org_name}}' }, 'reset.txt:2: unknown placeholder {{org_name}}'],
    ['one inside <script>', { 'en/reset.html': '<a href="{{link}}">x</a><script>var e = "{{email}}";</script>' }, 'reset.html:1: {{email}} inside <script>, whose content is not HTML text'],
    ['one inside <style>', { 'en/reset.html': '<style>\np { color: {{product}} }\n</style><a href="{{link}}">x</a>' }, 'reset.html:2: {{product}} inside <style>'],
    ['one in an unquoted attribute', { 'en/reset.html': '<a href={{link}}>go</a>' }, 'reset.html:1: {{link}} in the unquoted value of the attribute href (quote it: href="…")'],
    ['one in an event handler', { 'en/reset.html': '<a href="{{link}}" onclick="track(\'{{email}}\')">go</a>' }, 'reset.html:1: {{email}} in the event handler onclick'],
    ['one in a style attribute', { 'en/reset.html': '<a href="{{link}}" style="color:{{product}}">go</a>' }, 'reset.html:1: {{product}} in the attribute style'],
    ['one in a tag outside a value', { 'en/reset.html': '<a {{email}} href="{{link}}">go</a>' }, 'reset.html:1: {{email}} inside a tag but not in a quoted attribute value'],
    ['a value at the start of a URL', { 'en/reset.html': '<a href="{{email}}">{{link}}</a>' }, 'reset.html:1: {{email}} at the start of the URL attribute href: only {{link}} may begin a URL'],
    ['a body without the link', { 'en/reset.txt': 'Hello {{email}}' }, 'reset.txt: no {{link}}: the mail would not carry its link'],
    ['the link in a subject', { 'en/reset.subject.txt': 'Open {{link}}' }, 'reset.subject.txt:1: {{link}} in a subject'],
    ['a subject of two lines', { 'en/reset.subject.txt': 'Reset\nBcc: x@evil.test\n' }, 'reset.subject.txt: a subject is one line, without control characters'],
    ['a subject without its text', { 'en/magic.subject.txt': 'Sign in' }, 'magic: expected both magic.subject.txt and magic.txt (magic.html is optional)'],
    ['a file that is no template', { 'en/welcome.txt': '{{link}}' }, 'welcome.txt: expected <kind>.subject.txt, <kind>.txt or <kind>.html, the kinds being verify, reset, magic, org_invitation, '
      + 'account_invitation'],
    ['a folder that is no language', { 'English/reset.txt': '{{link}}' }, 'English: expected a folder named after a lower-case language tag, such as en or pt-br'],
  ])('refuses %s', async (_what, files, problem) => {
    const found = await problemsOf({ ...VALID, ...files });
    expect(found.some((p) => p.startsWith(problem)), found.join('\n')).toBe(true);
  });

  it('names the setting and the file in `gateway check`, and start refuses the folder too', async () => {
    const dir = folder({ 'gateway.yaml': docsExample('accounts', 'mail-templates'), 'mail-templates/en/verify.subject.txt': 'Hi', 'mail-templates/en/verify.txt': '{{link}} {{name}}' });
    const config = testConfigFromFile(docsExample('accounts', 'mail-templates'), dir, { SMTP_URL: 'smtp://127.0.0.1:2525' });
    const file = path.join(dir, 'mail-templates/en/verify.txt');
    expect(await checkFiles(config)).toEqual([`mail.templates: ${file}:1: unknown placeholder {{name}} (verify has {{link}}, {{email}}, {{product}}, {{expires_in_minutes}})`]);
    await expect(mailWordsOf({ language: 'fr' }, config.mail)).rejects.toThrow(MailTemplatesError);
    ensureBuilt();
    const run = await gateway(['check', '--config', path.join(dir, 'gateway.yaml')], { env: { SMTP_URL: 'smtp://127.0.0.1:2525' } });
    expect(run.code).toBe(1);
    expect(run.stderr + run.stdout).toContain('mail.templates: ');
    expect(run.stderr + run.stdout).toContain('unknown placeholder {{name}}');
  });

  it('refuses a link page that is not https, but for http on a loopback host', () => {
    const mail = (url: string) => `mail:\n  smtp: smtp://127.0.0.1:2525\n  from: a@example.test\n  resetUrl: ${url}\n  verifyUrl: https://app.example.test/v?token={token}\n`;
    expect(configProblems(mail('http://app.example.test/r?token={token}'))).toEqual([
      'mail.resetUrl: expected an https:// URL (http:// only on 127.0.0.1, ::1 or localhost: the link\'s token would cross the network in clear), got "http://app.example.test/r?token={token}"',
    ]);
    for (const url of ['http://127.0.0.1:5173/r?token={token}', 'http://localhost/r?token={token}', 'http://[::1]:8080/r?token={token}', 'https://app.example.test/r?token={token}']) {
      expect(configProblems(mail(url)), url).toEqual([]);
    }
    expect(configProblems(`${mail('https://a.test/{token}')}auth:\n  magicLink:\n    url: http://app.example.test/m?token={token}\n`)).toEqual([
      expect.stringMatching(/^auth\.magicLink\.url: expected an https:\/\/ URL/),
    ]);
  });
});

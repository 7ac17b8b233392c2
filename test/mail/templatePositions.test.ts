// Issue 68, CONTRACT §33 "Templates: placeholders only where escaping is enough": the outside
// attack's three templates that `gateway check` accepted (`<{{email}}>`, a meta refresh, a
// `javascript:` URL), the address that made the first one a live `<svg onload>` in a real mail,
// and every position of a placeholder in an HTML template, refused or accepted, as a table.
import { rmSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkFiles } from '../../src/config/files.js';
import { renderMail, templateProblems } from '../../src/mail/index.js';
import { ensureBuilt, gateway } from '../helpers/cli.js';
import { docsBlock, docsExample } from '../helpers/docs.js';
import { closeSql, describeWithServices, newPassword, startTestGateway, testConfigFromFile, type TestGateway } from '../helpers/gateway.js';
import { fileTree } from '../helpers/fileTree.js';
import { startSmtpCatcher, type SmtpCatcher } from '../helpers/smtp.js';

/** The address of the attack: valid, and a tag with an event handler once it follows a `<`. */
const SVG_ADDRESS = (tag: string) => `svg/onload=alert\`1\`//${tag}@example.test`;

/** A folder of templates: docs/accounts.md's configuration beside `mail-templates/` holding `files`. */
function templateFolder(files: Record<string, string>): string {
  return fileTree('gateway-mail-positions-', { 'gateway.yaml': docsExample('accounts', 'mail-templates'), ...files });
}

const VERIFY = (html: string) => ({
  'mail-templates/en/verify.subject.txt': docsBlock('accounts', 'mail-verify-subject'),
  'mail-templates/en/verify.txt': docsBlock('accounts', 'mail-verify-text'),
  'mail-templates/en/verify.html': html,
});
/** The attack's three templates, one per kind. */
const ATTACK = {
  'mail-templates/en/verify.html': '<p>Hello <{{email}}>, <a href="{{link}}">confirm</a></p>',
  'mail-templates/en/reset.html': '<meta http-equiv="refresh" content="0;url=https://app.example.com/{{email}}"><a href="{{link}}">reset</a>',
  'mail-templates/en/magic.html': '<a href="javascript:{{link}}">sign in</a>',
};
const ATTACK_TEXTS = {
  'mail-templates/en/verify.subject.txt': 'Confirm', 'mail-templates/en/verify.txt': '{{link}}',
  'mail-templates/en/reset.subject.txt': 'Reset', 'mail-templates/en/reset.txt': '{{link}}',
  'mail-templates/en/magic.subject.txt': 'Sign in', 'mail-templates/en/magic.txt': '{{link}}',
};

describe('gateway check and the attack\'s templates (issue 68)', () => {
  const dirs: string[] = [];
  afterAll(() => { for (const dir of dirs) rmSync(dir, { recursive: true, force: true }); });

  it('refuses each of them, naming the file, the placeholder and why; so does `gateway check`', async () => {
    const dir = templateFolder({ ...ATTACK_TEXTS, ...ATTACK });
    dirs.push(dir);
    const file = (kind: string) => path.join(dir, `mail-templates/en/${kind}.html`);
    const problems = [
      `${file('magic')}:1: {{link}} in the attribute href, whose URL starts with the scheme javascript: (a value may follow only https:, http: or mailto:)`,
      `${file('reset')}:1: {{email}} in the attribute content of <meta>, which a mail client may read as a refresh to a URL or a header`,
      `${file('verify')}:1: {{email}} right after a "<": the value would be read as a tag (an address such as svg/onload=… makes <svg onload>)`,
    ];
    const config = testConfigFromFile(docsExample('accounts', 'mail-templates'), dir, { SMTP_URL: 'smtp://127.0.0.1:2525' });
    expect(await checkFiles(config)).toEqual([`mail.templates: ${problems.join('; ')}`]);
    ensureBuilt();
    const run = await gateway(['check', '--config', path.join(dir, 'gateway.yaml')], { env: { SMTP_URL: 'smtp://127.0.0.1:2525' } });
    expect(run.code).toBe(1);
    for (const line of problems) expect(run.stderr + run.stdout).toContain(line);
  });
});

describeWithServices('the address svg/onload=alert`1`// in a real HTML mail (issue 68)', () => {
  let smtp: SmtpCatcher;
  let gw: TestGateway | undefined;
  const dirs: string[] = [];
  beforeAll(async () => { smtp = await startSmtpCatcher(); });
  afterAll(async () => {
    await gw?.close();
    await smtp?.close();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
    await closeSql();
  });

  it('`<{{email}}>` keeps the gateway from starting: no mail can make a tag of the address', async () => {
    const dir = templateFolder(VERIFY(ATTACK['mail-templates/en/verify.html']));
    dirs.push(dir);
    const config = testConfigFromFile(docsExample('accounts', 'mail-templates'), dir, { SMTP_URL: smtp.url });
    const started = startTestGateway(config);
    // On the old code it started, and registering SVG_ADDRESS mailed `<p>Hello <svg/onload=alert`1`//…@example.test>`.
    await expect(started).rejects.toThrow(/verify\.html:1: \{\{email\}\} right after a "<"/);
  });

  it('the documented template: the address is text, with `/`, `=` and a backquote encoded too', async () => {
    const dir = templateFolder(VERIFY(docsBlock('accounts', 'mail-verify-html')));
    dirs.push(dir);
    gw = await startTestGateway(testConfigFromFile(docsExample('accounts', 'mail-templates'), dir, { SMTP_URL: smtp.url }));
    const email = SVG_ADDRESS(`d${Date.now()}`);
    expect((await gw.post('/api/v1/auth/register', { email, password: newPassword(), locale: 'en' })).status).toBe(201);
    const html = (await smtp.waitFor(email)).htmlSource!;
    const encoded = email.replace(/\//g, '&#47;').replace(/=/g, '&#61;').replace(/`/g, '&#96;');
    expect(html).toContain(`<b>${encoded}</b>`);
    expect(html).toContain(`title="Confirm ${encoded}"`);
    expect(html).not.toMatch(/<svg/i);
    expect(html).not.toContain('onload=');
  });
});

describe('every position of a placeholder in an HTML template (§33)', () => {
  const problem = (html: string) => templateProblems('t.html', 'org_invitation', 'html', html).map((p) => p.replace(/^t\.html:\d+: /, ''));
  const LINK = '<a href="{{link}}">x</a>';

  it.each([
    ['text', '<p>{{email}}</p>'],
    ['text after a "<" and a space', '<p>1 < {{expires_in_minutes}}</p>'],
    ['a quoted href of the link', '<a href="{{link}}">x</a>'],
    ['the link with spaces in its braces, single quotes', '<a href=\' {{ link }}\'>x</a>'],
    ['a value after https://', '<a href="https://x.example/{{email}}">x</a>'],
    ['a value after http: and mailto:', '<a href="http://x.example/?a={{email}}">x</a><a href="MailTo:{{inviter_email}}">y</a>'],
    ['a value after a relative path, a query, a fragment', '<a href="/p/{{email}}">x</a><a href="?e={{email}}">y</a><a href="#{{email}}">z</a>'],
    ['a value after the link', '<a href="{{link}}&amp;from={{email}}">x</a>'],
    ['a title, an alt, a data- attribute', '<p title="{{email}}" data-x=\'{{org_name}}\'><img alt="{{product}}" src="https://x.example/logo.png"></p>'],
    ['<title> and <textarea>, whose text decodes entities', '<title>{{product}}</title><textarea>{{email}}</textarea>'],
    ['after a <style> of CSS', '<style>p { color: red }</style><p>{{email}}</p>'],
    ['after a closed <template>', '<template><p>x</p></template><p>{{email}}</p>'],
    ['an attribute value holding "</template>"', '<p title="</template> {{email}}">x</p>'],
  ])('accepts %s', (_what, html) => {
    expect(problem(`${LINK}${html}`)).toEqual([]);
  });

  it.each([
    ['right after "<"', '<p><{{email}}></p>', '{{email}} right after a "<"'],
    ['in a tag\'s name', '<p{{email}}>x</p>', '{{email}} inside a tag but not in a quoted attribute value'],
    ['in an end tag\'s name (a bogus comment)', '<p>x</{{email}}></p>', '{{email}} in a comment'],
    ['in an attribute\'s name', '<p data-{{email}}="1">x</p>', '{{email}} inside a tag but not in a quoted attribute value'],
    ['as an attribute', '<p {{email}}>x</p>', '{{email}} inside a tag but not in a quoted attribute value'],
    ['in a name that starts with "=" (no value)', '<p ="{{email}}">x</p>', '{{email}} inside a tag but not in a quoted attribute value'],
    ['after a tag name ended by a no-break space (not HTML white space)', '<p\u00a0title="{{email}}">x</p>', '{{email}} inside a tag but not in a quoted attribute value'],
    ['in an unquoted value', '<p title={{email}}>x</p>', '{{email}} in the unquoted value of the attribute title'],
    ['in <meta content>', '<meta http-equiv="refresh" content="0;url={{email}}">', '{{email}} in the attribute content of <meta>'],
    ['in any <meta> attribute', '<meta name="{{product}}" content="x">', '{{product}} in the attribute name of <meta>'],
    ['after javascript:', '<a href="javascript:{{link}}">x</a>', '{{link}} in the attribute href, whose URL starts with the scheme javascript:'],
    ['after JavaScript: with spaces and a tab', '<a href=" Java\tScript:{{email}}">x</a>', '{{email}} in the attribute href, whose URL starts with the scheme javascript:'],
    ['after data:', '<img src="data:text/html,{{email}}">', '{{email}} in the attribute src, whose URL starts with the scheme data:'],
    ['at the start of a URL', '<a href="{{email}}">x</a>', '{{email}} at the start of the URL attribute href'],
    ['where it could finish the scheme', '<a href="java{{email}}">x</a>', '{{email}} in the attribute href before its URL\'s scheme is settled'],
    ['after an entity in the scheme', '<a href="javascript&colon;{{link}}">x</a>', '{{link}} in the attribute href before its URL\'s scheme is settled'],
    ['after another value that could set the scheme', '<a href="{{email}}{{link}}">x</a>', '{{link}} in the attribute href before its URL\'s scheme is settled'],
    ['at the start of an svg animation\'s to', '<svg><animate attributeName="href" to="{{email}}"/></svg>', '{{email}} at the start of the URL attribute to'],
    ['in srcset', '<img src="https://x.example/a.png" srcset="https://x.example/{{email}} 2x">', '{{email}} in the attribute srcset'],
    ['in style', '<p style="color: {{product}}">x</p>', '{{product}} in the attribute style'],
    ['in an on* handler', '<p onmouseover="x(\'{{email}}\')">x</p>', '{{email}} in the event handler onmouseover'],
    ['in srcdoc', '<iframe srcdoc="<p>{{email}}</p>"></iframe>', '{{email}} in the attribute srcdoc'],
    ['in a comment', '<!-- {{email}} -->', '{{email}} in a comment'],
    ['in an Outlook conditional comment', '<!--[if mso]><p>{{email}}</p><![endif]-->', '{{email}} in a comment'],
    ['in a CDATA section (svg)', '<svg><![CDATA[ {{email}} ]]></svg>', '{{email}} in a comment'],
    ['after a CDATA section with a ">" (a bogus comment that ends there outside <svg>)', '<![CDATA[ > ]]><p>{{email}}</p>', '{{email}} in or after a comment whose end depends'],
    ['after a comment that --!> ends for a browser, not for older readers', '<!-- x --!><script>-->{{email}}</script>', '{{email}} in or after a comment whose end depends'],
    ['after <!--> (an empty comment to a browser)', '<!--><p>{{email}}</p>-->', '{{email}} in or after a comment whose end depends'],
    ['in a declaration', '<!DOCTYPE {{email}}>', '{{email}} in a comment'],
    ['in <script>', '<script>var e = "{{email}}";</script>', '{{email}} inside <script>'],
    ['in <style>', '<style>p::after { content: "{{email}}" }</style>', '{{email}} inside <style>'],
    ['in <noscript>', '<noscript><p>{{email}}</p></noscript>', '{{email}} inside <noscript>'],
    ['in <template>', '<template><p>{{email}}</p></template>', '{{email}} inside <template>'],
    ['in a nested <template>, after the inner one closes', '<template><template></template><p>{{email}}</p></template>', '{{email}} inside <template>'],
    ['in <plaintext>, which never ends', '<plaintext></plaintext><p>{{email}}</p>', '{{email}} inside <plaintext>'],
    ['after </scriptx>, which does not end a <script>', '<script></scriptx><p>{{email}}</p></script>', '{{email}} inside <script>'],
    ['after a <script> holding "<!--" (where it ends depends on escapes)', '<script><!--<script></script><p>{{email}}</p></script>', '{{email}} after <script>'],
    ['after a <title> holding a tag (svg reads it as markup)', '<title><a title="</title><style>">x</title><p>{{email}}</p>', '{{email}} after <title>'],
  ])('refuses %s', (_what, html, expected) => {
    const found = problem(`${LINK}${html}`);
    expect(found.some((p) => p.startsWith(expected)), found.join('\n')).toBe(true);
  });
});

describe('escaping a value for HTML (§33)', () => {
  it('encodes `, = and / besides & < > " \'', () => {
    const html = renderMail({ subject: 's', text: '{{link}}', html: '<p title="{{email}}">{{email}}</p>' }, { email: 'a`b=c/d&<>"\'@x.test', link: 'https://x.test/' }).html;
    expect(html).toBe('<p title="a&#96;b&#61;c&#47;d&amp;&lt;&gt;&quot;&#39;@x.test">a&#96;b&#61;c&#47;d&amp;&lt;&gt;&quot;&#39;@x.test</p>');
  });
});

// Issue 68, CONTRACT §33, the rest of the class: the template scanner of src/mail/html.ts is judged
// by a real HTML parser. Random templates are cut from the pieces that decide HTML contexts
// (`<`, quotes, comments, raw-text elements, URL schemes, entities, white space that is not HTML's);
// each one `gateway check` accepts is rendered with hostile values and with plain ones, and parsed
// by Chromium twice (DOMParser: scripting off, so <noscript> is markup; innerHTML of a live page:
// scripting on, <noscript> raw). A hostile value must change no element or attribute, and stand
// only in text outside raw-text elements, comments and <template>, or in an attribute value that is
// no handler, style, srcdoc, srcset or <meta>, and whose URL (if any) keeps a safe scheme.
import fc from 'fast-check';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { renderMail, templateProblems } from '../../src/mail/index.js';
import { describeWithBrowser, launchBrowser, type TestBrowser } from '../helpers/browser.js';

const MARK = 'Zq9';
const PIECES = [
  '{{email}}', '{{email}}', '{{link}}', '{{org_name}}', '<', '</', '>', '/>', '<!--', '-->', '--!>', '<!', '<?', '<![CDATA[', ']]>',
  '"', '\'', '=', ' ', '\t', '\u00a0', '&', '&colon;', ':', '/', '#', 'x',
  'p', 'a', 'b', 'svg', 'math', 'title', 'textarea', 'script', 'style', 'noscript', 'template', 'iframe', 'xmp', 'plaintext', 'meta',
  ' href=', ' href="', ' src="', ' title="', ' style="', ' onclick="', ' srcset="', ' content="', ' to="', ' xlink:href="',
  'javascript:', 'JaVa\tScript:', 'data:', 'https://x.test/', 'mailto:', 'http:', '?q=',
  '<svg>', '<math>', '<style>', '</style>', '<script>', '</script>', '<title>', '</title>', '<template>', '</template>', '<noscript>', '</noscript>',
  '<a href="', '<p title="', '<meta content="', '<img src="',
];
/** Values that break out of any context escaping does not cover, each marked. */
const HOSTILE = {
  email: `${MARK} svg/onload=alert\`1\`//"'<svg onload=1>--></style></script></title></template>javascript:@e.test`,
  org_name: `javascript:${MARK}<b>x</b>&amp;"' onmouseover=alert(1) `,
  link: `https://app.example.test/join?token=${MARK}`,
};
const PLAIN = { email: MARK, org_name: MARK, link: 'https://app.example.test/join' };

/** Accepted templates among `runs` random ones. */
function acceptedTemplates(runs: number, seed: number): string[] {
  const template = fc.array(fc.constantFrom(...PIECES), { minLength: 2, maxLength: 16 }).map((pieces) => pieces.join(''));
  return fc.sample(template, { numRuns: runs, seed }).filter((html) => html.includes('{{')
    && templateProblems('t.html', 'org_invitation', 'html', html).every((p) => p.includes('no {{link}}')));
}

/** Runs in the page: what the HTML parser made of `html`, and where the mark stands where it must not. */
function judge(html: string, mark: string, live: boolean): { shape: string; wrong: string[] } {
  const RAW = new Set(['script', 'style', 'xmp', 'iframe', 'noembed', 'noframes', 'noscript', 'plaintext']);
  const URLS = new Set(['href', 'src', 'action', 'formaction', 'background', 'poster', 'cite', 'xlink:href', 'data', 'to', 'from', 'by', 'values']);
  const shape: string[] = [];
  const wrong: string[] = [];
  const walk = (node: Node, raw: string | undefined): void => {
    for (const child of Array.from(node.childNodes)) {
      if (child instanceof Element) {
        const name = child.localName;
        const attributes = Array.from(child.attributes);
        shape.push(`<${child.namespaceURI} ${name} ${attributes.map((a) => a.name).join(' ')}>`);
        for (const a of attributes.filter((x) => x.value.includes(mark))) {
          const risky = a.name.startsWith('on') || ['style', 'srcdoc', 'srcset', 'imagesrcset'].includes(a.name) || name === 'meta' || raw;
          // A URL that does not parse (`http:javascript:x` has no host) goes nowhere.
          const scheme = URLS.has(a.name) && URL.canParse(a.value, 'https://base.test/') ? new URL(a.value, 'https://base.test/').protocol : '';
          if (risky || (scheme && !['http:', 'https:', 'mailto:'].includes(scheme))) wrong.push(`${name} ${a.name}="${a.value}"`);
        }
        const inner = raw ?? (RAW.has(name) ? name : undefined);
        walk(child, inner);
        if (child instanceof HTMLTemplateElement) walk(child.content, 'template');
      } else if (child.nodeType === Node.COMMENT_NODE || child.nodeType === Node.CDATA_SECTION_NODE) {
        shape.push('#comment');
        if ((child as CharacterData).data.includes(mark)) wrong.push(`comment ${(child as CharacterData).data}`);
      } else if (child.nodeType === Node.TEXT_NODE && raw && (child as Text).data.includes(mark)) {
        wrong.push(`text in <${raw}>`);
      }
    }
  };
  if (live) {
    const div = document.createElement('div');
    div.innerHTML = html;
    walk(div, undefined);
  } else {
    walk(new DOMParser().parseFromString(html, 'text/html'), undefined);
  }
  return { shape: shape.join(''), wrong };
}

describeWithBrowser('the template scanner against Chromium\'s parser (issue 68)', () => {
  let chromium: TestBrowser;
  beforeAll(async () => { chromium = await launchBrowser(); });
  afterAll(async () => { await chromium?.close(); });

  it('a template `gateway check` accepts gives a hostile value no element, attribute or unsafe context', async () => {
    const seed = Date.now();
    const templates = acceptedTemplates(20_000, seed);
    expect(templates.length, `seed ${seed}`).toBeGreaterThan(300);
    const page = await chromium.browser.newPage();
    const cases = templates.map((html) => ({
      html,
      hostile: renderMail({ subject: 's', text: 't', html }, HOSTILE).html!,
      plain: renderMail({ subject: 's', text: 't', html }, PLAIN).html!,
    }));
    const judged = await page.evaluate((all, mark, source) => {
      const fn = new Function(`return (${source})`)() as typeof judge;
      return all.flatMap((c) => [false, true].map((live) => ({ html: c.html, live, hostile: fn(c.hostile, mark, live), plain: fn(c.plain, mark, live) })));
    }, cases, MARK, judge.toString());
    await page.close();
    const broken = judged.filter((j) => j.hostile.shape !== j.plain.shape || j.hostile.wrong.length > 0)
      .map((j) => `${JSON.stringify(j.html)} (${j.live ? 'scripting on' : 'scripting off'}): ${j.hostile.wrong.join(', ') || 'another shape'}`);
    expect(broken.slice(0, 10), `seed ${seed}, ${templates.length} accepted templates`).toEqual([]);
  }, 120_000);
});

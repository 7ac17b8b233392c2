// Where a placeholder stands in an HTML mail template (CONTRACT §20, §33), so that each one is
// escaped for its context or refused at `gateway check`. Entity encoding makes a value safe in HTML
// text and in a quoted attribute value, nowhere else: an unquoted attribute ends at the value's first
// space (`<a title={{email}}>` lets `x onmouseover=…` add an attribute), a value right after `<`
// names a tag (`<{{email}}>` with `svg/onload=alert`1`//@x.test` is a live <svg onload>), and inside
// <script>, <style>, an event handler or a style attribute the browser decodes the entities before
// it runs or parses the code.
//
// The scanner below follows the WHATWG tokenizer where it decides those contexts (which characters
// are white space, what opens a tag, a comment or a bogus comment, where raw text ends). Where a
// mail client could read the template otherwise, nothing after the spot can be placed: a comment
// that `--!>` or `<!-->` ends for one reader and not another, a raw-text element whose content
// holds a `<` (a <script> with `<!--`; a <style> or <title> inside <svg>, parsed as markup there).
// It is no parser of the whole language (no tree: a library such as parse5 would also need the tree
// builder's foreign-content rules to do better), and what it cannot place is refused: a placeholder
// is accepted only where it is positively text or a quoted value. test/browser/mailTemplates.test.ts
// holds it against Chromium's parser on random templates.

/** The tokenizer's white space: tab, LF, FF, CR, space (a no-break space is part of a tag's name). */
const WHITE = /[\t\n\f\r ]/;
const ALPHA = /[A-Za-z]/;
/**
 * Elements whose content is not HTML text: a placeholder there is refused, and their content ends
 * at the first `</name` followed by white space, `/` or `>` (<plaintext> never ends). <noscript> is
 * raw text when a client runs scripts and markup when it does not: with no `<` inside, both agree.
 */
const RAW_TEXT = new Set(['script', 'style', 'xmp', 'iframe', 'noembed', 'noframes', 'noscript', 'plaintext']);
/** Elements whose text decodes entities: an encoded value cannot close them, it is text. */
const RCDATA = new Set(['title', 'textarea']);
/** Attributes whose value a browser reads as a URL: a value may follow only a settled https:, http: or mailto: (or a relative path). */
const URL_ATTRIBUTES = new Set(['href', 'src', 'action', 'formaction', 'background', 'poster', 'cite', 'xlink:href', 'data', 'longdesc', 'manifest',
  'codebase', 'classid', 'archive', 'usemap', 'lowsrc', 'dynsrc', 'ping', 'icon', 'profile', 'to', 'from', 'by']);
/** Attributes holding lists of URLs, CSS or HTML: no placeholder at all. */
const LIST_ATTRIBUTES = new Set(['srcset', 'imagesrcset', 'values']);
const SAFE_SCHEMES = new Set(['https', 'http', 'mailto']);

/** A stretch of the template and what a placeholder in it would be. */
export interface Region {
  start: number;
  end: number;
  /**
   * text: HTML text; value: a quoted attribute's value; comment: a comment, a declaration, a
   * CDATA section or a bogus comment; raw: a raw-text element's content; lost: after a raw-text
   * element or a comment whose end depends on the client; markup or unquoted: the rest of a tag.
   */
  kind: 'text' | 'value' | 'unquoted' | 'markup' | 'comment' | 'raw' | 'lost';
  /** The attribute (value, unquoted) or element (raw, lost) it belongs to, lower-cased. */
  name?: string;
  /** The element whose tag holds the attribute (value, unquoted). */
  element?: string;
  /** The innermost <template> it stands in: its content is never the mail's text. */
  within?: string;
}
type Push = (region: Region) => void;

/**
 * The comment, declaration, CDATA section or bogus comment that starts at `i`. Where readers could
 * end it differently (`--!>` and `<!-->` end a comment for the tokenizer, not for older readers; a
 * CDATA section ends at `]]>` in <svg> and at the first `>` elsewhere), what follows it could be
 * markup to one and comment to another: nothing from there on can be placed.
 */
function commentRegion(html: string, i: number): Region {
  const after = (close: string, from: number) => {
    const found = html.indexOf(close, from);
    return found === -1 ? html.length : found + close.length;
  };
  let first = after('>', i + 2);
  let last = first;
  if (html.startsWith('<!--', i)) {
    last = after('-->', i + 4);
    first = html.startsWith('<!-->', i) ? i + 5 : html.startsWith('<!--->', i) ? i + 6 : Math.min(last, after('--!>', i + 4));
  } else if (html.startsWith('<![CDATA[', i)) {
    last = after(']]>', i + 9);
  }
  return first === last ? { start: i, end: first, kind: 'comment' } : { start: i, end: html.length, kind: 'lost' };
}

/** Reads one attribute at `i` (after white space): its regions, and where it ends. */
function readAttribute(html: string, i: number, element: string, push: Push): number {
  // A name's first character is the name's even when it is `=` (`<p ="x">` has an attribute `="x"`).
  let j = i + 1;
  while (j < html.length && !/[\t\n\f\r />=]/.test(html[j]!)) j++;
  const name = html.slice(i, j).toLowerCase();
  push({ start: i, end: j, kind: 'markup' });
  let k = j;
  while (WHITE.test(html[k] ?? '')) k++;
  if (html[k] !== '=') return j;
  k++;
  while (WHITE.test(html[k] ?? '')) k++;
  const quote = html[k];
  if (quote === '"' || quote === '\'') {
    const close = html.indexOf(quote, k + 1);
    const end = close === -1 ? html.length : close;
    push({ start: k + 1, end, kind: 'value', name, element });
    return Math.min(html.length, end + 1);
  }
  let end = k;
  while (end < html.length && !/[\t\n\f\r >]/.test(html[end]!)) end++;
  push({ start: k, end, kind: 'unquoted', name, element });
  return end;
}

/** Reads the tag that starts at `i` (`<` then a letter, or `</` then a letter); returns where it ends and its element's name. */
function readTag(html: string, i: number, push: Push): { end: number; element: string; closing: boolean } {
  const closing = html[i + 1] === '/';
  let j = i + (closing ? 2 : 1);
  while (j < html.length && !/[\t\n\f\r />]/.test(html[j]!)) j++;
  const element = html.slice(i + (closing ? 2 : 1), j).toLowerCase();
  push({ start: i, end: j, kind: 'markup' });
  while (j < html.length && html[j] !== '>') {
    if (/[\t\n\f\r /]/.test(html[j]!)) {
      push({ start: j, end: j + 1, kind: 'markup' });
      j++;
    } else {
      j = readAttribute(html, j, element, push);
    }
  }
  return { end: Math.min(html.length, j + 1), element, closing };
}

/** The content of the raw-text or RCDATA element `element` whose start tag ends at `i`, as regions to the end of the content or of the template. */
function rawContent(html: string, i: number, element: string): Region[] {
  if (element === 'plaintext') return [{ start: i, end: html.length, kind: 'raw', name: element }];
  const close = new RegExp(`</${element}[\\t\\n\\f\\r />]`, 'i').exec(html.slice(i));
  const end = close ? i + close.index : html.length;
  const inside: Region = { start: i, end, kind: RCDATA.has(element) ? 'text' : 'raw', name: element };
  // With no `<` inside, the content is one text whether a client reads it raw or as markup (in
  // <svg>, a <style> or <title> is parsed as markup; a <script> with `<!--` ends at another
  // `</script>`): otherwise where it ends is the client's, and nothing after it can be placed.
  if (!html.slice(i, end).includes('<')) return [inside];
  const lost: Region = { start: end, end: html.length, kind: 'lost', name: element };
  return RCDATA.has(element) ? [{ ...lost, start: i }] : [inside, lost];
}

/** The template cut into regions, in order, covering it whole. */
export function htmlRegions(html: string): Region[] {
  const regions: Region[] = [];
  // Open <template> elements: the tokenizer reads their content as markup, nested ones included.
  const templates: string[] = [];
  const push: Push = (region) => regions.push(templates.length ? { ...region, within: 'template' } : region);
  let i = 0;
  while (i < html.length) {
    const open = html.indexOf('<', i);
    const textEnd = open === -1 ? html.length : open;
    if (textEnd > i) push({ start: i, end: textEnd, kind: 'text' });
    if (open === -1) break;
    const next = html[open + 1] ?? '';
    if (next === '!' || next === '?' || (next === '/' && !ALPHA.test(html[open + 2] ?? '') && html[open + 2] !== '>')) {
      // `<!…>`, `<?…>` and `</` then no letter (`</{{email}}>`) are comments to the tokenizer.
      const comment = commentRegion(html, open);
      push(comment);
      i = comment.end;
    } else if (ALPHA.test(next) || next === '/') {
      const tag = readTag(html, open, push);
      i = tag.end;
      if (tag.element === 'template') {
        if (!tag.closing) templates.push(tag.element);
        else templates.pop();
      } else if (!tag.closing && (RAW_TEXT.has(tag.element) || RCDATA.has(tag.element))) {
        const content = rawContent(html, i, tag.element);
        content.forEach(push);
        i = content.at(-1)!.end;
      }
    } else {
      push({ start: open, end: open + 1, kind: 'text' });
      i = open + 1;
    }
  }
  return regions;
}

/** Why a placeholder in the URL attribute `attribute`, at `index` after `start`, could change what the URL does; undefined when it cannot. */
function urlProblem(html: string, start: number, index: number, attribute: string, name: string): string | undefined {
  // What the URL parser reads before the placeholder: leading spaces and controls dropped, tabs and line breaks removed anywhere.
  // eslint-disable-next-line no-control-regex -- the controls a URL parser drops are what is removed
  const before = html.slice(start, index).replace(/^[\u0000-\u0020]+/, '').replace(/[\t\n\r]/g, '');
  if (before === '') return name === 'link' ? undefined : `at the start of the URL attribute ${attribute}: only {{link}} may begin a URL`;
  // {{link}} is the gateway's own URL, https: (http: on loopback), checked with the configuration.
  if (/^\{\{\s*link\s*\}\}/.test(before)) return undefined;
  for (let k = 0; k < before.length; k++) {
    const c = before[k]!;
    if (c === ':') {
      const scheme = before.slice(0, k).toLowerCase();
      if (SAFE_SCHEMES.has(scheme)) return undefined;
      return `in the attribute ${attribute}, whose URL starts with the scheme ${scheme}: (a value may follow only https:, http: or mailto:)`;
    }
    if (c === '/' || c === '?' || c === '#') return undefined;
    // An entity (`&colon;`) or another placeholder could still end the scheme: refuse rather than decode.
    if (c === '&' || c === '{') break;
  }
  return `in the attribute ${attribute} before its URL's scheme is settled: the value could make it javascript:`;
}

/** Why a placeholder in a quoted value (`region`) cannot be escaped where it stands; undefined when it can. */
function valueProblem(html: string, region: Region, index: number, name: string): string | undefined {
  const attribute = region.name ?? '';
  if (region.element === 'meta') return `in the attribute ${attribute} of <meta>, which a mail client may read as a refresh to a URL or a header`;
  if (attribute.startsWith('on')) return `in the event handler ${attribute}, which runs its value as a script`;
  if (attribute === 'style' || attribute === 'srcdoc') return `in the attribute ${attribute}, whose value is parsed as CSS or HTML`;
  if (LIST_ATTRIBUTES.has(attribute)) return `in the attribute ${attribute}, a list of URLs each of which could take its scheme from the value`;
  return URL_ATTRIBUTES.has(attribute) ? urlProblem(html, region.start, index, attribute, name) : undefined;
}

/** Why a placeholder at `index` (of `name`) cannot be escaped where it stands; undefined when it can. */
export function placementProblem(html: string, regions: readonly Region[], index: number, name: string): string | undefined {
  const region = regions.find((r) => r.start <= index && index < r.end);
  if (!region || region.kind === 'markup') return 'inside a tag but not in a quoted attribute value';
  if (region.kind === 'comment') return 'in a comment or a declaration (Outlook reads <!--[if mso]> comments as HTML; a value there is not text)';
  if (region.kind === 'raw') return `inside <${region.name}>, whose content is not HTML text`;
  if (region.kind === 'lost') {
    if (region.name === undefined) return 'in or after a comment whose end depends on the mail client (--!>, <!-->, <![CDATA[)';
    return `after <${region.name}>, whose content holds a "<": where it ends depends on the mail client`;
  }
  if (region.kind === 'unquoted') return `in the unquoted value of the attribute ${region.name} (quote it: ${region.name}="…")`;
  if (region.within) return `inside <${region.within}>, whose content is not the mail's text`;
  if (region.kind === 'value') return valueProblem(html, region, index, name);
  if (html[index - 1] === '<') return 'right after a "<": the value would be read as a tag (an address such as svg/onload=… makes <svg onload>)';
  return undefined;
}

const ENTITIES: Readonly<Record<string, string>> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', '\'': '&#39;', '`': '&#96;', '=': '&#61;', '/': '&#47;' };

/**
 * A value for HTML text or a quoted attribute value: the five characters that could end either,
 * entity-encoded, and `` ` ``, `=` and `/` too (§33): a client that takes a backquote for a quote
 * (old Internet Explorer) or a value that lands in a tag anyway gets no attribute or tag of it.
 */
export function escapeHtml(value: string): string {
  return value.replace(/[&<>"'`=/]/g, (c) => ENTITIES[c]!);
}

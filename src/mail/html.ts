// Where a placeholder stands in an HTML mail template (CONTRACT §20), so that each one is escaped
// for its context or refused at `gateway check`. Entity encoding makes a value safe in HTML text and
// in a quoted attribute value, nowhere else: an unquoted attribute ends at the value's first space
// (`<a title={{email}}>` lets `x onmouseover=…` add an attribute), and inside <script>, <style>,
// an event handler or a style attribute the browser decodes the entities before it runs or parses
// the code. So the scanner below only needs to tell those apart; it is not a full HTML parser, and
// what it cannot place (a placeholder in a tag's name, a comment, a declaration) is refused too.

/**
 * Elements whose content is not HTML text: a placeholder there is refused. <title> and <textarea>
 * are not among them: their text decodes entities and an encoded `<` cannot close them.
 */
const RAW_TEXT = new Set(['script', 'style', 'xmp', 'iframe', 'noembed', 'noframes', 'noscript', 'plaintext', 'template']);
/** Attributes whose value a browser reads as a URL: only the gateway's own link may begin one (no `javascript:` from a value). */
const URL_ATTRIBUTES = new Set(['href', 'src', 'action', 'formaction', 'background', 'poster', 'cite', 'xlink:href', 'srcset', 'data', 'longdesc', 'manifest']);

/** A stretch of the template and what a placeholder in it would be. */
export interface Region {
  start: number;
  end: number;
  /** text: HTML text; value: a quoted attribute's value; anything else refuses a placeholder. */
  kind: 'text' | 'value' | 'unquoted' | 'markup' | 'raw';
  /** The attribute (value, unquoted) or element (raw) it belongs to, lower-cased. */
  name?: string;
}

const NAME_END = /[\s/>]/;

/** The end of a comment, declaration or processing instruction that starts at `i`. */
function skipMarkup(html: string, i: number): number {
  const close = html.startsWith('<!--', i) ? html.indexOf('-->', i + 4) : html.indexOf('>', i);
  if (close === -1) return html.length;
  return close + (html.startsWith('<!--', i) ? 3 : 1);
}

/** Reads one attribute at `i` (after whitespace): its regions, and where it ends. */
function readAttribute(html: string, i: number, regions: Region[]): number {
  let j = i;
  while (j < html.length && !/[\s/>=]/.test(html[j]!)) j++;
  const name = html.slice(i, j).toLowerCase();
  regions.push({ start: i, end: j, kind: 'markup' });
  let k = j;
  while (/\s/.test(html[k] ?? '')) k++;
  if (html[k] !== '=') return Math.max(j, i + 1);
  k++;
  while (/\s/.test(html[k] ?? '')) k++;
  const quote = html[k];
  if (quote === '"' || quote === '\'') {
    const close = html.indexOf(quote, k + 1);
    const end = close === -1 ? html.length : close;
    regions.push({ start: k + 1, end, kind: 'value', name });
    return Math.min(html.length, end + 1);
  }
  let end = k;
  while (end < html.length && !/[\s>]/.test(html[end]!)) end++;
  regions.push({ start: k, end, kind: 'unquoted', name });
  return end;
}

/** Reads the tag that starts at `i` (`<` then a letter or `/`); returns where it ends and its element's name. */
function readTag(html: string, i: number, regions: Region[]): { end: number; element: string; closing: boolean } {
  const closing = html[i + 1] === '/';
  let j = i + (closing ? 2 : 1);
  while (j < html.length && !NAME_END.test(html[j]!)) j++;
  const element = html.slice(i + (closing ? 2 : 1), j).toLowerCase();
  regions.push({ start: i, end: j, kind: 'markup' });
  while (j < html.length && html[j] !== '>') {
    if (/[\s/]/.test(html[j]!)) {
      regions.push({ start: j, end: j + 1, kind: 'markup' });
      j++;
    } else {
      j = readAttribute(html, j, regions);
    }
  }
  return { end: Math.min(html.length, j + 1), element, closing };
}

/** The template cut into regions, in order, covering it whole. */
export function htmlRegions(html: string): Region[] {
  const regions: Region[] = [];
  let i = 0;
  while (i < html.length) {
    const open = html.indexOf('<', i);
    const textEnd = open === -1 ? html.length : open;
    if (textEnd > i) regions.push({ start: i, end: textEnd, kind: 'text' });
    if (open === -1) break;
    if (/[!?]/.test(html[open + 1] ?? '')) {
      i = skipMarkup(html, open);
      regions.push({ start: open, end: i, kind: 'markup' });
    } else if (/[A-Za-z/]/.test(html[open + 1] ?? '')) {
      const tag = readTag(html, open, regions);
      i = tag.end;
      if (!tag.closing && RAW_TEXT.has(tag.element)) {
        const close = html.toLowerCase().indexOf(`</${tag.element}`, i);
        const end = close === -1 ? html.length : close;
        regions.push({ start: i, end, kind: 'raw', name: tag.element });
        i = end;
      }
    } else {
      regions.push({ start: open, end: open + 1, kind: 'text' });
      i = open + 1;
    }
  }
  return regions;
}

/** Why a placeholder at `index` (of `name`) cannot be escaped where it stands; undefined when it can. */
export function placementProblem(html: string, regions: readonly Region[], index: number, name: string): string | undefined {
  const region = regions.find((r) => r.start <= index && index < r.end);
  if (!region || region.kind === 'markup') return 'inside a tag but not in a quoted attribute value';
  if (region.kind === 'raw') return `inside <${region.name}>, whose content is not HTML text`;
  if (region.kind === 'unquoted') return `in the unquoted value of the attribute ${region.name} (quote it: ${region.name}="…")`;
  if (region.kind === 'text') return undefined;
  const attribute = region.name ?? '';
  if (attribute.startsWith('on')) return `in the event handler ${attribute}, which runs its value as a script`;
  if (attribute === 'style' || attribute === 'srcdoc') return `in the attribute ${attribute}, whose value is parsed as CSS or HTML`;
  const atStart = html.slice(region.start, index).trim() === '';
  if (URL_ATTRIBUTES.has(attribute) && atStart && name !== 'link') return `at the start of the URL attribute ${attribute}: only {{link}} may begin a URL`;
  return undefined;
}

const ENTITIES: Readonly<Record<string, string>> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', '\'': '&#39;' };

/** A value for HTML text or a quoted attribute value: the five characters that could end either, entity-encoded. */
export function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (c) => ENTITIES[c]!);
}

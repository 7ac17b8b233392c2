// The operator's mail templates (CONTRACT §20, `mail.templates`): a folder of `<lang>/<kind>.subject.txt`,
// `<kind>.txt` and, optionally, `<kind>.html`, with `{{placeholders}}`. Read once at start;
// `gateway check` reports every problem of every file (config/files.ts). What a value may do to a
// mail is settled here: it reaches the Subject (one line, no controls) and the bodies, escaped for
// the spot it stands in (html.ts); it never reaches another header.
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { LANGUAGE_TAG } from '../errors/index.js';
import { escapeHtml, htmlRegions, placementProblem } from './html.js';

export const MAIL_KINDS = ['verify', 'reset', 'magic', 'org_invitation', 'account_invitation'] as const;
export type MailKind = (typeof MAIL_KINDS)[number];

const COMMON = ['link', 'email', 'product', 'expires_in_minutes'] as const;
/** The placeholders each kind's templates may use. */
export const PLACEHOLDERS: Readonly<Record<MailKind, readonly string[]>> = {
  verify: COMMON, reset: COMMON, magic: COMMON, account_invitation: COMMON,
  org_invitation: [...COMMON, 'org_name', 'inviter_email'],
};

/** One kind's texts in one language. */
export interface MailTemplate {
  readonly subject: string;
  readonly text: string;
  readonly html?: string;
}
export type MailTemplates = ReadonlyMap<string, ReadonlyMap<MailKind, MailTemplate>>;
export type MailValues = Readonly<Record<string, string | number>>;
/** A mail's words, ready to send. */
export interface RenderedMail {
  subject: string;
  text: string;
  html?: string;
}

const PLACEHOLDER = /\{\{\s*([^{}]*?)\s*\}\}/g;
const MAX_FILE = 100_000;
// eslint-disable-next-line no-control-regex -- the control characters are what is removed
const CONTROLS = /[\u0000-\u001f\u007f-\u009f]/g;
/** Bidi controls: they reorder what a reader sees (an address that reads as another). */
const BIDI = /[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

/** A value for a text part (and, escaped, an HTML one): C0/C1 and bidi controls removed. */
export const plainValue = (value: string | number): string => String(value).replace(CONTROLS, '').replace(BIDI, '');

/** Fills `template`'s placeholders with `escape(value)`, in one pass: a value holding `{{link}}` stays as it is. */
function fill(template: string, values: MailValues, escape: (value: string) => string): string {
  return template.replace(PLACEHOLDER, (whole, name: string) => (Object.hasOwn(values, name) ? escape(plainValue(values[name]!)) : whole));
}

/** The mail `template` says with these values: Subject one line without controls, text cleaned, HTML entity-encoded. */
export function renderMail(template: MailTemplate, values: MailValues): RenderedMail {
  const subject = fill(template.subject, values, (v) => v).replace(/\s+/g, ' ').trim();
  const text = fill(template.text, values, (v) => v);
  return template.html === undefined ? { subject, text } : { subject, text, html: fill(template.html, values, escapeHtml) };
}

type Part = 'subject' | 'text' | 'html';

/** What is wrong with one part of a template; empty when it is usable. */
export function templateProblems(file: string, kind: MailKind, part: Part, content: string): string[] {
  const problems: string[] = [];
  const allowed = PLACEHOLDERS[kind];
  const line = (index: number) => content.slice(0, index).split('\n').length;
  const regions = part === 'html' ? htmlRegions(content) : [];
  let link = false;
  for (const match of content.matchAll(PLACEHOLDER)) {
    const name = match[1]!;
    const where = `${file}:${line(match.index)}`;
    if (!allowed.includes(name)) {
      problems.push(`${where}: unknown placeholder {{${name}}} (${kind} has ${allowed.map((p) => `{{${p}}}`).join(', ')})`);
      continue;
    }
    link ||= name === 'link';
    if (part === 'subject' && name === 'link') problems.push(`${where}: {{link}} in a subject: previews and mail logs show it; put it in the body`);
    const misplaced = part === 'html' ? placementProblem(content, regions, match.index, name) : undefined;
    if (misplaced) problems.push(`${where}: {{${name}}} ${misplaced}`);
  }
  if (part === 'subject') {
    if (!content.trim()) problems.push(`${file}: an empty subject`);
    // eslint-disable-next-line no-control-regex -- a control character in a header is what is refused
    if (/[\u0000-\u001f\u007f-\u009f]/.test(content)) problems.push(`${file}: a subject is one line, without control characters`);
  } else if (!link) {
    problems.push(`${file}: no {{link}}: the mail would not carry its link`);
  }
  return problems;
}

/** `verify.subject.txt` → [verify, subject]; undefined for a name that is no template's. */
function partOf(name: string): [MailKind, Part] | undefined {
  const m = /^([a-z_]+)\.(subject\.txt|txt|html)$/.exec(name);
  const kind = MAIL_KINDS.find((k) => k === m?.[1]);
  if (!m || !kind) return undefined;
  return [kind, m[2] === 'subject.txt' ? 'subject' : m[2] === 'txt' ? 'text' : 'html'];
}

async function readPart(file: string): Promise<{ content: string } | { problem: string }> {
  try {
    const bytes = await readFile(file);
    if (bytes.length > MAX_FILE) return { problem: `${file}: over ${MAX_FILE} bytes` };
    const content = bytes.toString('utf8');
    if (content.includes('\uFFFD')) return { problem: `${file}: not UTF-8` };
    return { content };
  } catch (err) {
    return { problem: `${file}: cannot read the file: ${(err as NodeJS.ErrnoException).code ?? String(err)}` };
  }
}

/** One language's folder: its templates by kind, and every problem of its files. */
async function readLanguage(dir: string): Promise<{ templates: Map<MailKind, MailTemplate>; problems: string[] }> {
  const problems: string[] = [];
  const parts = new Map<MailKind, Partial<Record<Part, string>>>();
  for (const name of (await readdir(dir)).sort()) {
    const file = path.join(dir, name);
    const part = partOf(name);
    if (!part) {
      problems.push(`${file}: expected <kind>.subject.txt, <kind>.txt or <kind>.html, the kinds being ${MAIL_KINDS.join(', ')}`);
      continue;
    }
    const read = await readPart(file);
    if ('problem' in read) {
      problems.push(read.problem);
      continue;
    }
    // A subject file's final newline is the editor's, not the subject's.
    const content = part[1] === 'subject' ? read.content.replace(/\r?\n$/, '') : read.content;
    const found = templateProblems(file, ...part, content);
    problems.push(...found);
    if (!found.length) parts.set(part[0], { ...parts.get(part[0]), [part[1]]: content });
  }
  const templates = new Map<MailKind, MailTemplate>();
  for (const [kind, { subject, text, html }] of parts) {
    if (subject === undefined || text === undefined) {
      if (!problems.some((p) => p.includes(`${path.sep}${kind}.`))) problems.push(`${path.join(dir, kind)}: expected both ${kind}.subject.txt and ${kind}.txt (${kind}.html is optional)`);
      continue;
    }
    templates.set(kind, html === undefined ? { subject, text } : { subject, text, html });
  }
  return { templates, problems };
}

/** Reads the folder: the templates by language, then kind, and every problem of its files. */
export async function readMailTemplates(dir: string): Promise<{ templates: Map<string, Map<MailKind, MailTemplate>>; problems: string[] }> {
  const templates = new Map<string, Map<MailKind, MailTemplate>>();
  let entries;
  try {
    entries = (await readdir(dir, { withFileTypes: true })).sort((a, b) => a.name.localeCompare(b.name));
  } catch (err) {
    return { templates, problems: [`${dir}: cannot read the folder: ${(err as NodeJS.ErrnoException).code ?? String(err)}`] };
  }
  const problems: string[] = [];
  // Files beside the language folders (a README) are the operator's own.
  for (const entry of entries.filter((e) => e.isDirectory())) {
    const folder = path.join(dir, entry.name);
    if (!LANGUAGE_TAG.test(entry.name)) {
      problems.push(`${folder}: expected a folder named after a lower-case language tag, such as en or pt-br`);
      continue;
    }
    const read = await readLanguage(folder);
    problems.push(...read.problems);
    if (read.templates.size) templates.set(entry.name, read.templates);
  }
  return { templates, problems };
}

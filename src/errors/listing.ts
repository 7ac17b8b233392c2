// The catalog as clients and operators read it (CONTRACT §20): GET /api/v1/errors and `gateway
// errors --json` list it, and docs/errors.md's table is made from it (`gateway errors --markdown`),
// a test keeping the page's table equal to what this prints.
import { CATALOG, type CatalogEntry } from './catalog.js';
import type { ErrorName, ErrorStyle } from './messages.js';

export const ERRORS_PATH = '/api/v1/errors';

export interface ListedError {
  code: string;
  /** The name metrics labels, trace attributes and log fields use. */
  name: string;
  status: number;
  /** Every language the instance has, `{placeholders}` as the answer fills them. */
  messages: Record<string, string>;
  /** The body's keys beside `error` (and `code`). */
  fields: string[];
}

function messagesOf(style: ErrorStyle, entry: CatalogEntry): Record<string, string> {
  const messages: Record<string, string> = { fr: entry.fr, en: entry.en };
  for (const [language, texts] of style.overrides) {
    const own = texts[entry.code];
    if (own !== undefined) messages[language] = own;
  }
  return messages;
}

export function errorList(style: ErrorStyle): ListedError[] {
  return (Object.entries(CATALOG) as Array<[ErrorName, CatalogEntry]>).map(([name, entry]) => (
    { code: entry.code, name, status: entry.status, messages: messagesOf(style, entry), fields: [...(entry.fields ?? [])] }
  ));
}

const cell = (text: string) => text.replaceAll('|', '\\|');

/** The table of docs/errors.md, by status: the page holds it between its catalog markers. */
export function catalogTable(): string {
  const rows = (Object.entries(CATALOG) as Array<[ErrorName, CatalogEntry]>)
    .sort(([, a], [, b]) => a.status - b.status)
    .map(([name, e]) => {
      const fields = e.fields?.length ? ` + ${e.fields.map((f) => `\`${f}\``).join(', ')}` : '';
      return `| ${e.status} | \`${e.code}\` | \`${cell(e.fr)}\`${fields} | \`${cell(e.en)}\` | ${cell(e.when)} | \`${name}\` |`;
    });
  return ['| status | code | fr (the default) | en | when | name |', '|---|---|---|---|---|---|', ...rows].join('\n');
}

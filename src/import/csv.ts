// CSV as spreadsheets and database tools write it (RFC 4180): a header row, fields separated by
// commas, a field in double quotes may hold commas, quotes (doubled) and line breaks. Each record
// keeps the line it starts on, so a refusal names the line an operator opens the file at.

export interface CsvRecord {
  /** The file's line the record starts on, from 1. */
  line: number;
  fields: string[];
}

/** The records of `text`, the header row first; a quote left open is a refusal of that record. */
export function parseCsv(text: string): Array<CsvRecord | { line: number; error: string }> {
  const out: Array<CsvRecord | { line: number; error: string }> = [];
  const body = text.charCodeAt(0) === 0xfeff ? text.slice(1) : text; // a byte order mark, as Excel writes
  let line = 1;
  let i = 0;
  while (i < body.length) {
    const start = line;
    const fields: string[] = [];
    let field = '';
    let quoted = false;
    let ended = false;
    while (i < body.length && !ended) {
      const c = body[i]!;
      if (quoted) {
        if (c === '"' && body[i + 1] === '"') { field += '"'; i += 2; continue; }
        if (c === '"') { quoted = false; i++; continue; }
        if (c === '\n') line++;
        field += c;
        i++;
        continue;
      }
      if (c === '"' && field === '') { quoted = true; i++; continue; }
      if (c === ',') { fields.push(field); field = ''; i++; continue; }
      if (c === '\r' && body[i + 1] === '\n') { i++; continue; }
      if (c === '\n') { ended = true; line++; i++; continue; }
      field += c;
      i++;
    }
    if (quoted) {
      out.push({ line: start, error: 'a quoted field is never closed' });
      break;
    }
    fields.push(field);
    // Blank lines (a trailing newline, a spacer) are no records.
    if (fields.length === 1 && fields[0]!.trim() === '') continue;
    out.push({ line: start, fields });
  }
  return out;
}

// Unit tests of src/import/csv.ts (RFC 4180 as spreadsheets write it): each record with the line
// it starts on. The formats built on it: test/import/formats.test.ts.
import { describe, expect, it } from 'vitest';
import { parseCsv } from '../../src/import/csv.js';

const records = (text: string) => parseCsv(text);

describe('parseCsv', () => {
  it('drops a leading byte order mark, as Excel writes one, and only that', () => {
    expect(records('\uFEFFemail,plan\na@x.test,pro\n')).toEqual([{ line: 1, fields: ['email', 'plan'] }, { line: 2, fields: ['a@x.test', 'pro'] }]);
    expect(records('email\uFEFF\n')).toEqual([{ line: 1, fields: ['email\uFEFF'] }]);
  });

  it('reads quoted fields: commas, doubled quotes and line breaks inside, the next record numbered after the breaks', () => {
    expect(records('"a, ""b"" c",d\n"x\ny\r\nz",w\nlast\n')).toEqual([
      { line: 1, fields: ['a, "b" c', 'd'] },
      { line: 2, fields: ['x\ny\r\nz', 'w'] },
      { line: 5, fields: ['last'] },
    ]);
  });

  it('opens a quote only at a field\'s start; a quote inside a field is a character', () => {
    expect(records('a"b,c""d\n')).toEqual([{ line: 1, fields: ['a"b', 'c""d'] }]);
  });

  it('ends a record at LF or CRLF; a carriage return alone stays in its field', () => {
    expect(records('a,b\r\nc,d\r\ne\rf,g')).toEqual([{ line: 1, fields: ['a', 'b'] }, { line: 2, fields: ['c', 'd'] }, { line: 3, fields: ['e\rf', 'g'] }]);
  });

  it('skips blank and spaces-only lines, keeping the line numbers; a line of commas alone is a record of empty fields', () => {
    expect(records('\n  \na,b\n,\n\n')).toEqual([{ line: 3, fields: ['a', 'b'] }, { line: 4, fields: ['', ''] }]);
  });

  it('refuses the record whose quote is never closed, at the line it starts on, and reads nothing after it', () => {
    expect(records('a\n"b\nc,d\n')).toEqual([{ line: 1, fields: ['a'] }, { line: 2, error: 'a quoted field is never closed' }]);
  });
});

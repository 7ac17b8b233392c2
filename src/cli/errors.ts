// `gateway errors`: the error catalog (CONTRACT §20), as GET /api/v1/errors lists it.
import { catalogTable, DEFAULT_STYLE, errorList } from '../errors/index.js';
import { columns, print, type Args } from './command.js';

export async function errorsCommand({ values }: Args): Promise<number> {
  if (values.markdown) return print(catalogTable());
  const list = errorList(DEFAULT_STYLE);
  if (values.json) return print(JSON.stringify(list, null, 2));
  return print(columns([['STATUS', 'CODE', 'NAME', 'MESSAGE (EN)'], ...list.map((e) => [String(e.status), e.code, e.name, e.messages.en!])]));
}

// A SCIM user as the directory states it (RFC 7643 §4.1, the attributes CONTRACT §31 keeps):
// userName, externalId, name, displayName, emails, active. A POST or PUT body is read whole into
// this state; a PATCH is applied to the stored state, and both then go through one apply
// (users.ts), so each rule about whom SCIM may touch is written once. Attributes the gateway does
// not keep (Entra ID's title, phoneNumbers, the enterprise extension) are accepted and dropped, so
// a directory's default mapping does not fail every push.
import { normalizeEmail } from '../credentials/emailAddress.js';
import { invalidValue, scimError } from './errors.js';
import { parsePatchPath, type PatchPath } from './filter.js';
import { bool, expanded, isObject, operations, optionalText, text, type Operation } from './values.js';

export interface Email {
  value: string;
  type?: string;
  primary?: boolean;
}

export interface UserState {
  userName: string;
  externalId: string | null;
  name: Record<string, string>;
  displayName: string | null;
  emails: Email[];
  active: boolean;
}

// What a PATCH may name; any other path (id, meta, schemas, what the gateway does not keep) is ignored.
const ATTRIBUTES = ['userName', 'externalId', 'active', 'displayName', 'name', 'emails', 'groups'];
const NAME_PARTS = ['givenName', 'familyName', 'formatted', 'middleName', 'honorificPrefix', 'honorificSuffix'];
const EMAIL_PARTS = ['value', 'type', 'primary', 'display'];
const MAX_EMAILS = 10;

function userName(value: unknown): string {
  const name = text(value, 'userName').trim();
  return name ? name.toLowerCase() : invalidValue('userName is required');
}

function nameOf(value: unknown): Record<string, string> {
  if (value === null || value === undefined) return {};
  if (!isObject(value)) return invalidValue('name must be an object');
  const parts: Record<string, string> = {};
  for (const part of NAME_PARTS) if (value[part] !== undefined && value[part] !== null) parts[part] = text(value[part], `name.${part}`);
  return parts;
}

function emailOf(value: unknown): Email {
  if (!isObject(value)) return invalidValue('each of emails is an object with a value');
  const email: Email = { value: text(value.value, 'emails.value') };
  if (value.type !== undefined && value.type !== null) email.type = text(value.type, 'emails.type');
  if (value.primary !== undefined && value.primary !== null) email.primary = bool(value.primary, 'emails.primary');
  return email;
}

function emailsOf(value: unknown): Email[] {
  if (value === null || value === undefined) return [];
  const list = Array.isArray(value) ? value : [value];
  if (list.length > MAX_EMAILS) return invalidValue(`at most ${MAX_EMAILS} emails`);
  return list.map(emailOf);
}

/** A POST or PUT body: the whole user (active true unless it says otherwise). */
export function userFromResource(body: unknown): UserState {
  if (!isObject(body)) return scimError(400, 'A User resource is a JSON object', 'invalidSyntax');
  return {
    userName: userName(body.userName),
    externalId: optionalText(body.externalId, 'externalId'),
    name: nameOf(body.name),
    displayName: optionalText(body.displayName, 'displayName'),
    emails: emailsOf(body.emails),
    active: body.active === undefined || body.active === null ? true : bool(body.active, 'active'),
  };
}

/**
 * The email the account is found or made by (CONTRACT §31): the userName when it is an email, else
 * the primary email (or the only one); as accounts store it, or undefined.
 */
export function accountEmail(state: Pick<UserState, 'userName' | 'emails'>): string | undefined {
  const fromName = normalizeEmail(state.userName);
  if (fromName) return fromName;
  const primary = state.emails.find((e) => e.primary) ?? (state.emails.length === 1 ? state.emails[0] : undefined);
  return primary ? normalizeEmail(primary.value) : undefined;
}

/** `emails[type eq "work"].value` and its kin: the emails the filter selects, changed by `op`. */
function patchEmails(emails: Email[], path: PatchPath, o: Operation): Email[] {
  const filter = path.filter!;
  const selected = (e: Email) => String(e[filter.attribute as keyof Email] ?? '').toLowerCase() === filter.value.toLowerCase();
  if (o.op === 'remove') return emails.filter((e) => !selected(e));
  if (path.sub !== undefined && path.sub !== 'value' && path.sub !== 'primary' && path.sub !== 'type') return emails;
  const changed = (e: Email): Email => (path.sub === undefined ? { ...e, ...emailOf({ ...e, ...(isObject(o.value) ? o.value : {}) }) } : { ...e, ...emailOf({ ...e, [path.sub!]: o.value }) });
  if (emails.some(selected)) return emails.map((e) => (selected(e) ? changed(e) : e));
  // Entra ID adds the work email this way: no entry of that type yet means one is made.
  if (filter.attribute !== 'type') return scimError(400, 'No email matches the path\'s filter', 'noTarget');
  return [...emails, changed({ value: '', type: filter.value })];
}

function patchName(name: Record<string, string>, path: PatchPath, o: Operation): Record<string, string> {
  if (path.sub === undefined) {
    if (o.op === 'remove') return {};
    return o.op === 'replace' ? nameOf(o.value) : { ...name, ...nameOf(o.value) };
  }
  const { [path.sub]: _dropped, ...rest } = name;
  return o.op === 'remove' ? rest : { ...rest, [path.sub]: text(o.value, `name.${path.sub}`) };
}

/** One operation on one attribute of the user. */
function applyOne(state: UserState, o: Operation): UserState {
  const path = parsePatchPath(o.path!, ATTRIBUTES, [...NAME_PARTS, ...EMAIL_PARTS]);
  if (!path) return state;
  const removing = o.op === 'remove';
  switch (path.attribute) {
    case 'userName':
      return removing ? scimError(400, 'userName cannot be removed', 'mutability') : { ...state, userName: userName(o.value) };
    case 'active':
      return removing ? invalidValue('active cannot be removed') : { ...state, active: bool(o.value, 'active') };
    case 'externalId':
      return { ...state, externalId: removing ? null : optionalText(o.value, 'externalId') };
    case 'displayName':
      return { ...state, displayName: removing ? null : optionalText(o.value, 'displayName') };
    case 'name':
      return { ...state, name: patchName(state.name, path, o) };
    case 'emails':
      if (path.filter) return { ...state, emails: patchEmails(state.emails, path, o) };
      if (removing) return { ...state, emails: [] };
      return { ...state, emails: o.op === 'add' ? [...state.emails, ...emailsOf(o.value)].slice(-MAX_EMAILS) : emailsOf(o.value) };
    default:
      // groups: a user's groups change through Groups (RFC 7643: readOnly here).
      return scimError(400, `${path.attribute} cannot be changed on a User`, 'mutability');
  }
}

/** The stored user with a PATCH body's operations applied, in order. */
export function patchedUser(state: UserState, body: unknown): UserState {
  return expanded(operations(body)).reduce(applyOne, state);
}

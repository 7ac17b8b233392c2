// The portal's session (CONTRACT §30): the access token lives in this page's memory only; the
// refresh token is the HttpOnly cookie the portal's own endpoints ({path}api/…) set and rotate,
// which no script can read. Tabs of one browser refresh one at a time (a Web Lock) and share the
// new access token (a BroadcastChannel): a refresh token is single-use, and two tabs presenting
// the same one would be a reuse (the gateway then ends the session).
import { lang } from './i18n.js';

/** Where the portal is served (`/portal/`), read from this module's own URL: the pages need no setting. */
export const BASE = new URL('.', import.meta.url).pathname;

const LOCK = 'gw-portal-refresh';
const channel = typeof BroadcastChannel === 'function' ? new BroadcastChannel('gw-portal') : null;
let token = null;
let timer = 0;
const listeners = { signedOut: [] };

export const onSignedOut = (fn) => listeners.signedOut.push(fn);
export const signedIn = () => token !== null;

/** The access token's `exp` (seconds), read from its payload without checking it (the gateway checks). */
function expiry(jwt) {
  try {
    const payload = JSON.parse(atob(jwt.split('.')[1].replace(/-/g, '+').replace(/_/g, '/')));
    return typeof payload.exp === 'number' ? payload.exp : 0;
  } catch { return 0; }
}

function adopt(next, { share = true } = {}) {
  token = next;
  clearTimeout(timer);
  if (!next) return;
  // Refreshed a little before it expires, by whichever tab's timer fires first (the lock serialises them).
  const wait = Math.max(5_000, expiry(next) * 1000 - Date.now() - 30_000);
  timer = setTimeout(() => { void refresh(); }, Math.min(wait, 2 ** 31 - 1));
  if (share) channel?.postMessage({ type: 'token', token: next });
}

function dropped() {
  token = null;
  clearTimeout(timer);
  for (const fn of listeners.signedOut) fn();
}

channel?.addEventListener('message', ({ data }) => {
  if (data?.type === 'token' && typeof data.token === 'string') adopt(data.token, { share: false });
  else if (data?.type === 'ask' && token) channel.postMessage({ type: 'token', token });
  else if (data?.type === 'signed-out' && token) dropped();
});

/** Headers every call carries: the language the user chose (the gateway's errors and messages follow it). */
function common() {
  return { 'accept-language': lang(), accept: 'application/problem+json, application/json' };
}

/** A call to one of the portal's own endpoints: same origin, with the header that no form or other site can send. */
export async function portalApi(name, body, method = 'POST') {
  const res = await fetch(`${BASE}api/${name}`, {
    method,
    credentials: 'same-origin',
    headers: { ...common(), 'x-gateway-portal': '1', ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const json = await res.json().catch(() => ({}));
  return { status: res.status, json };
}

/** A sign-in's answer: its access token is kept (the refresh token went into the cookie). */
export function signIn(json) {
  adopt(json.access_token);
}

/**
 * A new access token from the cookie, one tab at a time: a tab that waited for the lock uses the
 * token another tab broadcast meanwhile instead of presenting the (now used) cookie's old value.
 */
export async function refresh() {
  const before = token;
  const run = async () => {
    if (token && token !== before && expiry(token) * 1000 > Date.now() + 30_000) return true;
    const res = await portalApi('refresh');
    if (res.status === 200 && res.json.access_token) { adopt(res.json.access_token); return true; }
    if (token) dropped(); else token = null;
    return false;
  };
  return navigator.locks ? navigator.locks.request(LOCK, run) : run();
}

/** At start: a token from another open tab if one answers quickly, else a refresh with the cookie. */
export async function resume() {
  if (token) return true;
  if (channel) {
    channel.postMessage({ type: 'ask' });
    await new Promise((resolve) => setTimeout(resolve, 120));
    if (token) return true;
  }
  return refresh();
}

export async function signOut() {
  await portalApi('logout').catch(() => {});
  channel?.postMessage({ type: 'signed-out' });
  token = null;
  clearTimeout(timer);
}

/** A call to the gateway's HTTP API with the access token; an expired token is refreshed once. */
export async function api(method, path, body, { org } = {}) {
  const send = () => fetch(path, {
    method,
    credentials: 'omit',
    headers: {
      ...common(),
      ...(token ? { authorization: `Bearer ${token}` } : {}),
      // Marks the call as the portal's: the audit log records it with data.via "portal" (the gateway checks Origin with it).
      'x-gateway-portal': '1',
      ...(org ? { 'gateway-org': String(org) } : {}),
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  let res = await send();
  if (res.status === 401 && token && (await refresh())) res = await send();
  const json = await res.json().catch(() => ({}));
  return { status: res.status, json };
}

/** Some account changes answer with the session's new pair: the access token replaces ours. */
export function renewed(json) {
  if (json?.access_token) adopt(json.access_token);
}

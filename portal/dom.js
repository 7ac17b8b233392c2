// The portal's DOM helpers. Every value reaches the page as a text node or an attribute, never as
// markup: product names, organization names, key names and emails are chosen by whoever typed
// them, and a name such as <img onerror=…> must be shown as those characters (CONTRACT §30).

/** An element with attributes and children; strings become text nodes. `on…` attributes are listeners. */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs ?? {})) {
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'class' && Array.isArray(v)) el.className = v.filter(Boolean).join(' ');
    else if (v !== false && v != null) el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) if (c != null && c !== false) el.append(c instanceof Node ? c : String(c));
}

export const $ = (id) => document.getElementById(id);

/** Replaces an element's children (null and false left out: replaceChildren would write them as text). */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** Appends children, null and false left out. */
export function add(el, ...children) {
  append(el, children);
  return el;
}

let ids = 0;
/** A fresh id for label/field pairs drawn more than once. */
export const uid = (prefix) => `${prefix}-${++ids}`;

/** A labelled field: the label first, then the input, with an optional hint tied by aria-describedby. */
export function field(label, attrs, hint) {
  const id = attrs.id ?? uid(attrs.name ?? 'f');
  const hintId = hint ? `${id}-hint` : undefined;
  const input = h(attrs.tag ?? 'input', { ...attrs, tag: undefined, id, 'aria-describedby': hintId }, ...(attrs.options ?? []));
  return h('div', { class: 'field' }, h('label', { for: id }, label), input, hint ? h('p', { class: 'hint', id: hintId }, hint) : null);
}

/** A table with a caption, column headers and rows of text or nodes; `empty` when there are none. */
export function table(caption, headers, rows, empty) {
  // A wide table scrolls within its box at 360 px; the box takes the focus so a keyboard can scroll it.
  return h('div', { class: 'scroll', tabindex: 0, role: 'region', 'aria-label': caption ?? headers.join(', ') }, h('table', {},
    caption ? h('caption', {}, caption) : null,
    h('thead', {}, h('tr', {}, headers.map((t) => h('th', { scope: 'col' }, t)))),
    h('tbody', {}, rows.length ? rows.map((r) => h('tr', {}, r.map((c) => h('td', {}, c ?? '—'))))
      : h('tr', {}, h('td', { colspan: headers.length }, empty)))));
}

/** A status line (polite) and an alert line (assertive): what a form says after an answer. */
export function messages() {
  const status = h('p', { role: 'status', class: 'ok' });
  const alert = h('p', { role: 'alert', class: 'error' });
  return {
    nodes: [status, alert],
    ok(text) { alert.textContent = ''; status.textContent = text; },
    fail(text) { status.textContent = ''; alert.textContent = text; },
    clear() { status.textContent = ''; alert.textContent = ''; },
  };
}

/** A form whose submit is handled by `onsubmit(form)`; its submit button is disabled meanwhile. */
export function form(attrs, children, onsubmit) {
  const el = h('form', { ...attrs, novalidate: attrs.novalidate }, ...children);
  el.addEventListener('submit', async (e) => {
    e.preventDefault();
    const buttons = [...el.querySelectorAll('button[type=submit]')];
    buttons.forEach((b) => { b.disabled = true; });
    try { await onsubmit(el); } finally { buttons.forEach((b) => { b.disabled = false; }); }
  });
  return el;
}

/** A date (ISO text) shown in the user's language, or a dash. */
export function when(iso, lang) {
  if (!iso) return '—';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? String(iso) : d.toLocaleString(lang === 'fr' ? 'fr-FR' : 'en-GB', { dateStyle: 'medium', timeStyle: 'short' });
}

/** A number in the user's language, or "unlimited" when the limit is null. */
export function num(n, lang) {
  return typeof n === 'number' ? n.toLocaleString(lang === 'fr' ? 'fr-FR' : 'en-GB') : String(n ?? '—');
}

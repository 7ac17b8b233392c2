// How the console's pages show what people read (CONTRACT §29): a date as a day and a time in
// UTC, the exact instant on hover (and to screen readers, in <time datetime>); a count against its
// limit as a meter per window, with the numbers in words beside it. No inline style (the CSP
// allows none): <meter> draws its own bar.
import { h } from './app.js';

const READABLE = new Intl.DateTimeFormat('en-GB', { day: 'numeric', month: 'short', year: 'numeric', hour: '2-digit', minute: '2-digit', timeZone: 'UTC' });

/** An ISO instant as "28 Nov 2026, 00:49 UTC", its exact value in the title; null stays null (the table's —). */
export function when(iso) {
  if (iso == null) return null;
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return iso;
  return h('time', { datetime: iso, title: iso }, `${READABLE.format(date)} UTC`);
}

/**
 * Uses against limits, one row per window ({label, used, limit}; a null limit is unlimited):
 * what support needs to answer "why am I refused?" at a glance.
 */
export function usageMeters(id, windows) {
  return h('dl', { class: 'usage', id }, windows.flatMap(({ label, used, limit }) => {
    const words = used == null ? 'not counted here' : limit == null ? `${used} (no limit)` : `${used} of ${limit}${used >= limit ? ': limit reached' : ''}`;
    const meter = used != null && limit != null
      ? h('meter', { min: 0, max: Math.max(limit, 1), value: Math.min(used, Math.max(limit, 1)), high: Math.max(limit, 1) * 0.9, optimum: 0, 'aria-label': `${label}: ${words}` })
      : null;
    return [h('dt', {}, label), h('dd', {}, meter, ' ', words)];
  }));
}

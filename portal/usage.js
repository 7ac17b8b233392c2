// Usage (CONTRACT §30): per day for the last 30 UTC days, in total and per key, and per month for
// the last 12, from the gateway's own counts (GET /api/v1/user/usage, or the acting
// organization's). Each chart is drawn by uPlot on a canvas (uplot.js, loaded before the modules)
// and followed by a table of the same numbers, which is what a screen reader reads.
import { add, fill, h, num, table } from './dom.js';
import { lang, t } from './i18n.js';
import { api } from './session.js';
import { acting, errorText } from './state.js';

// Told apart without colour alone: each series also has its own dash pattern.
const COLOURS = ['#1a4fb5', '#b8420f', '#287a3e', '#7a3e9d', '#8a6d00', '#a3195b'];
const DASHES = [[], [6, 3], [2, 2], [10, 3, 2, 3]];
const INCRS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1e3, 2e3, 5e3, 1e4, 2e4, 5e4, 1e5, 1e6, 1e7, 1e8, 1e9];

const width = (main) => Math.max(280, Math.min(760, (main.clientWidth || 360) - 8));

/** A chart of series over UTC dates (`2026-11-28`) or months (`2026-11`), bars for one series, lines for several. */
function chart(main, { id, label, dates, series, bars }) {
  const box = h('div', { class: 'chart', id, role: 'img', 'aria-label': label });
  const xs = dates.map((d) => Date.parse(d.length === 7 ? `${d}-01T00:00:00Z` : `${d}T00:00:00Z`) / 1000);
  const { uPlot } = globalThis;
  if (typeof uPlot !== 'function') return box;
  new uPlot({
    width: width(main), height: 200,
    scales: { x: { time: true } },
    tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), 'Etc/UTC'),
    legend: { show: series.length > 1 },
    series: [{ label: t('usage.day') }, ...series.map((s, i) => ({
      label: s.label, stroke: COLOURS[i % COLOURS.length], width: 2, dash: DASHES[i % DASHES.length], points: { show: false },
      ...(bars ? { fill: COLOURS[i % COLOURS.length], paths: uPlot.paths.bars({ size: [0.7, 18] }) } : {}),
    }))],
    axes: [{}, { size: 56, incrs: INCRS }],
  }, [xs, ...series.map((s) => s.values)], box);
  return box;
}

function section(id, title, chartNode, caption, headers, rows) {
  return h('section', { 'aria-labelledby': `h-${id}` }, h('h2', { id: `h-${id}` }, title), chartNode,
    table(caption, headers, rows, t('usage.nothing')));
}

export async function usagePage(main) {
  const org = acting();
  const title = org ? t('usage.orgTitle', { name: org.name }) : t('nav.usage');
  const res = await api('GET', org ? `/api/v1/orgs/${org.id}/usage` : '/api/v1/user/usage');
  fill(main, h('h1', { tabindex: '-1' }, title));
  if (res.status !== 200) { add(main, h('p', { role: 'alert' }, await errorText(res))); return title; }
  const { days, months, keys } = res.json;
  const n = (v) => num(v, lang());
  const dates = days.map((d) => d.date);
  const most = Math.max(0, ...days.map((d) => d.uses));
  add(main, 
    section('days', t('usage.days'), chart(main, {
      id: 'chart-days', dates, label: t('usage.daysLabel', { n: days.length, max: n(most) }),
      series: [{ label: t('usage.uses'), values: days.map((d) => d.uses) }, { label: t('usage.denied'), values: days.map((d) => d.denied ?? 0) }],
    }), t('usage.daysCaption'), [t('usage.day'), t('usage.uses'), t('usage.denied')], days.map((d) => [d.date, n(d.uses), n(d.denied ?? 0)])),
    keys.length ? section('keys', t('usage.perKey'), chart(main, {
      id: 'chart-keys', dates, label: t('usage.keysLabel', { n: keys.length }),
      series: keys.slice(0, 6).map((k) => ({ label: k.name, values: k.days.map((d) => d.requests) })),
    }), t('usage.keysCaption'), [t('usage.day'), ...keys.map((k) => k.name)], dates.map((date, i) => [date, ...keys.map((k) => n(k.days[i]?.requests ?? 0))])) : null,
    section('months', t('usage.months'), chart(main, {
      id: 'chart-months', dates: months.map((m) => m.month), bars: true, label: t('usage.monthsLabel', { n: months.length }),
      series: [{ label: t('usage.uses'), values: months.map((m) => m.uses) }],
    }), t('usage.monthsCaption'), [t('usage.month'), t('usage.uses')], months.map((m) => [m.month, n(m.uses)])),
  );
  return title;
}

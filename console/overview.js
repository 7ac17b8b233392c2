// The overview (CONTRACT §24): the last 30 UTC days across users and plans, from GET
// /admin/v1/overview. Each measure (API-key requests, denials, counted uses) is a uPlot chart with
// a line per plan, its numbers following as a table (for screen readers and for copying); then the
// top users and organizations and the plan mix. Every value is set as text.
import { api, h, renderer, table } from './app.js';

// Told apart without colour alone: each plan's line also has its own dash pattern.
const COLOURS = ['#2c6fbb', '#b8420f', '#287a3e', '#7a3e9d', '#8a6d00', '#a3195b', '#00708a', '#555555'];
const DASHES = [[], [6, 3], [2, 2], [10, 3, 2, 3]];

const MEASURES = [
  ['requests', 'API-key requests', 'Requests made with API keys, by the key owner\'s plan'],
  ['denials', 'API-key denials', 'Requests with API keys the gateway refused (401, 403, 429)'],
  ['uses', 'Counted uses', 'Uses counted against daily and monthly quotas'],
];

/** One measure as a chart: a line per plan that has any, over the days. */
function measureChart([key, title, about], days, plans) {
  const shown = plans.filter((p) => p[key].some((n) => n > 0));
  const id = `h-${key}`;
  if (!shown.length) return h('section', { 'aria-labelledby': id }, h('h3', { id }, title), h('p', { class: 'hint' }, about), h('p', {}, 'Nothing in the last 30 days.'));
  const max = Math.max(...shown.flatMap((p) => p[key]));
  const plot = h('div', { class: 'chart', role: 'img', 'aria-label': `${title} per day and plan over ${days.length} days (${shown.map((p) => p.plan).join(', ')}), at most ${max} in a day` });
  const options = {
    width: 620, height: 200,
    scales: { x: { time: true } },
    // The gateway's days are UTC days: shown as such wherever the operator is.
    tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), 'Etc/UTC'),
    series: [{ label: 'Day' }, ...shown.map((p, i) => ({ label: p.plan, stroke: COLOURS[i % COLOURS.length], dash: DASHES[i % DASHES.length], width: 2, points: { show: false } }))],
    axes: [{}, { size: 70, incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1e3, 2e3, 5e3, 1e4, 2e4, 5e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e12, 1e15] }],
  };
  new uPlot(options, [days.map((d) => Date.parse(`${d}T00:00:00Z`) / 1000), ...shown.map((p) => p[key])], plot);
  const numbers = h('details', {}, h('summary', {}, `${title} per day`),
    table(['Day', ...shown.map((p) => p.plan)], days.map((d, i) => [d, ...shown.map((p) => String(p[key][i]))])));
  return h('section', { 'aria-labelledby': id }, h('h3', { id }, title), h('p', { class: 'hint' }, about), plot, numbers);
}

/** The plan mix: users and organizations on each plan. */
function planMix(mix) {
  const plans = [...new Set([...mix.users, ...mix.orgs].map((r) => r.plan))];
  const count = (rows, plan) => String(rows.find((r) => r.plan === plan)?.count ?? 0);
  return table(['Plan', 'Users', 'Organizations'], plans.map((p) => [p, count(mix.users, p), count(mix.orgs, p)]));
}

export async function overviewView() {
  const show = renderer();
  const { status, json } = await api('GET', 'api/v1/overview');
  if (status !== 200) return show(h('h2', {}, 'Overview'), h('p', { role: 'alert' }, json.error ?? 'Error'));
  const { days, plans } = json;
  show(
    h('h2', {}, 'Overview'),
    h('p', {}, `The last 30 UTC days, ${days[0]} to ${days.at(-1)}, by each account's plan today.`),
    ...MEASURES.map((measure) => measureChart(measure, days, plans)),
    h('section', { 'aria-labelledby': 'h-top-users' }, h('h3', { id: 'h-top-users' }, 'Top users by counted uses'),
      table(['User', 'Plan', 'Uses'], json.top_users.map((u) => [h('a', { href: `#/user/${u.id}` }, u.email), u.plan, String(u.uses)]))),
    h('section', { 'aria-labelledby': 'h-top-orgs' }, h('h3', { id: 'h-top-orgs' }, 'Top organizations by API-key requests'),
      table(['Organization', 'Id', 'Plan', 'Requests'], json.top_orgs.map((o) => [o.name, String(o.id), o.plan, String(o.requests)]))),
    h('section', { 'aria-labelledby': 'h-mix' }, h('h3', { id: 'h-mix' }, 'Plan mix'), planMix(json.plan_mix)),
  );
}

// The overview (CONTRACT §30): the plan, today's and this month's counted uses against the plan's
// quota, the number of keys, and banners for what needs the customer: an unverified email (with a
// button that sends the link again) and a payment past due (billing's grace running).
import { fill, h, messages, num, when } from './dom.js';
import { lang, t } from './i18n.js';
import { BASE, api } from './session.js';
import { config, errorText, loadMe } from './state.js';

/** A quota as a meter and its words ("12 of 100"), or "unlimited" when the plan sets none. */
export function meter(id, label, used, limit) {
  const words = limit == null ? t('usage.unlimited', { used: num(used, lang()) }) : t('usage.of', { used: num(used, lang()), limit: num(limit, lang()) });
  return [h('dt', { id: `${id}-label` }, label), h('dd', {},
    limit == null ? null : h('meter', { min: 0, max: limit, value: Math.min(used, limit), 'aria-labelledby': `${id}-label`, id }), ' ', h('span', { id: `${id}-text` }, words))];
}

function unverifiedBanner() {
  const say = messages();
  return h('div', { class: 'banner warn', id: 'banner-unverified', role: 'region', 'aria-label': t('banner.label') },
    h('p', {}, t('banner.unverified')),
    h('button', { type: 'button', id: 'resend', onclick: async () => {
      const res = await api('POST', '/api/v1/auth/email/resend');
      if (res.status === 202) say.ok(t('banner.resent')); else say.fail(await errorText(res));
    } }, t('banner.resend')), ...say.nodes);
}

function pastDueBanner(billing) {
  return h('div', { class: 'banner danger', id: 'banner-past-due', role: 'region', 'aria-label': t('banner.label') },
    h('p', {}, billing.grace_ends_at ? t('banner.pastDueUntil', { date: when(billing.grace_ends_at, lang()) }) : t('banner.pastDue')),
    h('a', { href: `${BASE}billing` }, t('banner.fix')));
}

export async function overviewPage(main) {
  const user = await loadMe();
  if (!user) { fill(main, h('h1', { tabindex: '-1' }, t('nav.overview')), h('p', { role: 'alert' }, t('error.unknown', { status: '' }))); return t('nav.overview'); }
  const [keys, billing] = await Promise.all([
    api('GET', '/api/v1/user/api-keys'),
    config().features.billing ? api('GET', '/api/v1/billing/subscription') : Promise.resolve(null),
  ]);
  const pastDue = billing?.status === 200 && (billing.json.subscriptions ?? []).some((s) => s.status === 'past_due');
  const limits = user.limits ?? {};
  fill(main, 
    h('h1', { tabindex: '-1' }, t('nav.overview')),
    user.email_verified_at ? null : unverifiedBanner(),
    pastDue ? pastDueBanner(billing.json) : null,
    h('p', { id: 'signed-in-as' }, t('overview.signedInAs'), ' ', h('strong', {}, user.email)),
    h('section', { 'aria-labelledby': 'h-plan' }, h('h2', { id: 'h-plan' }, t('overview.plan')),
      h('p', {}, h('span', { id: 'plan-name', class: 'plan' }, user.plan), ' ',
        config().features.billing ? h('a', { href: `${BASE}billing` }, t('overview.changePlan')) : null)),
    h('section', { 'aria-labelledby': 'h-quota' }, h('h2', { id: 'h-quota' }, t('overview.quota')),
      h('dl', { class: 'usage' }, ...meter('today', t('usage.today'), user.daily_usage ?? 0, limits.daily),
        ...meter('month', t('usage.month'), user.monthly_usage ?? 0, limits.monthly)),
      h('p', {}, h('a', { href: `${BASE}usage` }, t('overview.seeUsage')))),
    h('section', { 'aria-labelledby': 'h-keys' }, h('h2', { id: 'h-keys' }, t('nav.keys')),
      h('p', { id: 'keys-count' }, keys.status === 200 ? t('overview.keys', { n: keys.json.api_keys.length }) : await errorText(keys)),
      h('p', {}, h('a', { href: `${BASE}keys`, class: 'button' }, t('keys.create')))),
  );
  return t('nav.overview');
}

// Plan and billing (CONTRACT §30): every plan's limits (GET /api/v1/plans), the current plan and
// its subscription, an upgrade button per configured price (POST /api/v1/billing/checkout with
// "return": "portal", then a top-level navigation to Stripe's Checkout: the CSP allows no frame
// nor script of Stripe's here) and "manage billing" (Stripe's Customer Portal, the same way).
// Acting for an organization, its billing (Gateway-Org; the owner only, as the API decides).
import { add, fill, h, messages, num, table, when } from './dom.js';
import { lang, t } from './i18n.js';
import { api } from './session.js';
import { acting, errorText, loadMe } from './state.js';

const limit = (v) => (v == null ? t('billing.unlimited') : num(v, lang()));

async function go(path, body, say, org) {
  const res = await api('POST', path, body, { org: org?.id });
  if (res.status === 200 && typeof res.json.url === 'string' && /^https?:\/\//.test(res.json.url)) {
    say.ok(t('billing.leaving'));
    location.assign(res.json.url);
    return;
  }
  say.fail(await errorText(res));
}

export async function billingPage(main) {
  const org = acting();
  const title = org ? t('billing.orgTitle', { name: org.name }) : t('nav.billing');
  const user = await loadMe();
  const [plans, sub] = await Promise.all([api('GET', '/api/v1/plans'), api('GET', '/api/v1/billing/subscription', undefined, { org: org?.id })]);
  const current = org ? org.plan : user?.plan;
  const say = messages();
  fill(main, h('h1', { tabindex: '-1' }, title));
  if (plans.status !== 200) { add(main, h('p', { role: 'alert' }, await errorText(plans))); return title; }
  const subs = sub.status === 200 ? sub.json.subscriptions ?? [] : [];
  const live = subs.find((s) => ['active', 'trialing', 'past_due'].includes(s.status));
  const rows = plans.json.plans.map((p) => [
    h('span', { class: 'plan' }, p.name), limit(p.limits?.daily), limit(p.limits?.monthly), limit(p.limits?.perMinute),
    p.name === current ? h('strong', { id: 'current-plan-mark' }, t('billing.current'))
      : live ? '—' : h('div', { class: 'actions' }, (p.prices ?? []).map((price) => h('button', {
        type: 'button', class: 'primary', 'data-price': price, onclick: () => void go('/api/v1/billing/checkout', { price, return: 'portal' }, say, org),
      }, t('billing.upgradeTo', { plan: p.name })))),
  ]);
  add(main, 
    h('p', { id: 'current-plan' }, t('billing.yourPlan'), ' ', h('strong', { class: 'plan' }, current ?? '—')),
    sub.status === 200 ? null : h('p', { role: 'alert' }, await errorText(sub)),
    live ? h('p', { id: 'subscription' }, t('billing.subscription', { status: t(`billing.status.${live.status}`), date: when(live.current_period_end, lang()) })) : null,
    table(t('billing.plansCaption'), [t('billing.plan'), t('billing.daily'), t('billing.monthly'), t('billing.perMinute'), t('keys.actions')], rows, t('billing.noPlans')),
    ...say.nodes,
    sub.status === 200 && (live || subs.length)
      ? h('p', {}, h('button', { type: 'button', id: 'manage-billing', onclick: () => void go('/api/v1/billing/portal', { return: 'portal' }, say, org) }, t('billing.manage'))) : null,
  );
  return title;
}

// Every page of the portal by its URL segment: `/portal/keys` draws PAGES.keys. A page draws into
// <main> and answers its title.
import { fill, h } from './dom.js';
import { t } from './i18n.js';
import { BASE } from './session.js';
import { signInPage, signUpPage } from './signIn.js';
import { forgotPage, joinPage, magicPage, providerReturnPage, resetPage, verifyEmailPage } from './links.js';
import { overviewPage } from './overview.js';
import { keysPage } from './keys.js';
import { usagePage } from './usage.js';
import { billingPage } from './billing.js';
import { securityPage } from './security.js';
import { orgsPage } from './orgs.js';
import { accountPage } from './account.js';

async function notFound(main) {
  fill(main, h('h1', { tabindex: '-1' }, t('notFound.title')), h('p', {}, h('a', { href: BASE }, t('nav.overview'))));
  return t('notFound.title');
}

export const PAGES = {
  'sign-in': signInPage, 'sign-up': signUpPage, 'verify-email': verifyEmailPage, 'forgot-password': forgotPage, 'reset-password': resetPage,
  magic: magicPage, 'signed-in': providerReturnPage, join: joinPage,
  overview: overviewPage, keys: keysPage, usage: usagePage, billing: billingPage, security: securityPage, orgs: orgsPage, account: accountPage,
  'not-found': notFound,
};

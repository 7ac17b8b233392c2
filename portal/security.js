// Security (CONTRACT §30): password change (through the portal's own endpoint: the session's new
// pair, its refresh token into the cookie), TOTP enrolment with a QR code and the recovery codes,
// passkeys, linked providers, and sessions with "sign out this session" and "everywhere".
import { field, fill, form, h, messages, table, when } from './dom.js';
import { lang, t } from './i18n.js';
import qrcode from './qrcode.js';
import { api, portalApi, renewed, signOut } from './session.js';
import { config, errorText, nav } from './state.js';

/** The otpauth URL as a QR code on a canvas: dark modules on white, a quiet zone of four. */
function qrCanvas(text) {
  const { modules } = qrcode.create(text, { errorCorrectionLevel: 'M' });
  const scale = 5;
  const size = (modules.size + 8) * scale;
  const canvas = h('canvas', { width: size, height: size, role: 'img', 'aria-label': t('totp.qrLabel'), id: 'totp-qr' });
  const g = canvas.getContext('2d');
  if (!g) return canvas;
  g.fillStyle = '#ffffff';
  g.fillRect(0, 0, size, size);
  g.fillStyle = '#000000';
  for (let y = 0; y < modules.size; y++) for (let x = 0; x < modules.size; x++) if (modules.get(y, x)) g.fillRect((x + 4) * scale, (y + 4) * scale, scale, scale);
  return canvas;
}

function passwordSection() {
  const say = messages();
  return h('section', { 'aria-labelledby': 'h-password' }, h('h2', { id: 'h-password' }, t('security.password')), form({ id: 'password-form' }, [
    field(t('field.currentPassword'), { name: 'current', id: 'current-password', type: 'password', autocomplete: 'current-password', required: true }),
    field(t('field.newPassword'), { name: 'next', id: 'new-password', type: 'password', autocomplete: 'new-password', required: true }, t('field.passwordHint', { n: config().passwordMinLength })),
    h('button', { type: 'submit' }, t('security.changePassword')), ...say.nodes,
  ], async (f) => {
    const res = await portalApi('password/change', { current_password: f.elements.current.value, new_password: f.elements.next.value });
    if (res.status !== 200) return say.fail(await errorText(res));
    renewed(res.json);
    f.reset();
    say.ok(t('security.passwordChanged'));
  }));
}

function totpSection() {
  const say = messages();
  const area = h('div', { id: 'totp-area' });
  const enrol = async () => {
    const res = await api('POST', '/api/v1/auth/mfa/totp/enroll');
    if (res.status !== 200) return say.fail(res.json.code === 'mfa_code_invalid' ? t('totp.already') : await errorText(res));
    const confirm = form({ id: 'totp-confirm' }, [
      h('p', {}, t('totp.scan')), qrCanvas(res.json.otpauth_url),
      h('p', {}, t('totp.manual'), ' ', h('code', { id: 'totp-secret' }, res.json.secret)),
      field(t('totp.code'), { name: 'code', id: 'totp-code', inputmode: 'numeric', autocomplete: 'one-time-code', required: true }),
      h('button', { type: 'submit', class: 'primary' }, t('totp.confirm')),
    ], async (f) => {
      const done = await api('POST', '/api/v1/auth/mfa/totp/confirm', { code: f.elements.code.value.trim() });
      if (done.status !== 200) return say.fail(await errorText(done));
      renewed(done.json);
      say.ok(t('totp.on'));
      fill(area, h('h3', { id: 'h-recovery', tabindex: '-1' }, t('totp.recovery')), h('p', {}, t('totp.recoveryAbout')),
        h('ul', { id: 'recovery-codes', class: 'codes' }, done.json.recovery_codes.map((c) => h('li', {}, h('code', {}, c)))));
      area.querySelector('h3').focus();
    });
    fill(area, confirm);
    confirm.querySelector('input').focus();
  };
  const off = form({ id: 'totp-off' }, [
    field(t('field.currentPassword'), { name: 'password', id: 'totp-off-password', type: 'password', autocomplete: 'current-password', required: true }),
    h('button', { type: 'submit', class: 'danger' }, t('totp.turnOff')),
  ], async (f) => {
    const res = await api('DELETE', '/api/v1/auth/mfa/totp', { password: f.elements.password.value });
    if (res.status !== 200) return say.fail(await errorText(res));
    renewed(res.json);
    f.reset();
    say.ok(t('totp.off'));
  });
  fill(area, h('button', { type: 'button', id: 'totp-enrol', onclick: () => void enrol() }, t('totp.enrol')));
  return h('section', { 'aria-labelledby': 'h-totp' }, h('h2', { id: 'h-totp' }, t('totp.title')), h('p', { class: 'hint' }, t('totp.about')),
    area, ...say.nodes, h('details', {}, h('summary', {}, t('totp.turnOff')), off));
}

async function passkeysSection(redraw) {
  const say = messages();
  const res = await api('GET', '/api/v1/user/passkeys');
  const list = res.status === 200 ? res.json.passkeys : [];
  const add = async () => {
    const options = await api('POST', '/api/v1/auth/passkeys/register/options');
    if (options.status !== 200) return say.fail(await errorText(options));
    const credential = await navigator.credentials.create({ publicKey: PublicKeyCredential.parseCreationOptionsFromJSON(options.json) }).catch(() => null);
    if (!credential) return say.fail(t('passkey.none'));
    const added = await api('POST', '/api/v1/auth/passkeys/register/verify', { ...credential.toJSON(), name: document.getElementById('passkey-name').value || t('passkey.defaultName') });
    if (added.status !== 201) return say.fail(await errorText(added));
    redraw(t('passkey.added'));
  };
  const remove = async (p) => {
    const res = await api('DELETE', `/api/v1/user/passkeys/${p.id}`);
    if (res.status !== 200) return say.fail(await errorText(res));
    renewed(res.json);
    redraw(t('passkey.removed', { name: p.name }));
  };
  const rows = list.map((p) => [h('span', {}, p.name), when(p.created_at, lang()), p.last_used_at ? when(p.last_used_at, lang()) : '—',
    h('button', { type: 'button', class: 'danger', 'aria-label': t('passkey.removeNamed', { name: p.name }), onclick: () => void remove(p) }, t('passkey.remove'))]);
  return h('section', { 'aria-labelledby': 'h-passkeys' }, h('h2', { id: 'h-passkeys' }, t('passkey.title')),
    res.status === 200 ? null : h('p', { role: 'alert' }, await errorText(res)),
    table(t('passkey.caption'), [t('passkey.name'), t('common.created'), t('common.lastUsed'), t('keys.actions')], rows, t('passkey.noneYet')),
    config().features.passkeys ? h('div', { class: 'inline' },
      field(t('passkey.name'), { id: 'passkey-name', name: 'passkey-name', maxlength: 64, autocomplete: 'off' }),
      h('button', { type: 'button', id: 'passkey-add', onclick: () => void add() }, t('passkey.add'))) : null, ...say.nodes);
}

async function providersSection(redraw) {
  const say = messages();
  const res = await api('GET', '/api/v1/user/identities');
  if (res.status !== 200) return null;
  const rows = res.json.identities.map((i) => [i.provider, i.email ?? '—', when(i.created_at, lang()),
    h('button', { type: 'button', 'aria-label': t('providers.unlinkNamed', { name: i.provider }), onclick: async () => {
      const done = await api('DELETE', `/api/v1/user/identities/${encodeURIComponent(i.provider)}`);
      if (done.status === 200) redraw(t('providers.unlinked', { name: i.provider })); else say.fail(await errorText(done));
    } }, t('providers.unlink'))]);
  return h('section', { 'aria-labelledby': 'h-providers' }, h('h2', { id: 'h-providers' }, t('providers.title')),
    table(t('providers.caption'), [t('providers.provider'), t('field.email'), t('common.created'), t('keys.actions')], rows, t('providers.none')), ...say.nodes);
}

async function sessionsSection(redraw) {
  const say = messages();
  const res = await api('GET', '/api/v1/user/sessions');
  const list = res.status === 200 ? res.json.sessions : [];
  const end = async (s) => {
    const done = await api('DELETE', `/api/v1/user/sessions/${s.id}`);
    if (done.status !== 200) return say.fail(await errorText(done));
    if (s.current) { await signOut(); nav('sign-in'); } else redraw(t('sessions.ended'));
  };
  const everywhere = async () => {
    const done = await api('DELETE', '/api/v1/user/sessions');
    if (done.status !== 200) return say.fail(await errorText(done));
    await signOut();
    nav('sign-in');
  };
  const rows = list.map((s) => [h('span', {}, s.user_agent ?? '—'), s.ip ?? '—', when(s.last_used_at ?? s.created_at, lang()), s.current ? t('sessions.this') : '',
    h('button', { type: 'button', 'data-session': s.current ? 'current' : s.id, onclick: () => void end(s) }, s.current ? t('sessions.signOutThis') : t('sessions.end'))]);
  return h('section', { 'aria-labelledby': 'h-sessions' }, h('h2', { id: 'h-sessions' }, t('sessions.title')),
    res.status === 200 ? null : h('p', { role: 'alert' }, await errorText(res)),
    table(t('sessions.caption'), [t('sessions.device'), t('sessions.ip'), t('common.lastUsed'), t('sessions.state'), t('keys.actions')], rows, '—'),
    h('button', { type: 'button', class: 'danger', id: 'sign-out-everywhere', onclick: () => void everywhere() }, t('sessions.everywhere')), ...say.nodes);
}

export async function securityPage(main) {
  const status = h('p', { role: 'status', id: 'security-status', tabindex: '-1' });
  const redraw = async (said) => {
    await securityPage(main);
    const s = document.getElementById('security-status');
    s.textContent = said;
    s.focus();
  };
  const [passkeys, providers, sessions] = await Promise.all([passkeysSection(redraw), providersSection(redraw), sessionsSection(redraw)]);
  fill(main, h('h1', { tabindex: '-1' }, t('nav.security')), status, passwordSection(), totpSection(), passkeys, providers, sessions);
  return t('nav.security');
}

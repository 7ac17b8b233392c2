// The operator's way into the console (CONTRACT §24): the enrolment link (#enrol=…: the TOTP key
// to add, then a password and a code) or email, password and a code; where the console offers
// them (admin.passkeys), a passkey instead of the code, in either. Either ends in a session
// cookie, then the console itself (index.html), which acts with the operator's role.
const $ = (id) => document.getElementById(id);
const say = (text) => { $('operator-error').textContent = text; };

async function post(path, body) {
  const res = await fetch(path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { ok: res.ok, status: res.status, json: await res.json().catch(() => ({})) };
}

async function enrol(token) {
  // The token leaves the address bar (and so the history) at once; the page keeps it in memory.
  history.replaceState(null, '', location.pathname);
  const started = await post('/console/operator/enrolment', { token });
  if (!started.ok) return say(started.json.error ?? 'Lien invalide');
  $('enrol-who').textContent = `${started.json.email} (${started.json.role})`;
  $('enrol-secret').textContent = started.json.secret;
  $('enrol-link').href = started.json.otpauth_url;
  const form = $('operator-enrol');
  form.hidden = false;
  offerPasskey('enrol-passkey', () => enrolWithPasskey(token));
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const done = await post('/console/operator/enrolment/complete', { token, password: $('new-password').value, code: $('enrol-code').value });
    if (!done.ok) return say(done.json.error ?? `Erreur ${done.status}`);
    location.assign('./');
  });
}

// Where the console offers passkeys, the link's second factor may be one instead of the app's code.
async function enrolWithPasskey(token) {
  if (!$('new-password').reportValidity()) return undefined;
  const options = await post('/console/operator/enrolment/passkey/options', { token });
  if (!options.ok) return say(options.json.error ?? `Erreur ${options.status}`);
  const credential = await navigator.credentials.create({ publicKey: PublicKeyCredential.parseCreationOptionsFromJSON(options.json) }).catch(() => null);
  if (!credential) return say('Aucune clé d’accès créée');
  const done = await post('/console/operator/enrolment/complete', { token, password: $('new-password').value, passkey: credential.toJSON() });
  if (!done.ok) return say(done.json.error ?? `Erreur ${done.status}`);
  location.assign('./');
}

/** Shows the passkey button where the console offers passkeys (its host name, not its IP); the form works meanwhile. */
function offerPasskey(button, action) {
  void fetch('/console/operator/passkey').then((res) => {
    if (!res.ok) return;
    $(button).hidden = false;
    $(button).addEventListener('click', () => void action());
  });
}

// The passkey stands for the code: email and password are still asked for.
async function passkeySignIn() {
  if (!$('email').reportValidity() || !$('password').reportValidity()) return undefined;
  const options = await post('/console/operator/passkey/login/options', {});
  if (!options.ok) return say(options.json.error ?? `Erreur ${options.status}`);
  const credential = await navigator.credentials.get({ publicKey: PublicKeyCredential.parseRequestOptionsFromJSON(options.json) }).catch(() => null);
  if (!credential) return say('Aucune clé d’accès utilisée');
  const res = await post('/console/operator/session', { email: $('email').value, password: $('password').value, passkey: credential.toJSON() });
  if (!res.ok) return say(res.json.error ?? `Erreur ${res.status}`);
  location.assign('./');
}

function signIn() {
  const form = $('operator-sign-in');
  form.hidden = false;
  offerPasskey('passkey-sign-in', passkeySignIn);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const res = await post('/console/operator/session', { email: $('email').value, password: $('password').value, code: $('code').value });
    if (!res.ok) return say(res.json.error ?? `Erreur ${res.status}`);
    location.assign('./');
  });
}

const token = /^#enrol=([\w-]+)$/.exec(location.hash)?.[1];
if (token) void enrol(token); else signIn();

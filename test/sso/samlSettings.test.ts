// A SAML connection's settings as its owner's PUT writes them (CONTRACT §31; settingsOf in
// src/auth/providers/saml/connection.ts), as a pure function: each field over the current value,
// each shape refused (the PUT answers 400), and the SP metadata an IdP imports.
import { describe, expect, it } from 'vitest';
import { settingsOf, spMetadataXml } from '../../src/auth/providers/saml/connection.js';
import { newSpKeyPair } from '../../src/auth/providers/saml/spKeys.js';
import type { SamlConnection, SamlSettings } from '../../src/storage/orgs/index.js';

const RETURN_TO = 'https://app.example.test/sso-start';
const allowed = (url: string) => (url === RETURN_TO ? url : undefined);
const DEFAULTS: SamlSettings = {
  enforce: false, allowJit: true, allowIdpInitiated: false, idpInitiatedUrl: null, allowSha1: false,
  attributes: {}, roleMapping: {}, mfaContexts: [], encryptAssertions: false,
};
const read = (body: Record<string, unknown>, current?: SamlSettings) => settingsOf(body, current, allowed);
const text = (n: number) => 'x'.repeat(n);

describe('SAML connection settings', () => {
  it('a new connection starts from the defaults; each field given replaces its value, one left out keeps it', () => {
    expect(read({})).toEqual(DEFAULTS);
    const set = {
      enforce: true, allowJit: false, allowIdpInitiated: true, idpInitiatedUrl: RETURN_TO, allowSha1: true, encryptAssertions: true,
      attributes: { email: 'mail', groups: 'memberOf' }, roleMapping: { admins: 'admin', staff: 'member' }, mfaContexts: ['https://refeds.org/profile/mfa'],
    };
    const written = read(set);
    expect(written).toEqual(set);
    expect(read({ allowJit: true }, written)).toEqual({ ...set, allowJit: true });
    expect(read({ allowIdpInitiated: false, idpInitiatedUrl: null }, written)).toEqual({ ...set, allowIdpInitiated: false, idpInitiatedUrl: null });
  });

  it('accepts each field at its bounds', () => {
    expect(read({ attributes: { email: text(256) } })?.attributes).toEqual({ email: text(256) });
    const hundred = Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`g${i}`, 'member']));
    expect(read({ roleMapping: hundred })?.roleMapping).toEqual(hundred);
    expect(read({ roleMapping: { [text(256)]: 'admin' } })?.roleMapping).toEqual({ [text(256)]: 'admin' });
    const twenty = Array.from({ length: 20 }, (_, i) => `ctx-${i}`);
    expect(read({ mfaContexts: twenty })?.mfaContexts).toEqual(twenty);
    expect(read({ mfaContexts: [text(256)] })?.mfaContexts).toEqual([text(256)]);
    expect(read({ mfaContexts: [] })?.mfaContexts).toEqual([]);
  });

  it.each([
    ['a flag that is no boolean', { enforce: 'true' }],
    ['a flag that is null', { allowJit: null }],
    ['an idpInitiatedUrl outside auth.oidc.returnTo', { idpInitiatedUrl: 'https://evil.example.test/' }],
    ['an idpInitiatedUrl that is empty', { idpInitiatedUrl: '' }],
    ['an idpInitiatedUrl that is no string', { idpInitiatedUrl: 42 }],
    ['allowIdpInitiated without idpInitiatedUrl', { allowIdpInitiated: true }],
    ['attributes that are no object', { attributes: ['email'] }],
    ['attributes null', { attributes: null }],
    ['an attribute other than email and groups', { attributes: { email: 'mail', role: 'r' } }],
    ['an attribute name that is empty', { attributes: { groups: '' } }],
    ['one attribute name of two that is empty', { attributes: { email: 'mail', groups: '' } }],
    ['one role mapping of two to no role', { roleMapping: { admins: 'admin', bosses: 'boss' } }],
    ['an attribute name over 256 characters', { attributes: { email: text(257) } }],
    ['an attribute name that is no string', { attributes: { email: 7 } }],
    ['a role mapping that is no object', { roleMapping: 'admins=admin' }],
    ['a role mapping that is an array', { roleMapping: [['admins', 'admin']] }],
    ['a role mapping to owner', { roleMapping: { founders: 'owner' } }],
    ['a role mapping to no role', { roleMapping: { admins: 'boss' } }],
    ['a role mapping over 100 entries', { roleMapping: Object.fromEntries(Array.from({ length: 101 }, (_, i) => [`g${i}`, 'member'])) }],
    ['a role mapping\'s group over 256 characters', { roleMapping: { [text(257)]: 'admin' } }],
    ['a role mapping\'s group that is empty', { roleMapping: { '': 'admin' } }],
    ['mfaContexts that are no array', { mfaContexts: 'https://refeds.org/profile/mfa' }],
    ['mfaContexts over 20', { mfaContexts: Array.from({ length: 21 }, (_, i) => `ctx-${i}`) }],
    ['an mfaContext that is empty', { mfaContexts: ['ok', ''] }],
    ['an mfaContext over 256 characters', { mfaContexts: [text(257)] }],
  ])('refuses %s', (_name, body) => {
    expect(read(body as Record<string, unknown>)).toBeUndefined();
  });

  it('the SP metadata: the connection\'s entity ID and ACS, its certificate for signing and encryption, no demand that assertions be signed', () => {
    const keys = newSpKeyPair('sp', new Date());
    const connection = { id: 'saml_abc', sp_certificate: keys.certificatePem } as unknown as SamlConnection;
    const xml = spMetadataXml(connection, 'https://gw.example.test', keys.privateKeyPem);
    expect(xml).toContain('entityID="https://gw.example.test/api/v1/auth/saml/saml_abc/metadata"');
    expect(xml).toContain('ID="_saml_abc"');
    expect(xml).not.toContain('WantAssertionsSigned');
    const certificate = keys.certificatePem.replace(/-----[^-]+-----/g, '').replace(/\s+/g, '');
    expect(xml.replace(/\s+/g, '').split(certificate)).toHaveLength(3);
    expect(xml).toMatch(/Location="https:\/\/gw\.example\.test\/api\/v1\/auth\/saml\/saml_abc\/acs"/);
  });
});

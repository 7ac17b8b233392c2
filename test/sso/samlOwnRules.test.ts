// CONTRACT §31's rules as the gateway checks them itself, without @node-saml/node-saml in front:
// the library refuses some of them first (samlRules.test.ts shows it), and the gateway keeps its
// own check of each so that they hold if a release of the library stops refusing one. Its mutation
// room found these checks untested for that reason. The assertions are unsigned here: the rules
// read bytes, and the signature is the library's.
import { describe, expect, it } from 'vitest';
import { checkAssertion, checkResponseDocument, readEnvelope, type CheckInput } from '../../src/auth/providers/saml/response.js';
import type { SamlConnection } from '../../src/storage/orgs/index.js';
import { responseXml } from '../helpers/samlIdp.js';

const IDP = 'https://idp.example.test/metadata';
const BASE = 'https://gw.example.test/api/v1/auth/saml/saml_rules';
const REQUEST = '_request_of_the_rules';
const now = new Date(Math.floor(Date.now() / 1000) * 1000);
const iso = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
const input: CheckInput = {
  connection: { id: 'saml_rules', idp_entity_id: IDP, settings: { allowSha1: false } } as unknown as SamlConnection,
  publicUrl: 'https://gw.example.test', privateKeyPem: '', requestId: REQUEST, now,
};
const spec = { issuer: IDP, destination: `${BASE}/acs`, audience: `${BASE}/metadata`, recipient: `${BASE}/acs`, inResponseTo: REQUEST, nameId: 'ada@example.test' };
const response = () => responseXml(spec).xml;
const assertion = () => /<saml:Assertion [\s\S]*<\/saml:Assertion>/.exec(response())![0];
/** Sets (or with undefined removes) the attribute `name` of the first `element`. */
const attribute = (element: string, name: string, value: string | undefined) => (xml: string) =>
  xml.replace(new RegExp(`(<${element}\\b[^>]*?)\\s${name}="[^"]*"`), '$1').replace(`<${element}`, value === undefined ? `<${element}` : `<${element} ${name}="${value}"`);
const SCD = 'saml:SubjectConfirmationData';

describe('the gateway\'s own rules for a SAML assertion (CONTRACT §31)', () => {
  it('reads who signed in, how long the assertion is remembered, and its attributes (a nameless one under "")', async () => {
    const until = now.getTime() + 120_000;
    const xml = attribute('saml:Conditions', 'NotOnOrAfter', iso(until))(assertion())
      .replace('</saml:Assertion>', '<saml:AttributeStatement><saml:Attribute><saml:AttributeValue> x </saml:AttributeValue></saml:Attribute></saml:AttributeStatement></saml:Assertion>');
    const accepted = await checkAssertion(xml, input);
    expect(accepted).toMatchObject({ nameId: 'ada@example.test', notOnOrAfter: new Date(until), authnContext: 'urn:oasis:names:tc:SAML:2.0:ac:classes:PasswordProtectedTransport' });
    expect([...accepted.attributes]).toEqual([['', ['x']]]);
  });

  it('Conditions without NotOnOrAfter: accepted, remembered for the five minutes an assertion may be old; no AuthnStatement, no context', async () => {
    const xml = attribute('saml:Conditions', 'NotOnOrAfter', undefined)(assertion()).replace(/<saml:AuthnStatement[\s\S]*<\/saml:AuthnStatement>/, '');
    const accepted = await checkAssertion(xml, input);
    expect([accepted.notOnOrAfter, accepted.authnContext]).toEqual([new Date(now.getTime() + 300_000), undefined]);
  });

  it('Conditions expired a minute ago (the skew) are refused; a second later they are not', async () => {
    const at = (ms: number) => checkAssertion(attribute('saml:Conditions', 'NotOnOrAfter', iso(now.getTime() + ms))(assertion()), input);
    await expect(at(-60_000)).rejects.toMatchObject({ code: 'saml_invalid', rule: 'conditions_expired' });
    await expect(at(-59_000)).resolves.toMatchObject({ nameId: 'ada@example.test' });
  });

  it.each<[string, (xml: string) => string, string]>([
    ['the confirmation without NotOnOrAfter', attribute(SCD, 'NotOnOrAfter', undefined), 'subject_no_expiry'],
    ['Conditions valid from 61 s ahead', attribute('saml:Conditions', 'NotBefore', iso(now.getTime() + 61_000)), 'conditions_not_yet_valid'],
    ['no Conditions', (xml) => xml.replace(/<saml:Conditions [\s\S]*<\/saml:Conditions>/, ''), 'conditions'],
    ['two Conditions', (xml) => xml.replace(/<saml:Conditions [\s\S]*<\/saml:Conditions>/, (s) => s + s), 'conditions'],
    ['another audience', (xml) => xml.replace(`<saml:Audience>${BASE}/metadata<`, '<saml:Audience>https://other.example.test/metadata<'), 'audience'],
    ['no Issuer', (xml) => xml.replace(/<saml:Issuer>[^<]*<\/saml:Issuer>/, ''), 'assertion_issuer'],
    ['no Subject', (xml) => xml.replace(/<saml:Subject>[\s\S]*<\/saml:Subject>/, ''), 'no_subject'],
    ['no ID', attribute('saml:Assertion', 'ID', undefined), 'no_assertion_id'],
    ['not XML', () => '<saml:Assertion', 'assertion_not_xml'],
    ['not an Assertion', (xml) => xml.replaceAll('saml:Assertion', 'saml:Advice'), 'not_an_assertion'],
  ])('%s → refused (%s)', async (_name, edit, rule) => {
    await expect(checkAssertion(edit(assertion()), input)).rejects.toMatchObject({ code: 'saml_invalid', rule });
  });

  it('a Response answering another request is refused before the library sees it (in_response_to)', async () => {
    const base64 = Buffer.from(response()).toString('base64');
    await expect(checkResponseDocument(await readEnvelope(base64), base64, { ...input, requestId: '_another_request' }))
      .rejects.toMatchObject({ code: 'saml_invalid', rule: 'in_response_to' });
  });
});

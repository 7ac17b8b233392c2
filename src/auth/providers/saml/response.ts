// A SAML Response checked against every acceptance rule of CONTRACT §31. The signature (over the
// element read, no wrapping, certificates of the metadata only, the decryption of an
// EncryptedAssertion) is @node-saml/node-saml's (5.1.0: CVE-2025-54419 fixed); what it does not
// hold itself is checked here, on the document before it and on the signed assertion it hands
// back: no DTD, one assertion anywhere in the document (a wrapped copy in Extensions or Object
// counts), no ID twice, the algorithms, Destination, Issuer, InResponseTo, Recipient and the time
// bounds. Every field is read from the signed assertion's own bytes, and read as its whole text:
// a comment inside a NameID never cuts it.
import { SAML, ValidateInResponseTo } from '@node-saml/node-saml';
import type { SamlConnection } from '../../../storage/orgs/index.js';
import { spUrls } from './connection.js';
import { attributeOf, declaresDtd, decryptedAssertion, parseXml, selectAttributes, selectElements, type XmlDocument, type XmlElement, type XmlNode } from './xml.js';

const SKEW_MS = 60_000;
const MAX_AGE_MS = 5 * 60_000;
const SUCCESS = 'urn:oasis:names:tc:SAML:2.0:status:Success';
const BEARER = 'urn:oasis:names:tc:SAML:2.0:cm:bearer';
const DSIG = 'http://www.w3.org/2000/09/xmldsig#';
const STRONG_ALGORITHMS = new Set([
  'http://www.w3.org/2001/04/xmldsig-more#rsa-sha256', 'http://www.w3.org/2001/04/xmldsig-more#rsa-sha384', 'http://www.w3.org/2001/04/xmldsig-more#rsa-sha512',
  'http://www.w3.org/2001/04/xmldsig-more#ecdsa-sha256', 'http://www.w3.org/2001/04/xmldsig-more#ecdsa-sha384', 'http://www.w3.org/2001/04/xmldsig-more#ecdsa-sha512',
  'http://www.w3.org/2001/04/xmlenc#sha256', 'http://www.w3.org/2001/04/xmldsig-more#sha384', 'http://www.w3.org/2001/04/xmlenc#sha512',
]);
const SHA1_ALGORITHMS = new Set([`${DSIG}rsa-sha1`, `${DSIG}sha1`]);
const TRANSFORMS = new Set([
  `${DSIG}enveloped-signature`, 'http://www.w3.org/2001/10/xml-exc-c14n#', 'http://www.w3.org/TR/2001/REC-xml-c14n-20010315',
  'http://www.w3.org/2006/12/xml-c14n11',
]);

/** Why a Response is refused: `access_denied` (the IdP's status) or `saml_invalid` with the rule, for the audit. */
export class ResponseRefused extends Error {
  constructor(readonly code: 'access_denied' | 'saml_invalid', readonly rule: string) {
    super(rule);
  }
}

const invalid = (rule: string): never => { throw new ResponseRefused('saml_invalid', rule); };

/** What the Response's envelope says before any signature is checked: where it is going and to which request it answers. */
export interface Envelope {
  xml: string;
  doc: XmlDocument;
  inResponseTo: string | undefined;
}

/** The decoded Response, refused at once when it declares a DTD or is no SAML Response. */
export async function readEnvelope(base64: string): Promise<Envelope> {
  const xml = Buffer.from(base64, 'base64').toString('utf8');
  if (declaresDtd(xml)) invalid('dtd');
  const doc = await parseXml(xml).catch(() => invalid('not_xml'));
  if (doc.documentElement?.localName !== 'Response') invalid('not_a_response');
  return { xml, doc, inResponseTo: attributeOf(doc.documentElement, 'InResponseTo') };
}

/** Who the IdP says signed in, once every rule held. */
export interface Accepted {
  assertionId: string;
  notOnOrAfter: Date;
  nameId: string;
  nameIdFormat: string | undefined;
  attributes: Map<string, string[]>;
  authnContext: string | undefined;
}

export interface CheckInput {
  connection: SamlConnection;
  publicUrl: string;
  privateKeyPem: string;
  /** The stored request's ID; undefined for an unsolicited Response. */
  requestId: string | undefined;
  now: Date;
}

/** The structure of the whole document: one assertion, no ID twice, the algorithms and transforms allowed. */
function checkStructure(doc: XmlNode, allowSha1: boolean): void {
  const assertions = selectElements(doc, "//*[local-name()='Assertion' or local-name()='EncryptedAssertion']");
  if (assertions.length !== 1) invalid('assertion_count');
  const ids = selectAttributes(doc, '//@ID | //@Id | //@id').map((a) => a.value);
  if (new Set(ids).size !== ids.length) invalid('duplicate_id');
  checkAlgorithms(doc, allowSha1);
}

function checkAlgorithms(node: XmlNode, allowSha1: boolean): void {
  const signatures = selectElements(node, `//*[local-name()='Signature' and namespace-uri()='${DSIG}']`);
  for (const signature of signatures) {
    const methods = selectElements(signature, ".//*[local-name()='SignatureMethod' or local-name()='DigestMethod']").map((e) => attributeOf(e, 'Algorithm') ?? '');
    // Named `sha1` only when SHA-1 is all that is refused: beside an allowed SHA-1, another method is the reason.
    const refused = methods.filter((m) => !STRONG_ALGORITHMS.has(m) && !(allowSha1 && SHA1_ALGORITHMS.has(m)));
    if (refused.length) invalid(refused.every((m) => SHA1_ALGORITHMS.has(m)) ? 'sha1' : 'algorithm');
    const transforms = selectElements(signature, ".//*[local-name()='Transform' or local-name()='CanonicalizationMethod']").map((e) => attributeOf(e, 'Algorithm') ?? '');
    if (transforms.some((t) => !TRANSFORMS.has(t))) invalid('transform');
    if (selectElements(signature, ".//*[local-name()='Reference']").length !== 1) invalid('reference_count');
  }
}

/** The Response's own attributes: Success, Destination, Issuer, InResponseTo. */
function checkResponse(doc: XmlDocument, input: CheckInput): void {
  const response = doc.documentElement;
  const code = selectElements(response, "./*[local-name()='Status']/*[local-name()='StatusCode']")[0];
  const status = code && attributeOf(code, 'Value');
  if (status !== SUCCESS) throw new ResponseRefused('access_denied', `status ${status ?? 'missing'}`);
  if (attributeOf(response, 'Destination') !== spUrls(input.publicUrl, input.connection.id).acs_url) invalid('destination');
  const issuer = selectElements(response, "./*[local-name()='Issuer']")[0];
  if (issuer && issuer.textContent?.trim() !== input.connection.idp_entity_id) invalid('response_issuer');
  if (attributeOf(response, 'InResponseTo') !== input.requestId) invalid('in_response_to');
  checkInstant(attributeOf(response, 'IssueInstant'), input.now);
}

function checkInstant(value: string | undefined, now: Date): void {
  const at = Date.parse(value ?? '');
  if (!Number.isFinite(at) || at > now.getTime() + SKEW_MS || at < now.getTime() - MAX_AGE_MS - SKEW_MS) invalid('issue_instant');
}

/** NotBefore / NotOnOrAfter of an element within the skew; the NotOnOrAfter (required when `required`). */
function checkBounds(element: XmlElement, now: Date, rule: string, required: boolean): Date | undefined {
  const before = attributeOf(element, 'NotBefore');
  const after = attributeOf(element, 'NotOnOrAfter');
  if (before && !(Date.parse(before) <= now.getTime() + SKEW_MS)) invalid(`${rule}_not_yet_valid`);
  if (!after) return required ? invalid(`${rule}_no_expiry`) : undefined;
  const end = Date.parse(after);
  if (!(end > now.getTime() - SKEW_MS)) invalid(`${rule}_expired`);
  return new Date(end);
}

const child = (node: XmlElement, name: string): XmlElement[] => selectElements(node, `./*[local-name()='${name}']`);
const text = (node: XmlElement | undefined): string => (node?.textContent ?? '').trim();

/**
 * The signed assertion's own rules, read from its bytes: Issuer, bearer confirmation, conditions,
 * and who. Exported for its tests: node-saml refuses some of the same first, and these must hold
 * without it.
 */
export async function checkAssertion(assertionXml: string, input: CheckInput): Promise<Accepted> {
  const assertion = (await parseXml(assertionXml).catch(() => invalid('assertion_not_xml'))).documentElement;
  if (assertion.localName !== 'Assertion') invalid('not_an_assertion');
  const urls = spUrls(input.publicUrl, input.connection.id);
  if (text(child(assertion, 'Issuer')[0]) !== input.connection.idp_entity_id) invalid('assertion_issuer');
  checkInstant(attributeOf(assertion, 'IssueInstant'), input.now);
  const subject = child(assertion, 'Subject')[0] ?? invalid('no_subject');
  const bearer = child(subject, 'SubjectConfirmation').filter((c) => attributeOf(c, 'Method') === BEARER);
  if (bearer.length !== 1) invalid('bearer_confirmation');
  const data = child(bearer[0]!, 'SubjectConfirmationData')[0] ?? invalid('bearer_confirmation');
  if (attributeOf(data, 'Recipient') !== urls.acs_url) invalid('recipient');
  if (attributeOf(data, 'InResponseTo') !== input.requestId) invalid('subject_in_response_to');
  checkBounds(data, input.now, 'subject', true);
  const conditions = child(assertion, 'Conditions');
  if (conditions.length !== 1) invalid('conditions');
  const notOnOrAfter = checkBounds(conditions[0]!, input.now, 'conditions', false);
  const audiences = selectElements(conditions[0]!, "./*[local-name()='AudienceRestriction']/*[local-name()='Audience']").map(text);
  if (!audiences.includes(urls.sp_entity_id)) invalid('audience');
  const nameIds = child(subject, 'NameID');
  if (nameIds.length !== 1) invalid('name_id');
  const attributes = new Map<string, string[]>();
  for (const attribute of selectElements(assertion, "./*[local-name()='AttributeStatement']/*[local-name()='Attribute']")) {
    attributes.set(attributeOf(attribute, 'Name') ?? '', child(attribute, 'AttributeValue').map(text));
  }
  const assertionId = attributeOf(assertion, 'ID') ?? invalid('no_assertion_id');
  return {
    assertionId,
    notOnOrAfter: notOnOrAfter ?? new Date(input.now.getTime() + MAX_AGE_MS),
    nameId: text(nameIds[0]),
    nameIdFormat: attributeOf(nameIds[0]!, 'Format'),
    attributes,
    authnContext: text(selectElements(assertion, "./*[local-name()='AuthnStatement']/*[local-name()='AuthnContext']/*[local-name()='AuthnContextClassRef']")[0]) || undefined,
  };
}

/** node-saml for one connection: its certificates only, its Audience, its key to decrypt; InResponseTo and time are checked here. */
export function samlOf(connection: SamlConnection, publicUrl: string, privateKeyPem: string, requestId?: string): SAML {
  const urls = spUrls(publicUrl, connection.id);
  return new SAML({
    idpCert: connection.idp_certificates.map((c) => c.pem),
    issuer: urls.sp_entity_id,
    callbackUrl: urls.acs_url,
    entryPoint: connection.idp_sso_url,
    audience: urls.sp_entity_id,
    decryptionPvk: privateKeyPem,
    ...(connection.want_requests_signed ? { privateKey: privateKeyPem, signatureAlgorithm: 'sha256' as const } : {}),
    wantAuthnResponseSigned: false,
    wantAssertionsSigned: false,
    acceptedClockSkewMs: SKEW_MS,
    validateInResponseTo: ValidateInResponseTo.never,
    identifierFormat: null,
    disableRequestedAuthnContext: true,
    ...(requestId ? { generateUniqueId: () => requestId } : {}),
  });
}

/** Every rule of CONTRACT §31 but the one-time ones (request and assertion ID, the caller's): who signed in, or ResponseRefused. */
export async function checkResponseDocument(envelope: Envelope, base64: string, input: CheckInput): Promise<Accepted> {
  const { settings } = input.connection;
  checkStructure(envelope.doc, settings.allowSha1);
  checkResponse(envelope.doc, input);
  const [encrypted] = selectElements(envelope.doc, "/*/*[local-name()='EncryptedAssertion']");
  if (settings.encryptAssertions && !encrypted) invalid('not_encrypted');
  // An encrypted assertion holds to the document's rules (one assertion, no ID twice, the
  // algorithms of its own signature), and only decryption shows what it holds: node-saml hands back
  // the content its signature covers, never the Signature itself.
  if (encrypted) checkStructure(await decryptedAssertion(encrypted, input.privateKeyPem).catch(() => invalid('not_decryptable')), settings.allowSha1);
  let assertionXml: string;
  try {
    const { profile } = await samlOf(input.connection, input.publicUrl, input.privateKeyPem).validatePostResponseAsync({ SAMLResponse: base64 });
    assertionXml = profile?.getAssertionXml?.() ?? invalid('no_assertion');
  } catch (err) {
    if (err instanceof ResponseRefused) throw err;
    // node-saml's own refusals (signature, its audience and time checks), by its message.
    return invalid(`library: ${(err as Error).message.slice(0, 120)}`);
  }
  return checkAssertion(assertionXml, input);
}

// The XML reading SAML needs, through @node-saml/node-saml's own (its xmldom parser and xpath
// selection), so that the documents the gateway checks are read by the very parser that verifies
// their signatures, and no second XML package is a dependency. xmldom never loads a DTD's external
// entities; the gateway refuses any DOCTYPE before parsing anyway (CONTRACT §31).
import { decryptXml, parseDomFromString, xpath } from '@node-saml/node-saml/lib/xml.js';

/** Whether the text declares a DTD (`<!DOCTYPE`, in any case): refused before any parser sees it. */
export function declaresDtd(xml: string): boolean {
  return /<!DOCTYPE/i.test(xml);
}

// The DOM as far as SAML reads it: the gateway builds without the DOM library's types (no browser).
// An attribute is read through attributeOf only: xmldom answers '' for an absent attribute, never
// the DOM's null, so `getAttribute(name) ?? fallback` never falls back (a NameID without Format
// read as no email format, an Assertion without ID passed as '', a KeyDescriptor without `use`
// dropped).
export interface XmlElement {
  readonly localName: string;
  readonly textContent: string | null;
}
export interface XmlDocument {
  readonly documentElement: XmlElement;
}
export type XmlNode = XmlDocument | XmlElement;

/** The attribute's value; undefined when it is absent or empty. */
export function attributeOf(element: XmlElement, name: string): string | undefined {
  return (element as XmlElement & { getAttribute(name: string): string | null }).getAttribute(name) || undefined;
}
export async function parseXml(xml: string): Promise<XmlDocument> {
  if (declaresDtd(xml)) throw new Error('a DOCTYPE');
  return await parseDomFromString(xml) as unknown as XmlDocument;
}

export function selectElements(node: XmlNode, path: string): XmlElement[] {
  return xpath.selectElements(node as unknown as Parameters<typeof xpath.selectElements>[0], path) as unknown as XmlElement[];
}

export function selectAttributes(node: XmlNode, path: string): Array<{ value: string }> {
  return xpath.selectAttributes(node as unknown as Parameters<typeof xpath.selectAttributes>[0], path) as unknown as Array<{ value: string }>;
}

/** An EncryptedAssertion decrypted with the SP's key, as node-saml decrypts it (its decryptXml: xml-encryption), parsed. */
export async function decryptedAssertion(encrypted: XmlElement, privateKeyPem: string): Promise<XmlDocument> {
  return parseXml(await decryptXml(String(encrypted), privateKeyPem));
}

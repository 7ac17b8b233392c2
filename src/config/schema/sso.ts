// organizations.sso (CONTRACT §31): enterprise sign-in for organizations, their domains first.
// Absent: /api/v1/orgs/{id}/domains and the SSO paths are not the gateway's (§20).
import { isIP } from 'node:net';
import { z } from 'zod';
import { bool, optionalText, secureUrl } from './values.js';

// An address the look-ups go to: an IP, optionally with its port (`[::1]:53`, `127.0.0.1:5353`), as node:dns's setServers takes it.
const RESOLVER = /^(?:\[([0-9a-fA-F:.]+)\]|([0-9.]+))(?::(\d{1,5}))?$|^([0-9a-fA-F:]+)$/;
const resolver = z.string().refine((text) => {
  const m = RESOLVER.exec(text);
  const ip = m && (m[1] ?? m[2] ?? m[4]);
  return !!ip && isIP(ip) !== 0 && (m[3] === undefined || Number(m[3]) <= 65535);
}, 'expected a DNS server\'s IP address, optionally with a port (8.8.8.8, 127.0.0.1:5353, [2001:4860:4860::8888]:53)');

export const ssoSchema = z.strictObject({
  publicUrl: secureUrl('https://gw.example.com').optional()
    .meta({ description: 'The base of the SAML ACS and SP metadata URLs. Default: auth.oidc.publicUrl.' }),
  dns: z.strictObject({
    resolvers: z.array(resolver).default([])
      .meta({ examples: [['1.1.1.1', '8.8.8.8']], description: 'DNS servers for the domains\' TXT look-ups; empty: the system\'s.' }),
  }).prefault({}),
  publicMailDomains: optionalText
    .meta({ examples: ['./more-public-domains.txt'], description: 'A file of public mail domains (one a line, # comments), refused as claims besides the shipped list.' }),
  trustIdpMfa: bool().prefault(false)
    .meta({ description: 'true: an IdP\'s asserted MFA (a connection\'s mfaContexts) may give aal2.' }),
}).meta({ description: 'Enterprise sign-in for organizations (docs/enterprise-sso.md): verified domains, SAML, SCIM. Absent: none of these paths is the gateway\'s.' });

export type SsoConfig = z.output<typeof ssoSchema>;

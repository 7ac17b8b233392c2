// SCIM's own error shape (RFC 7644 §3.12), the one place that builds it. CONTRACT §31: "SCIM's
// errors are SCIM's and stay outside the catalog". A directory (Okta, Entra ID) reads `status`
// (a string) and `scimType`, never the gateway's `error`/`code`, and shows `detail` to the admin
// who set it up; so these bodies are not the catalog's (src/errors/), are never translated, and
// are answered only under /scim/v2/ (test/architecture/scimErrors.test.ts holds that).
import type { FastifyReply } from 'fastify';

export const SCIM_TYPE = 'application/scim+json; charset=utf-8';
export const ERROR_SCHEMA = 'urn:ietf:params:scim:api:messages:2.0:Error';

/** RFC 7644 §3.12's scimType values the gateway answers. */
export type ScimType = 'uniqueness' | 'invalidFilter' | 'invalidValue' | 'mutability' | 'invalidPath' | 'noTarget' | 'invalidSyntax' | 'tooMany';

/** A refusal thrown inside a SCIM handler: the handler's scope answers it as a SCIM error. */
export class ScimError extends Error {
  constructor(readonly status: number, readonly detail: string, readonly scimType?: ScimType) {
    super(detail);
  }
}

export const scimError = (status: number, detail: string, scimType?: ScimType): never => {
  throw new ScimError(status, detail, scimType);
};

export const invalidValue = (detail: string): never => scimError(400, detail, 'invalidValue');
export const notFound = (what: string): never => scimError(404, `${what} not found`);

export function sendScimError(reply: FastifyReply, error: ScimError): FastifyReply {
  const body = { schemas: [ERROR_SCHEMA], status: String(error.status), ...(error.scimType ? { scimType: error.scimType } : {}), detail: error.detail };
  return reply.code(error.status).type(SCIM_TYPE).send(JSON.stringify(body));
}

/** A SCIM resource or list: the media type SCIM clients expect. */
export function sendScim(reply: FastifyReply, body: unknown, status = 200): FastifyReply {
  return reply.code(status).type(SCIM_TYPE).send(JSON.stringify(body));
}

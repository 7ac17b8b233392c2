// Which request a decision is for (CONTRACT §11), read from what the proxy in front sent: a pure
// function on the security boundary (unit tests in test/decisions/original.test.ts).
//
//   ANY /decisions/<original path>   that path, with the decision request's own method (Envoy's
//                                    ext_authz path_prefix, or any proxy that can build a URL)
//   ANY /decisions                   X-Forwarded-Uri, else X-Original-URI; X-Forwarded-Method, else
//                                    X-Original-Method, else the request's own method (Caddy
//                                    forward_auth, Traefik forwardAuth, nginx auth_request)

export const DECISIONS_PATH = '/decisions';

export interface Original {
  method: string;
  /** Path and query, as the client sent them to the proxy: the pipeline normalizes the path. */
  url: string;
}

// RFC 9110 §5.6.2: a method is a token.
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/**
 * The request to decide for, or undefined when it cannot be told without guessing (answered 400):
 * the headers form without a URI, a method that is not a token, or one of the headers it reads
 * sent twice. A proxy that appended its own X-Forwarded-Uri after the client's would otherwise
 * have the gateway pick one of the two, and the client choose which path is decided.
 */
export function originalRequest(method: string, url: string, rawHeaders: readonly string[]): Original | undefined {
  // `/decisions/…` (the decisions listener routes nothing else here): the path after the prefix,
  // exactly as received, so that `/decisions/x/../paid` is decided for `/paid`, as the upstream
  // behind the proxy will read it, never for a path the gateway made up.
  if (url.startsWith(`${DECISIONS_PATH}/`)) return { method, url: url.slice(DECISIONS_PATH.length) };
  const read = decisionHeaders(rawHeaders);
  if (read === undefined) return undefined;
  const uri = read['x-forwarded-uri'] ?? read['x-original-uri'];
  const originalMethod = read['x-forwarded-method'] ?? read['x-original-method'] ?? method;
  if (!uri || !TOKEN.test(originalMethod)) return undefined;
  return { method: originalMethod, url: uri };
}

const DECISION_HEADER_NAMES = ['x-forwarded-uri', 'x-original-uri', 'x-forwarded-method', 'x-original-method'] as const;
type DecisionHeader = (typeof DECISION_HEADER_NAMES)[number];
/** The headers that say which request is decided: the proxy's own, never passed on to the application. */
export const DECISION_HEADERS: ReadonlySet<string> = new Set(DECISION_HEADER_NAMES);

/** The four headers, each trimmed; undefined when one of them comes more than once. */
function decisionHeaders(rawHeaders: readonly string[]): Partial<Record<DecisionHeader, string>> | undefined {
  const found: Partial<Record<DecisionHeader, string>> = {};
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    // Every one of them starts with x: most headers are passed over after one comparison.
    if (name.length < 14 || (name.charCodeAt(0) | 0x20) !== 0x78) continue;
    const lower = name.toLowerCase();
    if (!DECISION_HEADERS.has(lower)) continue;
    if (found[lower as DecisionHeader] !== undefined) return undefined;
    found[lower as DecisionHeader] = rawHeaders[i + 1]!.trim();
  }
  return found;
}

// An upstream that routes the way Rails does, for the format-suffix tests (issue 16): the last
// segment's `(.:format)` is dropped before routing (`/admin.json` runs the `/admin` action as JSON),
// a trailing slash is ignored and percent-escapes are decoded. It records which action each request
// ran, so a test can tell when a guarded action was reached through a public route.
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface RailsHit {
  /** The action's path, as Rails' router resolved it. */
  action: string;
  format: string | undefined;
  headers: http.IncomingHttpHeaders;
}

export interface RailsUpstream {
  url: string;
  hits: RailsHit[];
  /** Requests that ran this action. */
  ran(action: string): RailsHit[];
  close(): Promise<void>;
}

/** `/api/v1/public/admin.json/` → { action: '/api/v1/public/admin', format: 'json' }. */
export function railsRoute(path: string): { action: string; format: string | undefined } {
  let decoded = path;
  try {
    decoded = decodeURIComponent(path);
  } catch { /* kept as sent */ }
  const trimmed = decoded.length > 1 ? decoded.replace(/\/+$/, '') : decoded;
  const m = /^(.*\/[^/.]+)\.([^/]+)$/.exec(trimmed);
  return m ? { action: m[1]!, format: m[2] } : { action: trimmed, format: undefined };
}

export async function startRailsUpstream(): Promise<RailsUpstream> {
  const hits: RailsHit[] = [];
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const { action, format } = railsRoute((req.url ?? '/').split('?')[0]!);
      hits.push({ action, format, headers: req.headers });
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ action, format }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    hits,
    ran: (action) => hits.filter((h) => h.action === action),
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}

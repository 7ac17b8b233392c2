// Whether two URLs are of one site, as browsers decide which cookies a request carries (RFC 6265bis
// §5.2, schemeful): the same scheme, and the same registrable domain, or the same IP address.
// Auth.oidc.bindToBrowser (CONTRACT §26) rests on it: its SameSite=Lax cookie reaches the
// exchange only from a page of the gateway's site.
//
// The registrable domain is taken as the host's last two labels: the gateway carries no copy of
// the Public Suffix List. That errs one way only, towards "same site" for two hosts under a
// suffix of several labels (a.example.co.uk and b.other.co.uk, x.github.io and y.github.io):
// bindToBrowser then defaults to true, the browser does not send the cookie, and every exchange
// is refused (fail closed, never a weaker binding); bindToBrowser: false is then the setting.
import { isIP } from 'node:net';

function siteOf(host: string): string {
  const bare = host.startsWith('[') ? host.slice(1, -1) : host;
  if (isIP(bare)) return bare;
  return bare.split('.').slice(-2).join('.');
}

export function sameSite(a: string, b: string): boolean {
  const [x, y] = [new URL(a), new URL(b)];
  return x.protocol === y.protocol && siteOf(x.hostname) === siteOf(y.hostname);
}

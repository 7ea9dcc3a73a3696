// Peer URL validation as etcd's types.NewURLs, used by MemberAdd/MemberUpdate.

const URL_RE = /^([A-Za-z][A-Za-z0-9+.-]*):\/\/([^/?#]*)([^?#]*)/;
const ALLOWED_SCHEMES = new Set(['http', 'https', 'unix', 'unixs']);

/** Go's net.SplitHostPort acceptance: "host:port" or "[v6]:port" (port may be empty). */
function hasHostPort(hostport: string): boolean {
  if (hostport.startsWith('[')) {
    const close = hostport.indexOf(']');
    return close > 0 && hostport[close + 1] === ':' && !hostport.slice(close + 2).includes(':');
  }
  const colons = hostport.split(':').length - 1;
  return colons === 1;
}

/** True when every URL is one etcd accepts as a member URL (and there is at least one). */
export function validPeerUrls(urls: readonly string[]): boolean {
  if (urls.length === 0) return false;
  for (const raw of urls) {
    const m = URL_RE.exec(raw.trim());
    if (!m) return false;
    const scheme = m[1]!.toLowerCase();
    if (!ALLOWED_SCHEMES.has(scheme)) return false;
    const authority = m[2]!;
    const host = authority.includes('@') ? authority.slice(authority.lastIndexOf('@') + 1) : authority;
    if (!hasHostPort(host)) return false;
    if (m[3] !== '') return false;
  }
  return true;
}

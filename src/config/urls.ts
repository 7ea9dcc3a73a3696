// URL lists as etcd reads them (types.NewURLs on top of Go's net/url): the same accepted
// forms, the same error texts, and the same canonical order (sorted by string).

import { goQuote } from './goparse';

export interface EtcdUrl {
  /** Lowercased scheme: http, https, unix or unixs. */
  readonly scheme: string;
  /** Host part as given (IPv6 without brackets), e.g. "127.0.0.1", "localhost", "::1". */
  readonly hostname: string;
  /** Port text as given (may be empty for "host:"). */
  readonly port: string;
  /** Canonical text (Go's url.String()), e.g. "http://127.0.0.1:2379". */
  readonly text: string;
}

class UrlError extends Error {}

interface GoUrl {
  scheme: string;
  opaque: string;
  userinfo: string | undefined;
  host: string;
  path: string;
  rawQuery: string;
  forceQuery: boolean;
  fragment: string | undefined;
}

function getScheme(raw: string): [string, string] {
  for (let i = 0; i < raw.length; i++) {
    const c = raw[i];
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) continue;
    if ((c >= '0' && c <= '9') || c === '+' || c === '-' || c === '.') {
      if (i === 0) return ['', raw];
      continue;
    }
    if (c === ':') {
      if (i === 0) throw new UrlError('missing protocol scheme');
      return [raw.slice(0, i), raw.slice(i + 1)];
    }
    return ['', raw];
  }
  return ['', raw];
}

function validOptionalPort(port: string): boolean {
  if (port === '') return true;
  if (port[0] !== ':') return false;
  return /^[0-9]*$/.test(port.slice(1));
}

function parseHost(host: string): string {
  if (host.startsWith('[')) {
    const i = host.lastIndexOf(']');
    if (i < 0) throw new UrlError('missing \']\' in host');
    const colonPort = host.slice(i + 1);
    if (!validOptionalPort(colonPort)) throw new UrlError(`invalid port ${goQuote(colonPort)} after host`);
    return host;
  }
  const i = host.lastIndexOf(':');
  if (i !== -1) {
    const colonPort = host.slice(i);
    if (!validOptionalPort(colonPort)) throw new UrlError(`invalid port ${goQuote(colonPort)} after host`);
  }
  return host;
}

/** The subset of Go's url.Parse that decides what etcd accepts. */
function goUrlParse(rawUrl: string): GoUrl {
  try {
    let rest = rawUrl;
    let fragment: string | undefined;
    const hash = rest.indexOf('#');
    if (hash >= 0) {
      fragment = rest.slice(hash + 1);
      rest = rest.slice(0, hash);
    }
    if (/[\x00-\x1f\x7f]/.test(rest)) throw new UrlError('net/url: invalid control character in URL');
    const u: GoUrl = {
      scheme: '',
      opaque: '',
      userinfo: undefined,
      host: '',
      path: '',
      rawQuery: '',
      forceQuery: false,
      fragment,
    };
    const [scheme, afterScheme] = getScheme(rest);
    u.scheme = scheme.toLowerCase();
    rest = afterScheme;
    if (rest.endsWith('?') && rest.split('?').length === 2) {
      u.forceQuery = true;
      rest = rest.slice(0, -1);
    } else {
      const q = rest.indexOf('?');
      if (q >= 0) {
        u.rawQuery = rest.slice(q + 1);
        rest = rest.slice(0, q);
      }
    }
    if (!rest.startsWith('/')) {
      if (u.scheme !== '') {
        u.opaque = rest;
        return u;
      }
      const colon = rest.indexOf(':');
      const slash = rest.indexOf('/');
      if (colon >= 0 && (slash < 0 || colon < slash)) {
        throw new UrlError('first path segment in URL cannot contain colon');
      }
    }
    if ((u.scheme !== '' || !rest.startsWith('///')) && rest.startsWith('//')) {
      let authority = rest.slice(2);
      const slash = authority.indexOf('/');
      rest = slash >= 0 ? authority.slice(slash) : '';
      authority = slash >= 0 ? authority.slice(0, slash) : authority;
      const at = authority.lastIndexOf('@');
      if (at >= 0) {
        u.userinfo = authority.slice(0, at);
        authority = authority.slice(at + 1);
      }
      u.host = parseHost(authority);
    }
    u.path = rest;
    return u;
  } catch (e) {
    if (e instanceof UrlError) throw new UrlError(`parse ${goQuote(rawUrl)}: ${e.message}`);
    throw e;
  }
}

function goUrlString(u: GoUrl): string {
  let out = '';
  if (u.scheme !== '') out += u.scheme + ':';
  if (u.opaque !== '') out += u.opaque;
  else {
    if (u.scheme !== '' || u.host !== '' || u.userinfo !== undefined) {
      if (u.host !== '' || u.path !== '' || u.userinfo !== undefined) out += '//';
      if (u.userinfo !== undefined) out += u.userinfo + '@';
      out += u.host;
    }
    out += u.path;
  }
  if (u.forceQuery || u.rawQuery !== '') out += '?' + u.rawQuery;
  if (u.fragment !== undefined) out += '#' + u.fragment;
  return out;
}

/** net.SplitHostPort; throws on the forms Go rejects. */
export function splitHostPort(hostport: string): [string, string] {
  const fail = (why: string) => new UrlError(`address ${hostport}: ${why}`);
  const i = hostport.lastIndexOf(':');
  if (i < 0) throw fail('missing port in address');
  let host: string;
  if (hostport[0] === '[') {
    const end = hostport.indexOf(']');
    if (end < 0) throw fail("missing ']' in address");
    if (end + 1 === hostport.length) throw fail('missing port in address');
    if (end + 1 !== i) {
      throw fail(hostport[end + 1] === ':' ? 'too many colons in address' : 'missing port in address');
    }
    host = hostport.slice(1, end);
    if (host.slice(0).includes('[') || hostport.slice(end + 1).includes(']')) {
      throw fail("unexpected '[' in address");
    }
  } else {
    host = hostport.slice(0, i);
    if (host.includes(':')) throw fail('too many colons in address');
    if (host.includes('[')) throw fail("unexpected '[' in address");
    if (host.includes(']')) throw fail("unexpected ']' in address");
  }
  return [host, hostport.slice(i + 1)];
}

/** One URL as types.NewURLs checks it. Throws Error with etcd's message. */
export function parseEtcdUrl(input: string): EtcdUrl {
  const trimmed = input.trim();
  const u = goUrlParse(trimmed);
  if (u.scheme !== 'http' && u.scheme !== 'https' && u.scheme !== 'unix' && u.scheme !== 'unixs') {
    throw new UrlError(`URL scheme must be http, https, unix, or unixs: ${trimmed}`);
  }
  let hostPort: [string, string];
  try {
    hostPort = splitHostPort(u.host);
  } catch {
    throw new UrlError(`URL address does not have the form "host:port": ${trimmed}`);
  }
  if (u.path !== '') throw new UrlError(`URL must not contain a path: ${trimmed}`);
  return { scheme: u.scheme, hostname: hostPort[0], port: hostPort[1], text: goUrlString(u) };
}

/** types.NewURLs over a comma-separated list: validated, sorted by text. */
export function parseEtcdUrlList(commaSeparated: string): EtcdUrl[] {
  const parts = commaSeparated.split(',');
  const urls = parts.map(parseEtcdUrl);
  return urls.sort((a, b) => (a.text < b.text ? -1 : a.text > b.text ? 1 : 0));
}

/**
 * types.NewURLsMap: "name=url,name=url2,other=url3" to name -> sorted URLs. Entries without "="
 * get an empty URL (and so fail), as in etcd.
 */
export function parseInitialCluster(s: string): Map<string, EtcdUrl[]> {
  const grouped = new Map<string, string[]>();
  for (const item of s.split(',')) {
    if (item === '') continue;
    const eq = item.indexOf('=');
    const name = eq >= 0 ? item.slice(0, eq) : item;
    const value = eq >= 0 ? item.slice(eq + 1) : '';
    const list = grouped.get(name) ?? [];
    list.push(value);
    grouped.set(name, list);
  }
  const out = new Map<string, EtcdUrl[]>();
  for (const [name, values] of grouped) {
    out.set(
      name,
      values.map(parseEtcdUrl).sort((a, b) => (a.text < b.text ? -1 : a.text > b.text ? 1 : 0)),
    );
  }
  return out;
}

/** A parsed IPv4/IPv6 literal check, as net.ParseIP decides "is an IP". */
export function isIpLiteral(host: string): boolean {
  if (/^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.test(host)) {
    return host.split('.').every((p) => Number(p) <= 255 && !(p.length > 1 && p.startsWith('0')));
  }
  if (!host.includes(':')) return false;
  // IPv6: hex groups, at most one "::", optional trailing IPv4.
  if (host.includes('%')) return false;
  const parts = host.split('::');
  if (parts.length > 2) return false;
  const groups = (p: string) => (p === '' ? [] : p.split(':'));
  const all = [...groups(parts[0]), ...(parts.length === 2 ? groups(parts[1]) : [])];
  let count = 0;
  for (let i = 0; i < all.length; i++) {
    const g = all[i];
    if (i === all.length - 1 && g.includes('.')) {
      if (!isIpLiteral(g)) return false;
      count += 2;
      continue;
    }
    if (!/^[0-9a-fA-F]{1,4}$/.test(g)) return false;
    count += 1;
  }
  return parts.length === 2 ? count < 8 : count === 8;
}

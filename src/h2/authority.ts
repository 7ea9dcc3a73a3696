// The :authority a Go client dialled with a URL sends ("http://host:port") holds a scheme that
// is not part of an authority (RFC 9113 section 8.3.1); servers see it without one.

/** `http://h:p` -> `h:p` (any scheme); undefined when there is no scheme to strip. */
export function stripScheme(authority: string): string | undefined {
  const i = authority.indexOf('://');
  if (i < 0) return undefined;
  // A trailing path ("http://h:p/") is not part of an authority either.
  return authority.slice(i + 3).replace(/\/.*$/, '');
}

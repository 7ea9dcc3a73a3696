// Node's process warnings (deprecations, experimental features, listener leaks) as log entries.
// Node prints them to stderr as plain text, which breaks the one-JSON-object-per-line output that
// operators and log shippers read; bin/etcd starts node with --no-warnings, and they come here.
import type { Logger } from './types';

/**
 * Warnings that say nothing about the member's configuration or health, logged at debug level:
 * DEP0123 is grpc-js setting the TLS server name to the peer's address when https:// peer URLs
 * name an IP (Go's TLS sends no server name for an IP; the certificate is still checked
 * against the IP).
 */
const QUIET_WARNING_CODES: ReadonlySet<string> = new Set(['DEP0123']);

/** Routes every later 'warning' event of this process to `log`; returns the undo. */
export function logProcessWarnings(log: Logger): () => void {
  const onWarning = (w: Error & { code?: unknown }): void => {
    const code = typeof w.code === 'string' ? w.code : '';
    const fields = { name: w.name, ...(code !== '' ? { code } : {}), warning: w.message };
    if (QUIET_WARNING_CODES.has(code)) log.debug('Node.js process warning', fields);
    else log.warn('Node.js process warning', fields);
  };
  process.on('warning', onWarning);
  return () => {
    process.off('warning', onWarning);
  };
}

// What etcd checks and logs around a TLS handshake: the CRL (--*-crl-file) and --*-cert-allowed-cn /
// -hostname on the peer certificate, and one "rejected connection" warning per failed handshake.
import tls from 'node:tls';
import { peerChain } from './crl';
import type { TlsMaterial } from './material';

export interface RejectLogger {
  warn(msg: string, fields?: Record<string, unknown>): void;
}

/**
 * etcd checks the client's certificates against the CRL (--client-crl-file, --peer-crl-file), then
 * the allowed CN / hostname on the verified client certificate; `undefined` means accepted,
 * otherwise the error text etcd reports.
 */
export function checkAllowedPeer(m: TlsMaterial, socket: tls.TLSSocket): string | undefined {
  if (m.crl !== undefined) {
    const revoked = m.crl.rejection(peerChain(socket.getPeerCertificate(true)));
    if (revoked !== undefined) return revoked;
  }
  if (m.allowedCns.length === 0 && m.allowedHostnames.length === 0) return undefined;
  const cert = socket.getPeerCertificate();
  if (cert === null || Object.keys(cert).length === 0) return 'client certificate authentication failed';
  if (m.allowedCns.length > 0) {
    const cn = cert.subject?.CN;
    const cns = Array.isArray(cn) ? cn : cn === undefined ? [] : [cn];
    if (cns.some((c) => m.allowedCns.includes(c))) return undefined;
    return 'client certificate authentication failed';
  }
  for (const host of m.allowedHostnames) {
    if (tls.checkServerIdentity(host, cert) === undefined) return undefined;
  }
  return 'client certificate authentication failed';
}

/**
 * Runs checkAllowedPeer on a connection whose handshake just completed: a rejected one is logged as
 * "rejected connection" and destroyed in the same turn (before anything reads from it). Returns
 * whether it was admitted. The client, peer and metrics listeners all take connections this way.
 */
export function admitVerifiedPeer(m: TlsMaterial, socket: tls.TLSSocket, log: RejectLogger): boolean {
  const rejected = checkAllowedPeer(m, socket);
  if (rejected === undefined) return true;
  logRejected(log, socket, new Error(rejected));
  socket.destroy();
  return false;
}

/** OpenSSL's reasons, said the way Go's crypto/tls says them in etcd's logs. */
export function goTlsError(e: Error & { code?: string }): string {
  const code = e.code ?? '';
  const text = e.message;
  if (code === 'ERR_SSL_WRONG_VERSION_NUMBER' || code === 'ERR_SSL_HTTP_REQUEST' || code === 'ERR_SSL_PACKET_LENGTH_TOO_LONG' || /wrong version number|http request|packet length too long|unknown protocol/i.test(text)) {
    return 'tls: first record does not look like a TLS handshake';
  }
  if (code === 'ERR_SSL_PEER_DID_NOT_RETURN_A_CERTIFICATE' || /peer did not return a certificate/i.test(text)) {
    return "tls: client didn't provide a certificate";
  }
  if (code === 'ERR_SSL_SSLV3_ALERT_BAD_CERTIFICATE' || /alert bad certificate/i.test(text)) return 'remote error: tls: bad certificate';
  if (/alert unknown ca/i.test(text)) return 'remote error: tls: unknown certificate authority';
  if (/certificate verify failed|unable to get local issuer|self.signed certificate/i.test(text)) {
    return `tls: failed to verify certificate: x509: certificate signed by unknown authority (${text})`;
  }
  if (/certificate has expired|certificate expired/i.test(text)) {
    return `tls: failed to verify certificate: x509: certificate has expired or is not yet valid (${text})`;
  }
  if (code === 'ERR_TLS_HANDSHAKE_TIMEOUT') return 'tls: handshake timed out';
  if (code === 'ECONNRESET' || /socket hang up|ECONNRESET/.test(text)) return 'EOF';
  return text;
}

/** The warning etcd logs for every failed handshake (embed/config_logging.go). */
export function logRejected(log: RejectLogger, socket: tls.TLSSocket | undefined, err: Error): void {
  const remote = socket?.remoteAddress === undefined ? '' : `${socket.remoteAddress.includes(':') ? `[${socket.remoteAddress}]` : socket.remoteAddress}:${socket.remotePort}`;
  const fields: Record<string, unknown> = {
    'remote-addr': remote,
    'server-name': (socket as (tls.TLSSocket & { servername?: string | false }) | undefined)?.servername || '',
  };
  let cert: tls.PeerCertificate | undefined;
  try {
    const c = socket?.getPeerCertificate();
    if (c !== undefined && c !== null && Object.keys(c).length > 0) cert = c;
  } catch {
    // No certificate to describe.
  }
  if (cert !== undefined) {
    const sans = (cert.subjectaltname ?? '').split(/,\s*/).filter((s) => s !== '');
    fields['ip-addresses'] = sans.filter((s) => s.startsWith('IP Address:')).map((s) => s.slice('IP Address:'.length));
    fields['dns-names'] = sans.filter((s) => s.startsWith('DNS:')).map((s) => s.slice('DNS:'.length));
  }
  fields['error'] = goTlsError(err as Error & { code?: string });
  log.warn('rejected connection', fields);
}

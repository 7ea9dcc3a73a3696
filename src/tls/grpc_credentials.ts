// gRPC credentials from loaded TLS material, for the peer transport (src/transport takes
// `credentials(secure)` callbacks for its server and its channels).
import tls from 'node:tls';
import * as grpc from '@grpc/grpc-js';
import type { TlsMaterial } from './material';

/** Server side of --listen-peer-urls https://: verifies peers against the trusted CA with --peer-client-cert-auth. */
export function serverCredentials(m: TlsMaterial): grpc.ServerCredentials {
  return grpc.ServerCredentials.createSsl(m.ca ?? null, [{ private_key: m.key, cert_chain: m.cert }], m.clientCertAuth);
}

/**
 * Client side towards https:// peers: presents our certificate (etcd uses the peer cert as the
 * client cert) and trusts the peer CA, with --cipher-suites and --tls-min/max-version as etcd's
 * dialer applies them. Self-signed (--peer-auto-tls) peers cannot be verified; etcd skips
 * verification for them, and so do we.
 */
export function channelCredentials(m: TlsMaterial, clientCert?: { cert: Buffer; key: Buffer }): grpc.ChannelCredentials {
  const verify: grpc.VerifyOptions = m.selfSigned ? { rejectUnauthorized: false, checkServerIdentity: () => undefined } : {};
  const context = tls.createSecureContext({
    // undefined: Node's bundled roots, as createSsl(null) and Go's system pool.
    ...(m.ca !== undefined ? { ca: m.ca } : {}),
    key: clientCert?.key ?? m.key,
    cert: clientCert?.cert ?? m.cert,
    minVersion: m.minVersion,
    maxVersion: m.maxVersion,
    ...(m.ciphers !== '' ? { ciphers: m.ciphers } : {}),
  });
  return grpc.credentials.createFromSecureContext(context, verify);
}

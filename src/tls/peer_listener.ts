// TLS on the peer URLs, terminated here rather than by grpc-js: grpc-js's server credentials have
// no hook after the handshake, so --peer-cert-allowed-cn, --peer-cert-allowed-hostname and
// --peer-crl-file could not be applied, nor --cipher-suites and --tls-min/max-version. Each
// verified connection is handed to the caller (the peer server, src/transport/serve.ts).
import net from 'node:net';
import tls from 'node:tls';
import { listenOnTarget } from '../runtime/listen_target';
import { serverTlsOptions, type TlsMaterial } from './material';
import { admitVerifiedPeer, logRejected, type RejectLogger } from './verify';

/** As the client listener's: a silent or half-open handshake is given up after this long. */
export const PEER_TLS_HANDSHAKE_TIMEOUT_MS = 10_000;

export interface PeerTlsListener {
  /** The bound port (0 for a unix socket). */
  port: number;
  close(): void;
}

/**
 * Listens on `target` ("host:port" or "unix:/path", as src/transport names peer targets) with `m`,
 * passes every connection whose certificate passes etcd's post-handshake checks to `accept`, and
 * logs the others as "rejected connection".
 */
export function listenPeerTls(
  target: string,
  m: TlsMaterial,
  log: RejectLogger,
  accept: (socket: tls.TLSSocket) => void,
  handshakeTimeoutMs: number = PEER_TLS_HANDSHAKE_TIMEOUT_MS,
): Promise<PeerTlsListener> {
  const sockets = new Set<net.Socket>();
  const srv = tls.createServer({ ...serverTlsOptions(m, ['h2']), handshakeTimeout: handshakeTimeoutMs });
  srv.on('connection', (raw: net.Socket) => {
    sockets.add(raw);
    raw.on('close', () => sockets.delete(raw));
  });
  srv.on('secureConnection', (s: tls.TLSSocket) => {
    if (admitVerifiedPeer(m, s, log)) accept(s);
  });
  srv.on('tlsClientError', (err: Error, s: tls.TLSSocket) => {
    logRejected(log, s, err);
    s.destroy();
  });
  const close = (): void => {
    srv.close();
    for (const s of sockets) s.destroy();
  };
  return listenOnTarget(srv, target).then((port) => ({ port, close }));
}

// The peer service on the --listen-peer-urls. Each connection is served by our own HTTP/2
// connection (src/h2, as on the client URLs) under grpc-js's call dispatch: the Raft stream, which
// carries every append and every answer between members, is read straight from the frames
// (raw_stream.ts), and the other peer calls (snapshot upload, probes) go to grpc-js's call
// handling. Node's http2 (nghttp2 and its JS stream layer) cost about as much CPU per received
// Raft message as our own code on it. ETCDTS_PEER_HTTP2=node serves the peer URLs with grpc-js's
// own http2 server instead (to compare, or as a way back).
import net from 'node:net';
import type { Duplex } from 'node:stream';
import * as grpc from '@grpc/grpc-js';
import { grpcStreamEntry } from '../grpcjs/stream_hook';
import { H2Connection, type CutOffReason } from '../h2/connection';
import { listenOnTarget } from '../runtime/listen_target';
import type { PeerTransport } from './transport';
import { peerTarget } from './urls';

export interface PeerServer {
  server: grpc.Server;
  /** Bound port per URL, in order (useful with port 0). */
  ports: number[];
  shutdown(): Promise<void>;
}

export interface PeerServeOptions {
  credentials?(secure: boolean): grpc.ServerCredentials;
  /**
   * Listens on a secure target (https://, unixs://) itself and hands each verified connection to
   * `accept` (TLS ended, etcd's certificate checks made): the peer service is then served on it in
   * plain HTTP/2. Without it, grpc-js's own TLS (`credentials(true)`) serves those URLs.
   */
  listenSecure?(target: string, accept: (socket: Duplex) => void): Promise<{ port: number; close(): void }>;
  /** Connection-level HTTP/2 protocol problems of peers, for a debug log. */
  onProtocolError?(message: string): void;
  /** A connection was cut off for going over one of its budgets (for a metric). */
  onCutOff?(reason: CutOffReason): void;
}

/** Which HTTP/2 serves the peer URLs: ours (src/h2, the default) or grpc-js's on Node's http2. */
export function peerHttp2Impl(env: NodeJS.ProcessEnv = process.env): 'lean' | 'node' {
  return env.ETCDTS_PEER_HTTP2 === 'node' ? 'node' : 'lean';
}

export async function servePeerUrls(urls: readonly string[], transport: PeerTransport, opts: PeerServeOptions = {}): Promise<PeerServer> {
  const server = new grpc.Server();
  transport.register(server);
  const lean = peerHttp2Impl() === 'lean';
  const entry = grpcStreamEntry(server);
  const sockets = new Set<Duplex>();
  let closing = false;
  const serveConnection = (socket: Duplex): void => {
    if (closing) {
      socket.destroy();
      return;
    }
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    // The connection listens for the socket's errors and tears itself down on one.
    new H2Connection(socket, { onStream: entry, onProtocolError: opts.onProtocolError, onCutOff: opts.onCutOff });
  };
  const ports: number[] = [];
  const closers: (() => void)[] = [];
  let injector: ReturnType<grpc.Server['createConnectionInjector']> | undefined;
  try {
    for (const u of urls) {
      const t = peerTarget(u);
      if (t.secure && opts.listenSecure) {
        let accept: (socket: Duplex) => void = serveConnection;
        if (!lean) {
          injector ??= server.createConnectionInjector(grpc.ServerCredentials.createInsecure());
          const inject = injector;
          accept = (socket) => inject.injectConnection(socket);
        }
        const l = await opts.listenSecure(t.target, accept);
        closers.push(l.close);
        ports.push(l.port);
        continue;
      }
      if (t.secure && opts.credentials === undefined) throw new Error(`peer URL ${u} needs TLS server credentials`);
      if (lean && !t.secure) {
        const srv = net.createServer(serveConnection);
        ports.push(await listenOnTarget(srv, t.target));
        closers.push(() => srv.close());
        continue;
      }
      const creds = opts.credentials?.(t.secure) ?? grpc.ServerCredentials.createInsecure();
      ports.push(
        await new Promise<number>((resolve, reject) =>
          server.bindAsync(t.target, creds, (err, port) => (err ? reject(err) : resolve(port))),
        ),
      );
    }
  } catch (e) {
    for (const close of closers) close();
    for (const s of sockets) s.destroy();
    server.forceShutdown();
    throw e;
  }
  return {
    server,
    ports,
    shutdown: () =>
      new Promise<void>((resolve) => {
        // Peers reconnect on their own; a graceful drain would only delay the stop.
        closing = true;
        for (const close of closers) close();
        for (const s of sockets) s.destroy();
        server.forceShutdown();
        resolve();
      }),
  };
}

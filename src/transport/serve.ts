// A grpc.Server on the --listen-peer-urls carrying only the peer service, for callers that do
// not already have one there.
import type { Duplex } from 'node:stream';
import * as grpc from '@grpc/grpc-js';
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
}

export async function servePeerUrls(urls: readonly string[], transport: PeerTransport, opts: PeerServeOptions = {}): Promise<PeerServer> {
  const server = new grpc.Server();
  transport.register(server);
  const ports: number[] = [];
  const closers: (() => void)[] = [];
  let injector: ReturnType<grpc.Server['createConnectionInjector']> | undefined;
  try {
    for (const u of urls) {
      const t = peerTarget(u);
      if (t.secure && opts.listenSecure) {
        injector ??= server.createConnectionInjector(grpc.ServerCredentials.createInsecure());
        const inject = injector;
        const l = await opts.listenSecure(t.target, (socket) => inject.injectConnection(socket));
        closers.push(l.close);
        ports.push(l.port);
        continue;
      }
      const creds = opts.credentials?.(t.secure) ?? grpc.ServerCredentials.createInsecure();
      if (t.secure && opts.credentials === undefined) throw new Error(`peer URL ${u} needs TLS server credentials`);
      ports.push(
        await new Promise<number>((resolve, reject) =>
          server.bindAsync(t.target, creds, (err, port) => (err ? reject(err) : resolve(port))),
        ),
      );
    }
  } catch (e) {
    for (const close of closers) close();
    server.forceShutdown();
    throw e;
  }
  return {
    server,
    ports,
    shutdown: () =>
      new Promise<void>((resolve) => {
        // Peers reconnect on their own; a graceful drain would only delay the stop.
        for (const close of closers) close();
        server.forceShutdown();
        resolve();
      }),
  };
}

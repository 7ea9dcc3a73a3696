// A grpc.Server on the --listen-peer-urls carrying only the peer service, for callers that do
// not already have one there.
import * as grpc from '@grpc/grpc-js';
import type { PeerTransport } from './transport';
import { peerTarget } from './urls';

export interface PeerServer {
  server: grpc.Server;
  /** Bound port per URL, in order (useful with port 0). */
  ports: number[];
  shutdown(): Promise<void>;
}

export async function servePeerUrls(
  urls: readonly string[],
  transport: PeerTransport,
  opts: { credentials?(secure: boolean): grpc.ServerCredentials } = {},
): Promise<PeerServer> {
  const server = new grpc.Server();
  transport.register(server);
  const ports: number[] = [];
  try {
    for (const u of urls) {
      const t = peerTarget(u);
      const creds = opts.credentials?.(t.secure) ?? grpc.ServerCredentials.createInsecure();
      if (t.secure && opts.credentials === undefined) throw new Error(`peer URL ${u} needs TLS server credentials`);
      ports.push(
        await new Promise<number>((resolve, reject) =>
          server.bindAsync(t.target, creds, (err, port) => (err ? reject(err) : resolve(port))),
        ),
      );
    }
  } catch (e) {
    server.forceShutdown();
    throw e;
  }
  return {
    server,
    ports,
    shutdown: () =>
      new Promise<void>((resolve) => {
        // Peers reconnect on their own; a graceful drain would only delay the stop.
        server.forceShutdown();
        resolve();
      }),
  };
}

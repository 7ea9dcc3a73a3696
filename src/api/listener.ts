// One client port for gRPC (HTTP/2) and HTTP/1.1, as etcd serves both on its client URLs:
// each accepted connection is routed by its first bytes.
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import * as grpc from '@grpc/grpc-js';
import { setLocalTarget } from './local_target';
import type { ApiLogger } from './types';

/** The HTTP/2 client connection preface (RFC 9113 section 3.4). */
const H2_PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

export interface ListenedUrl {
  url: string;
  /** The bound TCP port (the ephemeral one for port 0); 0 for unix sockets. */
  port: number;
}

export interface ClientListeners {
  addresses: ListenedUrl[];
  /** Stops accepting and drops every open connection; resolves when the sockets are closed. */
  close(): Promise<void>;
}

export type HttpHandler = (req: http.IncomingMessage, res: http.ServerResponse) => void;

type Target = { kind: 'tcp'; host: string; port: number; url: string } | { kind: 'unix'; path: string; url: string };

function parseClientUrl(raw: string): Target {
  const m = /^([A-Za-z][A-Za-z0-9+.-]*):\/\/(.*)$/.exec(raw.trim());
  if (!m) throw new Error(`invalid client URL ${JSON.stringify(raw)}`);
  const scheme = m[1]!.toLowerCase();
  const rest = m[2]!;
  if (scheme === 'https' || scheme === 'unixs') {
    throw new Error(`client URL ${raw}: TLS (${scheme}://) is not yet supported`);
  }
  if (scheme === 'unix') {
    if (rest === '') throw new Error(`client URL ${raw}: empty unix socket path`);
    return { kind: 'unix', path: rest, url: raw };
  }
  if (scheme !== 'http') throw new Error(`client URL ${raw}: scheme must be http, https, unix or unixs`);
  const hostport = rest.replace(/\/+$/, '');
  const hm = /^(?:\[([^\]]+)\]|([^:/]*)):(\d+)$/.exec(hostport);
  if (!hm) throw new Error(`client URL ${raw}: address does not have the form "host:port"`);
  const port = Number(hm[3]);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`client URL ${raw}: bad port`);
  return { kind: 'tcp', host: hm[1] ?? hm[2] ?? '', port, url: raw };
}

export async function listenClientUrls(
  urls: string[],
  grpcServer: grpc.Server,
  httpHandler: HttpHandler,
  log: ApiLogger,
): Promise<ClientListeners> {
  const targets = urls.map(parseClientUrl);
  const injector = grpcServer.createConnectionInjector(grpc.ServerCredentials.createInsecure());
  const httpServer = http.createServer(httpHandler);
  const sockets = new Set<net.Socket>();
  const servers: net.Server[] = [];
  let closing = false;

  const route = (socket: net.Socket, unixPath: string | undefined): void => {
    sockets.add(socket);
    if (unixPath !== undefined) setLocalTarget(socket, `unix:${unixPath}`);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', (e) => log.debug('client connection error', { error: e.message }));
    let head: Buffer = Buffer.alloc(0);
    const onData = (chunk: Buffer): void => {
      head = head.length === 0 ? chunk : Buffer.concat([head, chunk]);
      const n = Math.min(head.length, H2_PREFACE.length);
      const h2 = head.subarray(0, n).equals(H2_PREFACE.subarray(0, n));
      // Wait for the whole preface before committing to HTTP/2 (it is only 24 bytes).
      if (h2 && head.length < H2_PREFACE.length) return;
      socket.off('data', onData);
      socket.pause();
      if (closing) {
        socket.destroy();
        return;
      }
      if (h2) {
        // http2 sessions pick up bytes already buffered on the socket.
        socket.unshift(head);
        injector.injectConnection(socket);
      } else {
        // Node's HTTP/1 parser reads the socket handle natively once attached, skipping
        // anything unshifted; its 'data' listener still parses what we hand it directly.
        httpServer.emit('connection', socket);
        socket.emit('data', head);
        socket.resume();
      }
    };
    socket.on('data', onData);
  };

  const listenOne = (t: Target): Promise<ListenedUrl> =>
    new Promise((resolve, reject) => {
      const srv = net.createServer((socket) => route(socket, t.kind === 'unix' ? t.path : undefined));
      const onError = (e: Error): void => reject(new Error(`listen on ${t.url} failed: ${e.message}`));
      srv.once('error', onError);
      const done = (): void => {
        srv.off('error', onError);
        srv.on('error', (e) => log.error('client listener error', { url: t.url, error: e.message }));
        servers.push(srv);
        if (t.kind === 'unix') {
          resolve({ url: t.url, port: 0 });
          return;
        }
        const addr = srv.address() as net.AddressInfo;
        const host = t.host.includes(':') ? `[${t.host}]` : t.host;
        resolve({ url: `http://${host}:${addr.port}`, port: addr.port });
      };
      if (t.kind === 'unix') {
        // As etcd: a stale socket file from an earlier run must not block the bind.
        try {
          if (fs.statSync(t.path).isSocket()) fs.unlinkSync(t.path);
        } catch {
          // Nothing there.
        }
        srv.listen(t.path, done);
      } else {
        srv.listen({ host: t.host === '' ? undefined : t.host, port: t.port }, done);
      }
    });

  const closeAll = async (): Promise<void> => {
    closing = true;
    await Promise.all(servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
  };

  const addresses: ListenedUrl[] = [];
  try {
    for (const t of targets) {
      const a = await listenOne(t);
      addresses.push(a);
      log.info('serving client traffic insecurely; this is strongly discouraged!', { address: a.url });
    }
  } catch (e) {
    for (const s of servers) s.close();
    injector.destroy();
    throw e;
  }

  return {
    addresses,
    close: async () => {
      const closed = closeAll();
      injector.destroy();
      httpServer.closeAllConnections();
      for (const s of sockets) s.destroy();
      await closed;
    },
  };
}

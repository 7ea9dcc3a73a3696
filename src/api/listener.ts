// One client port for gRPC (HTTP/2) and HTTP/1.1, as etcd serves both on its client URLs:
// each accepted connection is routed by its first bytes. On https:// and unixs:// URLs TLS is
// terminated first (client certificates verified with --client-cert-auth), then the ALPN
// protocol (or, without ALPN, the first bytes) picks gRPC or HTTP/1.1.
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import * as grpc from '@grpc/grpc-js';
import { grpcStreamEntry } from '../grpcjs/stream_hook';
import { H2Connection, type CutOffReason, type IncomingHeaders, type PingPolicy } from '../h2/connection';
import type { H2Stream } from '../h2/stream';
import { PREFACE } from '../h2/frames';
import { admitVerifiedPeer, logRejected, serverTlsOptions, type TlsMaterial } from '../tls';
import { createGatewayDir, GATEWAY_SOCKET_NAME, sweepStaleGatewayDirs } from './gateway_dir';
import { injectWithAuthorityFix } from './h2_authority';
import { isGrpcRequest, serveHttpOverH2 } from './h2_http';
import { setLocalTarget } from './local_target';
import type { ApiLogger } from './types';

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

export interface ClientListenOptions {
  /** Client TLS (--cert-file, ... or --auto-tls); required for https:// and unixs:// URLs. */
  tls?: TlsMaterial;
  /** Bound on a TLS handshake; a client that never completes one is dropped after it. */
  tlsHandshakeTimeoutMs?: number;
  /** gRPC connection settings (--max-concurrent-streams, --grpc-keepalive-*). */
  http2?: ClientHttp2Options;
  /** An HTTP/2 connection was cut off for going over one of its budgets (for a metric). */
  onHttp2CutOff?: (reason: CutOffReason) => void;
}

export interface ClientHttp2Options {
  maxConcurrentStreams?: number;
  keepaliveIntervalMs?: number;
  keepaliveTimeoutMs?: number;
  /**
   * --grpc-keepalive-min-time: a client that PINGs more often (or at all with no stream open) is
   * sent away with GOAWAY ENHANCE_YOUR_CALM "too_many_pings" after MAX_PING_STRIKES, as etcd's
   * grpc-go server does. 0 is grpc-go's default for it, 5 minutes.
   */
  keepaliveMinTimeMs?: number;
}

/** grpc-go's defaultKeepalivePolicyMinTime, what etcd's server gets when --grpc-keepalive-min-time is 0. */
const DEFAULT_KEEPALIVE_MIN_TIME_MS = 5 * 60 * 1000;

function pingPolicyOf(o: ClientHttp2Options | undefined): PingPolicy | undefined {
  if (o?.keepaliveMinTimeMs === undefined) return undefined;
  return { minTimeMs: o.keepaliveMinTimeMs > 0 ? o.keepaliveMinTimeMs : DEFAULT_KEEPALIVE_MIN_TIME_MS, permitWithoutStream: false };
}

/**
 * Which HTTP/2 implementation serves gRPC on client URLs: ours (src/h2, the default) or Node's
 * http2 module under grpc-js (ETCDTS_CLIENT_HTTP2=node), kept to compare and as a way back.
 */
export function clientHttp2Impl(env: NodeJS.ProcessEnv = process.env): 'lean' | 'node' {
  return env.ETCDTS_CLIENT_HTTP2 === 'node' ? 'node' : 'lean';
}

/** Long enough for a loaded machine, short enough that silent connections do not pile up. */
export const DEFAULT_TLS_HANDSHAKE_TIMEOUT_MS = 10_000;

type Target = { kind: 'tcp'; host: string; port: number; url: string; secure: boolean } | { kind: 'unix'; path: string; url: string; secure: boolean };

function parseClientUrl(raw: string): Target {
  const m = /^([A-Za-z][A-Za-z0-9+.-]*):\/\/(.*)$/.exec(raw.trim());
  if (!m) throw new Error(`invalid client URL ${JSON.stringify(raw)}`);
  const scheme = m[1]!.toLowerCase();
  const rest = m[2]!;
  const secure = scheme === 'https' || scheme === 'unixs';
  if (scheme === 'unix' || scheme === 'unixs') {
    if (rest === '') throw new Error(`client URL ${raw}: empty unix socket path`);
    return { kind: 'unix', path: rest, url: raw, secure };
  }
  if (scheme !== 'http' && scheme !== 'https') throw new Error(`client URL ${raw}: scheme must be http, https, unix or unixs`);
  const hostport = rest.replace(/\/+$/, '');
  const hm = /^(?:\[([^\]]+)\]|([^:/]*)):(\d+)$/.exec(hostport);
  if (!hm) throw new Error(`client URL ${raw}: address does not have the form "host:port"`);
  const port = Number(hm[3]);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`client URL ${raw}: bad port`);
  return { kind: 'tcp', host: hm[1] ?? hm[2] ?? '', port, url: raw, secure };
}

export async function listenClientUrls(
  urls: string[],
  grpcServer: grpc.Server,
  httpHandler: HttpHandler,
  log: ApiLogger,
  opts: ClientListenOptions = {},
): Promise<ClientListeners> {
  const targets = urls.map(parseClientUrl);
  const material = opts.tls;
  for (const t of targets) {
    if (t.secure && material === undefined) {
      throw new Error(`TLS key/cert (--cert-file, --key-file) must be provided for client url ${t.url} with HTTPS scheme`);
    }
    if (!t.secure && material !== undefined && !material.selfSigned) {
      log.warn('scheme is HTTP while key and cert files are present; ignoring key and cert files', { 'client-url': t.url });
      if (material.clientCertAuth) {
        log.warn('scheme is HTTP while --client-cert-auth is enabled; ignoring client cert auth for this URL', { 'client-url': t.url });
      }
    }
  }
  const injector = grpcServer.createConnectionInjector(grpc.ServerCredentials.createInsecure());
  const impl = clientHttp2Impl();
  const streamEntry = grpcStreamEntry(grpcServer);
  // As etcd's grpcHandlerFunc: gRPC by content-type, anything else (curl negotiating h2 on an
  // https:// URL for /health, /metrics or the JSON gateway) to the HTTP handler. One function for
  // all connections: a closure per connection made the second connection's first request
  // deoptimize the header path ("wrong call target").
  const onStream = (stream: H2Stream, headers: IncomingHeaders): void =>
    isGrpcRequest(headers) ? streamEntry(stream, headers) : serveHttpOverH2(stream, headers, httpHandler);
  const serveHttp2 = (socket: net.Socket, head: Buffer): void => {
    if (impl === 'node') {
      // Strips a scheme from the first request's :authority (Go clients dialled with a URL
      // send one; nghttp2 rejects it), then hands the socket over with the sniffed bytes.
      injectWithAuthorityFix(socket, head, (c) => injector.injectConnection(c));
      return;
    }
    const conn = new H2Connection(socket, {
      onStream,
      maxConcurrentStreams: opts.http2?.maxConcurrentStreams,
      keepaliveIntervalMs: opts.http2?.keepaliveIntervalMs,
      keepaliveTimeoutMs: opts.http2?.keepaliveTimeoutMs,
      pingPolicy: pingPolicyOf(opts.http2),
      onProtocolError: (message) => log.debug('client HTTP/2 protocol error', { error: message }),
      onCutOff: opts.onHttp2CutOff,
    });
    conn.feed(head);
    socket.resume();
  };
  const httpServer = http.createServer(httpHandler);
  const sockets = new Set<net.Socket>();
  const servers: net.Server[] = [];
  let closing = false;
  // The JSON gateway dials its own listener's gRPC target in plain text; connections that came
  // in over TLS point it at a private unix socket served like a plain client URL instead.
  let gatewayDir: string | undefined;
  let gatewayTarget: string | undefined;

  const route = (socket: net.Socket, unixPath: string | undefined): void => {
    sockets.add(socket);
    if (unixPath !== undefined) setLocalTarget(socket, `unix:${unixPath}`);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', (e) => log.debug('client connection error', { error: e.message }));
    let head: Buffer = Buffer.alloc(0);
    const onData = (chunk: Buffer): void => {
      head = head.length === 0 ? chunk : Buffer.concat([head, chunk]);
      const n = Math.min(head.length, PREFACE.length);
      const h2 = head.subarray(0, n).equals(PREFACE.subarray(0, n));
      // Wait for the whole preface before committing to HTTP/2 (it is only 24 bytes).
      if (h2 && head.length < PREFACE.length) return;
      socket.off('data', onData);
      socket.pause();
      if (closing) {
        socket.destroy();
        return;
      }
      if (h2) {
        serveHttp2(socket, head);
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

  const routeSecure = (socket: tls.TLSSocket, m: TlsMaterial, unixPath: string | undefined): void => {
    if (!admitVerifiedPeer(m, socket, log)) return;
    if (closing) {
      socket.destroy();
      return;
    }
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', (e) => log.debug('client connection error', { error: e.message }));
    if (gatewayTarget !== undefined) setLocalTarget(socket, gatewayTarget);
    else if (unixPath !== undefined) setLocalTarget(socket, `unix:${unixPath}`);
    if (socket.alpnProtocol === 'h2') {
      serveHttp2(socket, Buffer.alloc(0));
    } else if (socket.alpnProtocol === 'http/1.1') {
      httpServer.emit('connection', socket);
    } else {
      // No ALPN: gRPC clients with prior knowledge still send the HTTP/2 preface.
      route(socket, undefined);
    }
  };

  const createSecureServer = (t: Target, m: TlsMaterial): net.Server => {
    const srv = tls.createServer({
      ...serverTlsOptions(m, ['h2', 'http/1.1']),
      handshakeTimeout: opts.tlsHandshakeTimeoutMs ?? DEFAULT_TLS_HANDSHAKE_TIMEOUT_MS,
    });
    srv.on('connection', (raw: net.Socket) => {
      sockets.add(raw);
      raw.on('close', () => sockets.delete(raw));
    });
    srv.on('secureConnection', (s: tls.TLSSocket) => routeSecure(s, m, t.kind === 'unix' ? t.path : undefined));
    // Bad or missing client certificates, plain-text and silent clients end here; say why,
    // once, as etcd does.
    srv.on('tlsClientError', (err: Error, s: tls.TLSSocket) => {
      logRejected(log, s, err);
      // A handshake timeout leaves the socket open; nothing more can come of it.
      s.destroy();
    });
    return srv;
  };

  const listenGateway = async (): Promise<void> => {
    const swept = await sweepStaleGatewayDirs(os.tmpdir());
    if (swept.length > 0) log.debug('removed gateway socket directories of stopped servers', { count: swept.length });
    gatewayDir = createGatewayDir(os.tmpdir());
    const sock = path.join(gatewayDir, GATEWAY_SOCKET_NAME);
    const srv = net.createServer((socket) => route(socket, sock));
    await new Promise<void>((resolve, reject) => {
      srv.once('error', reject);
      srv.listen(sock, () => {
        srv.off('error', reject);
        resolve();
      });
    });
    servers.push(srv);
    gatewayTarget = `unix:${sock}`;
  };

  const listenOne = (t: Target): Promise<ListenedUrl> =>
    new Promise((resolve, reject) => {
      const srv = t.secure
        ? createSecureServer(t, material!)
        : net.createServer((socket) => route(socket, t.kind === 'unix' ? t.path : undefined));
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
        resolve({ url: `${t.secure ? 'https' : 'http'}://${host}:${addr.port}`, port: addr.port });
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
    if (gatewayDir !== undefined) fs.rmSync(gatewayDir, { recursive: true, force: true });
  };

  const addresses: ListenedUrl[] = [];
  try {
    if (targets.some((t) => t.secure)) await listenGateway();
    for (const t of targets) {
      const a = await listenOne(t);
      addresses.push(a);
      if (t.secure) log.info('serving client traffic securely', { address: a.url });
      else log.info('serving client traffic insecurely; this is strongly discouraged!', { address: a.url });
    }
  } catch (e) {
    for (const s of servers) s.close();
    if (gatewayDir !== undefined) fs.rmSync(gatewayDir, { recursive: true, force: true });
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

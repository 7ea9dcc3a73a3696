// What the direct HTTP/2 paths (fast_unary.ts, fast_stream.ts) share: the grpc-js internals
// they hook, the response headers and trailers grpc-js sends, its status mapping of handler
// errors, the per-call accessors handlers use, and the one place their routes are installed.
import assert from 'node:assert';
import type * as http2 from 'node:http2';
import * as tls from 'node:tls';
import * as grpc from '@grpc/grpc-js';
import { hookServerStreams } from '../grpcjs/stream_hook';
import { ERROR_HEADERS } from '../grpcjs/wire';
import { receivedTooLargeText } from './grpc_go_texts';

export { COMPRESSED_IDENTITY_TEXT, ERROR_HEADERS, FRAME_HEADER_BYTES, RESPONSE_HEADERS, frameMessage, frameMessages } from '../grpcjs/wire';

/** The handler types grpc-js registers ("unary", "bidi", ...), as in its `handlers` map. */
export type HandlerType = 'unary' | 'clientStream' | 'serverStream' | 'bidi';

/** The parts of grpc-js's registered handler record we use (server.ts `handlers` map). */
export interface RegisteredHandler {
  type: string;
  path: string;
  func: (...args: never[]) => void;
  serialize: (value: unknown) => Buffer;
  deserialize: (bytes: Buffer) => unknown;
}

/** What the metrics layer tracks for one call (see grpc_metrics.ts). */
export interface CallTracker {
  /** The handler began (the metrics wrapper of each handler calls it). */
  begin(): void;
  received(): void;
  sent(): void;
  finish(code: number): void;
  cancelled(deadlinePassed: boolean): void;
}

/** Starts metrics for a call answered on a direct path; the call object carries it under FAST_CALL_TRACKER. */
export type TrackCall = (path: string) => CallTracker | undefined;

/**
 * Where a direct path's call object holds its tracker, for the handler's metrics wrapper
 * (grpc-js calls carry theirs on their Metadata instead). Not on a Metadata here: a direct unary
 * call builds its Metadata only if a handler reads it.
 */
export const FAST_CALL_TRACKER: unique symbol = Symbol('fastCallTracker');

export const OK_TRAILERS: http2.OutgoingHttpHeaders = Object.freeze({ 'grpc-status': grpc.status.OK, 'grpc-message': 'OK' });

export interface GrpcStatus {
  code: number;
  details: string;
  metadata: grpc.Metadata | null;
}

/** grpc-js's serverErrorToStatus, so clients see the same code and text either way. */
export function errorStatus(err: unknown): GrpcStatus {
  const e = (err ?? {}) as { code?: unknown; details?: unknown; message?: unknown; metadata?: unknown };
  let code = grpc.status.UNKNOWN;
  let details = typeof e.message === 'string' ? e.message : 'Unknown Error';
  if (typeof e.code === 'number' && Number.isInteger(e.code)) {
    code = e.code;
    if (typeof e.details === 'string') details = e.details;
  }
  const metadata = e.metadata instanceof grpc.Metadata ? e.metadata : null;
  return { code, details, metadata };
}

/** grpc-go's text (etcd's clients see it) when a message's frame header announces more than the receive limit. */
export function tooLargeText(size: number, maxBytes: number): string {
  return receivedTooLargeText(size, maxBytes);
}

/** The headers of a trailers-only response (an error before any message). */
export function trailersOnly(status: GrpcStatus): http2.OutgoingHttpHeaders {
  const t: http2.OutgoingHttpHeaders = { 'grpc-status': status.code, 'grpc-message': encodeURI(status.details), ...ERROR_HEADERS };
  return status.metadata ? { ...t, ...status.metadata.toHttp2Headers() } : t;
}

/** The trailers after messages. */
export function statusTrailers(status: GrpcStatus): http2.OutgoingHttpHeaders {
  const t: http2.OutgoingHttpHeaders =
    status.code === grpc.status.OK && status.details === 'OK'
      ? OK_TRAILERS
      : { 'grpc-status': status.code, 'grpc-message': encodeURI(status.details) };
  return status.metadata ? { ...t, ...status.metadata.toHttp2Headers() } : t;
}

/** grpc-js's getPeer(). */
export function peerOf(stream: http2.ServerHttp2Stream): string {
  const s = stream.session?.socket;
  if (!s?.remoteAddress) return 'unknown';
  return s.remotePort ? `${s.remoteAddress}:${s.remotePort}` : s.remoteAddress;
}

/** grpc-js's getHost(): the :authority the client addressed. */
export function hostOf(headers: http2.IncomingHttpHeaders): string {
  return headers[':authority'] ?? headers.host ?? 'unknown';
}

/** grpc-js's getAuthContext(): the verified TLS client certificate, which etcd's CN-as-username auth reads. */
export function authContextOf(stream: http2.ServerHttp2Stream): { transportSecurityType?: string; sslPeerCertificate?: tls.PeerCertificate } {
  const socket = stream.session?.socket;
  if (!(socket instanceof tls.TLSSocket) || !socket.authorized) return {};
  const cert = socket.getPeerCertificate();
  return { transportSecurityType: 'ssl', sslPeerCertificate: cert.raw ? cert : undefined };
}

/** Answers one HTTP/2 stream of a registered method. */
export type FastServe = (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders, handler: RegisteredHandler) => void;

export interface FastRoute {
  /** Full path ("/etcdserverpb.KV/Range"). */
  path: string;
  /** The grpc-js handler type the method must be registered with. */
  type: HandlerType;
  /** False sends this call to grpc-js after all (e.g. it needs a feature only grpc-js has). */
  accepts?: (headers: http2.IncomingHttpHeaders) => boolean;
  serve: FastServe;
}

/**
 * Route the given methods around grpc-js's call machinery, all in one hook (src/grpcjs). Must
 * run before the server gets its connections (listener.ts creates the connection injector
 * afterwards). Anything unusual (compressed requests, a wrong content type, other methods)
 * still goes to grpc-js.
 */
export function installFastRoutes(server: grpc.Server, routes: readonly FastRoute[]): void {
  const handlers = (server as unknown as { handlers?: unknown }).handlers;
  assert(handlers instanceof Map, 'grpc-js internals changed: fast paths unavailable');
  const fast = new Map<string, { handler: RegisteredHandler; route: FastRoute }>();
  for (const r of routes) {
    const h = (handlers as Map<string, RegisteredHandler>).get(r.path);
    assert(h && h.type === r.type, `${r.path} is not a registered ${r.type} method`);
    assert(!fast.has(r.path), `${r.path} routed twice`);
    fast.set(r.path, { handler: h, route: r });
  }
  hookServerStreams(server, (stream, headers) => {
    const f = fast.get(headers[':path'] ?? '');
    if (f === undefined || (f.route.accepts !== undefined && !f.route.accepts(headers))) return false;
    f.route.serve(stream, headers, f.handler);
    return true;
  });
}

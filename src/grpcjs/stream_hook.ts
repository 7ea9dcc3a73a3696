// The one place we reach into grpc-js's server internals: HTTP/2 streams of plain gRPC calls can
// be taken before grpc-js's per-call machinery sees them (the client fast paths in src/api, the
// peers' Raft stream in src/transport). grpc-js dispatches each new stream through
// `_streamHandler` (or `_channelzHandler` when channelz is on); both are wrapped, so the hook
// holds either way. Checked when installed, so a grpc-js upgrade that moves them fails loudly.
import assert from 'node:assert';
import type * as http2 from 'node:http2';
import type * as grpc from '@grpc/grpc-js';

type StreamHandler = (extraInterceptors: unknown, stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders) => void;

interface GrpcJsServerInternals {
  _streamHandler: StreamHandler;
  _channelzHandler: StreamHandler;
  /** Idle-connection accounting (grpc.max_connection_idle_ms); absent in older versions. */
  onStreamOpened?: (stream: http2.ServerHttp2Stream) => void;
}

/** One listener function for every stream (a closure and a once-wrapper per stream showed in heap profiles). */
function ignoreError(): void {}

/** Uncompressed gRPC: anything else (a client compressing, another content type) stays with grpc-js. */
export function isPlainGrpc(headers: http2.IncomingHttpHeaders): boolean {
  const ct = headers['content-type'];
  const enc = headers['grpc-encoding'];
  return typeof ct === 'string' && ct.startsWith('application/grpc') && (enc === undefined || enc === 'identity');
}

/**
 * Offers every plain gRPC stream of `server` to `take` first; a stream it declines (returns
 * false) goes to grpc-js as usual. Must run before the server binds (grpc-js binds its handlers
 * to each listener then). Hooks installed one after another are consulted newest first.
 */
export function hookServerStreams(
  server: grpc.Server,
  take: (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders) => boolean,
): void {
  const internals = server as unknown as GrpcJsServerInternals;
  assert(
    typeof internals._streamHandler === 'function' && typeof internals._channelzHandler === 'function',
    'grpc-js internals changed: direct stream paths unavailable',
  );
  const wrap = (original: StreamHandler): StreamHandler =>
    function (this: GrpcJsServerInternals, extra, stream, headers) {
      if (isPlainGrpc(headers)) {
        // As grpc-js: an 'error' without a listener would throw; 'close' tells the outcome.
        stream.on('error', ignoreError);
        if (take(stream, headers)) {
          this.onStreamOpened?.(stream);
          return;
        }
      }
      original.call(this, extra, stream, headers);
    };
  internals._streamHandler = wrap(internals._streamHandler);
  internals._channelzHandler = wrap(internals._channelzHandler);
}

/** The part of Node's ServerHttp2Stream grpc-js's server call and our direct paths use (src/h2 provides it). */
export type ServerStreamLike = object;

/**
 * The server's entry for one new HTTP/2 stream (hooks above included), for connections that
 * grpc-js's own http2 server does not own: the client port's own HTTP/2 connections (src/h2)
 * hand their streams here. The stream need only have the ServerHttp2Stream surface grpc-js's
 * server call uses; `session` is never one of grpc-js's own, so its per-session bookkeeping
 * (channelz, idle timeouts) leaves it alone.
 */
export function grpcStreamEntry(server: grpc.Server): (stream: ServerStreamLike, headers: Record<string, string | string[] | undefined>) => void {
  const internals = server as unknown as GrpcJsServerInternals;
  assert(typeof internals._streamHandler === 'function', 'grpc-js internals changed: stream entry unavailable');
  // grpc-js binds its handler with the credentials' interceptors: none for ours.
  const noInterceptors: unknown[] = [];
  return (stream, headers) =>
    internals._streamHandler.call(internals, noInterceptors, stream as http2.ServerHttp2Stream, headers as http2.IncomingHttpHeaders);
}

type HeadersArg = Record<string, unknown>;
interface RespondingStream {
  respond(headers: HeadersArg, options?: unknown): void;
  sendTrailers(headers: HeadersArg): void;
}

/** What a status rewrite is told about the call. */
export interface CallOfStatus {
  /** Whether the server serves `service` at all (an unknown method vs an unknown service). */
  knownService(service: string): boolean;
  /** The called method's kind in grpc-js's words ('unary', 'serverStream', ...), undefined if unknown. */
  methodType: string | undefined;
}

type Rewrite = (details: string, call: CallOfStatus) => string;

/** The stream's rewrite and call, kept on the stream itself (no closure per call). */
const REWRITE = Symbol('etcdts.statusRewrite');
interface RewrittenStream extends RespondingStream {
  [REWRITE]?: { rewrite: Rewrite; call: CallOfStatus };
}

function rewrittenHeaders(stream: RewrittenStream, headers: HeadersArg): HeadersArg {
  const raw = headers['grpc-message'];
  const r = stream[REWRITE];
  if (typeof raw !== 'string' || r === undefined) return headers;
  let details: string;
  try {
    details = decodeURIComponent(raw);
  } catch {
    return headers;
  }
  const fixed = r.rewrite(details, r.call);
  return fixed === details ? headers : { ...headers, 'grpc-message': encodeURI(fixed) };
}

// Shared by every stream: the stream's own class does the work.
function respondRewritten(this: RewrittenStream, headers: HeadersArg, options?: unknown): void {
  (Object.getPrototypeOf(this) as RespondingStream).respond.call(this, rewrittenHeaders(this, headers), options);
}
function sendTrailersRewritten(this: RewrittenStream, headers: HeadersArg): void {
  (Object.getPrototypeOf(this) as RespondingStream).sendTrailers.call(this, rewrittenHeaders(this, headers));
}

/**
 * Rewrites the status text of every call grpc-js answers itself on `server` (one that no hook
 * took: its unknown-method answer, its size limits, its decode errors) with `rewrite`. Install
 * before any hookServerStreams, so that it wraps only grpc-js's own path.
 */
export function rewriteGrpcJsStatus(server: grpc.Server, rewrite: Rewrite): void {
  const internals = server as unknown as GrpcJsServerInternals & { handlers?: Map<string, { type?: string }> };
  assert(internals.handlers instanceof Map, 'grpc-js internals changed: handlers map unavailable');
  const handlers = internals.handlers;
  const knownService = (service: string): boolean => {
    for (const path of handlers.keys()) if (path.startsWith(`/${service}/`)) return true;
    return false;
  };
  const wrap = (original: StreamHandler): StreamHandler =>
    function (this: GrpcJsServerInternals, extra, stream, headers) {
      const s = stream as unknown as RewrittenStream;
      const path = headers[':path'];
      const methodType = typeof path === 'string' ? handlers.get(path)?.type : undefined;
      s[REWRITE] = { rewrite, call: { knownService, methodType } };
      s.respond = respondRewritten;
      s.sendTrailers = sendTrailersRewritten;
      original.call(this, extra, stream, headers);
    };
  internals._streamHandler = wrap(internals._streamHandler);
  internals._channelzHandler = wrap(internals._channelzHandler);
}

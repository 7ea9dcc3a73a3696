// A direct path for the hot unary methods (KV: Range, Put, DeleteRange, Txn).
//
// grpc-js runs every call through an interceptor chain, per-call objects, a message decoder
// stream, metadata conversions both ways and deadline timers: measured here at 40-50 µs of CPU
// per unary call, as much as all of a put's own work. For the methods that carry most of the
// load, this answers the HTTP/2 stream itself with the same registered handler, the same
// (de)serializers, the same metrics and the same response headers and trailers grpc-js sends;
// anything unusual (compressed messages, a wrong content type, other methods) goes to grpc-js.
import assert from 'node:assert';
import { EventEmitter } from 'node:events';
import type * as http2 from 'node:http2';
import * as tls from 'node:tls';
import * as grpc from '@grpc/grpc-js';

/** The parts of grpc-js's registered handler record we use (server.ts `handlers` map). */
interface RegisteredUnary {
  type: string;
  path: string;
  func: (call: FastUnaryCall, callback: (err: unknown, value?: unknown, trailer?: grpc.Metadata | null) => void) => void;
  serialize: (value: unknown) => Buffer;
  deserialize: (bytes: Buffer) => unknown;
}

type StreamHandler = (extraInterceptors: unknown, stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders) => void;

/** grpc-js internals this relies on; checked at install time so an upgrade fails loudly. */
interface GrpcJsServerInternals {
  _streamHandler: StreamHandler;
  channelzEnabled: boolean;
  handlers: Map<string, RegisteredUnary>;
}

/** What the metrics layer tracks for one call (see grpc_metrics.ts). */
export interface CallTracker {
  received(): void;
  sent(): void;
  finish(code: number): void;
  cancelled(deadlinePassed: boolean): void;
}

export interface FastUnaryOptions {
  /** Full paths ("/etcdserverpb.KV/Range") to answer directly; they must be registered unary methods. */
  paths: readonly string[];
  /** grpc.max_receive_message_length of the server. */
  maxReceiveBytes: number;
  /** Starts metrics for a call and links them to its metadata (as the grpc-js interceptor does). */
  track?: (path: string, md: grpc.Metadata) => CallTracker | undefined;
}

const RESPONSE_HEADERS: http2.OutgoingHttpHeaders = {
  ':status': 200,
  'content-type': 'application/grpc+proto',
  'grpc-accept-encoding': 'identity,deflate,gzip',
  'grpc-encoding': 'identity',
};
/** A trailers-only (error) response carries these besides the status (grpc-js's defaultResponseHeaders). */
const ERROR_HEADERS: http2.OutgoingHttpHeaders = { ':status': 200, 'content-type': 'application/grpc+proto' };
const OK_TRAILERS: http2.OutgoingHttpHeaders = { 'grpc-status': grpc.status.OK, 'grpc-message': 'OK' };
const FRAME_HEADER_BYTES = 5;

/** The call object handlers see: the fields of grpc-js's ServerUnaryCall they may use. */
class FastUnaryCall extends EventEmitter {
  cancelled = false;
  constructor(
    private readonly stream: http2.ServerHttp2Stream,
    readonly path: string,
    readonly metadata: grpc.Metadata,
    readonly request: unknown,
  ) {
    super();
  }
  getPeer(): string {
    const s = this.stream.session?.socket;
    if (!s?.remoteAddress) return 'unknown';
    return s.remotePort ? `${s.remoteAddress}:${s.remotePort}` : s.remoteAddress;
  }
  getDeadline(): number {
    return Infinity;
  }
  getPath(): string {
    return this.path;
  }
  getHost(): string {
    return this.stream.session?.socket?.localAddress ?? 'unknown';
  }
  /** grpc-js's: the verified TLS client certificate, which etcd's CN-as-username auth reads. */
  getAuthContext(): { transportSecurityType?: string; sslPeerCertificate?: tls.PeerCertificate } {
    const socket = this.stream.session?.socket;
    if (!(socket instanceof tls.TLSSocket) || !socket.authorized) return {};
    const cert = socket.getPeerCertificate();
    return { transportSecurityType: 'ssl', sslPeerCertificate: cert.raw ? cert : undefined };
  }
  sendMetadata(): void {
    // Unary handlers of ours never send headers early; grpc-js sends them with the response.
  }
}

function errorStatus(err: unknown): { code: number; details: string; metadata: grpc.Metadata | null } {
  // grpc-js's serverErrorToStatus, so clients see the same code and text either way.
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

function answer(stream: http2.ServerHttp2Stream, handler: RegisteredUnary, call: FastUnaryCall, tracker: CallTracker | undefined): void {
  let done = false;
  const finish = (code: number): void => {
    if (done) return;
    done = true;
    tracker?.finish(code);
  };
  const fail = (code: number, details: string, metadata: grpc.Metadata | null): void => {
    if (done || stream.destroyed || stream.closed) return finish(code);
    const trailers: http2.OutgoingHttpHeaders = { 'grpc-status': code, 'grpc-message': encodeURI(details), ...ERROR_HEADERS };
    // Trailers-only response, as grpc-js sends an error before any message.
    stream.respond(metadata ? { ...trailers, ...metadata.toHttp2Headers() } : trailers, { endStream: true });
    finish(code);
  };
  stream.once('close', () => {
    if (!done) {
      call.cancelled = true;
      call.emit('cancelled', 'cancelled');
      done = true;
      tracker?.cancelled(false);
    }
  });
  const respond = (err: unknown, value?: unknown, trailer?: grpc.Metadata | null): void => {
    if (done) return;
    if (err) {
      const s = errorStatus(err);
      return fail(s.code, s.details, trailer ?? s.metadata);
    }
    let body: Buffer;
    try {
      body = handler.serialize(value);
    } catch {
      return fail(grpc.status.INTERNAL, 'Error serializing response', null);
    }
    if (stream.destroyed || stream.closed) return finish(grpc.status.CANCELLED);
    const frame = Buffer.allocUnsafe(FRAME_HEADER_BYTES + body.length);
    frame[0] = 0;
    frame.writeUInt32BE(body.length, 1);
    body.copy(frame, FRAME_HEADER_BYTES);
    tracker?.sent();
    stream.respond(RESPONSE_HEADERS, { waitForTrailers: true });
    stream.once('wantTrailers', () => stream.sendTrailers(trailer ? { ...OK_TRAILERS, ...trailer.toHttp2Headers() } : OK_TRAILERS));
    stream.end(frame);
    finish(grpc.status.OK);
  };
  try {
    handler.func(call, respond);
  } catch {
    fail(grpc.status.UNKNOWN, 'Unknown error', null);
  }
}

function serveStream(
  stream: http2.ServerHttp2Stream,
  headers: http2.IncomingHttpHeaders,
  handler: RegisteredUnary,
  opts: FastUnaryOptions,
): void {
  const path = handler.path;
  const metadata = grpc.Metadata.fromHttp2Headers(headers);
  const tracker = opts.track?.(path, metadata);
  const chunks: Buffer[] = [];
  let bytes = 0;
  let rejected = false;
  const reject = (code: number, details: string): void => {
    if (rejected) return;
    rejected = true;
    tracker?.finish(code);
    if (!stream.destroyed && !stream.closed) {
      stream.respond({ 'grpc-status': code, 'grpc-message': encodeURI(details), ...ERROR_HEADERS }, { endStream: true });
    }
  };
  // -1 until the 5-byte frame header has arrived.
  let size = -1;
  stream.on('data', (chunk: Buffer) => {
    if (rejected) return;
    chunks.push(chunk);
    bytes += chunk.length;
    if (size < 0 && bytes >= FRAME_HEADER_BYTES) {
      const head = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, bytes);
      size = head.readUInt32BE(1);
      // grpc-js's check, made before the message is buffered.
      if (size > opts.maxReceiveBytes) return reject(grpc.status.RESOURCE_EXHAUSTED, `Received message larger than max (${size} vs ${opts.maxReceiveBytes})`);
    }
    // Anything past the first message is a second one: refuse rather than buffer it.
    if (size >= 0 && bytes > FRAME_HEADER_BYTES + size) {
      return reject(grpc.status.UNIMPLEMENTED, `Received a second request message for server streaming method ${path}`);
    }
  });
  stream.once('end', () => {
    if (rejected) return;
    const data = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, bytes);
    if (data.length < FRAME_HEADER_BYTES) {
      return reject(grpc.status.UNIMPLEMENTED, `Received no request message for server streaming method ${path}`);
    }
    const size = data.readUInt32BE(1);
    if (data.length < FRAME_HEADER_BYTES + size) {
      // The client half-closed inside a message: a broken stream.
      return reject(grpc.status.INTERNAL, 'Received incomplete message');
    }
    if (data.length > FRAME_HEADER_BYTES + size) {
      return reject(grpc.status.UNIMPLEMENTED, `Received a second request message for server streaming method ${path}`);
    }
    if (data[0] !== 0) {
      return reject(grpc.status.INTERNAL, 'Received compressed message but "grpc-encoding" header was identity');
    }
    tracker?.received();
    let request: unknown;
    try {
      request = handler.deserialize(data.subarray(FRAME_HEADER_BYTES));
    } catch (e) {
      return reject(grpc.status.INTERNAL, `Error deserializing request: ${e instanceof Error ? e.message : String(e)}`);
    }
    answer(stream, handler, new FastUnaryCall(stream, path, metadata, request), tracker);
  });
}

/**
 * Route `opts.paths` around grpc-js's call machinery. Must run before the server gets its
 * connections (listener.ts creates the connection injector afterwards), and the server must be
 * built with 'grpc.enable_channelz': 0 (grpc-js then dispatches through _streamHandler).
 */
export function installFastUnary(server: grpc.Server, opts: FastUnaryOptions): void {
  const internals = server as unknown as GrpcJsServerInternals;
  assert(typeof internals._streamHandler === 'function' && internals.handlers instanceof Map, 'grpc-js internals changed: fast unary path unavailable');
  assert.equal(internals.channelzEnabled, false, 'fast unary path needs grpc.enable_channelz = 0');
  const fast = new Map<string, RegisteredUnary>();
  for (const p of opts.paths) {
    const h = internals.handlers.get(p);
    assert(h && h.type === 'unary', `${p} is not a registered unary method`);
    fast.set(p, h);
  }
  const original = internals._streamHandler;
  internals._streamHandler = function (this: GrpcJsServerInternals, extra, stream, headers) {
    const handler = fast.get(headers[':path'] ?? '');
    const ct = headers['content-type'];
    const enc = headers['grpc-encoding'];
    if (
      handler === undefined ||
      typeof ct !== 'string' ||
      !ct.startsWith('application/grpc') ||
      (enc !== undefined && enc !== 'identity')
    ) {
      return original.call(this, extra, stream, headers);
    }
    // Same as grpc-js: an 'error' without a listener would throw; 'close' handles the outcome.
    stream.once('error', () => {});
    serveStream(stream, headers, handler, opts);
  };
}

// A direct path for the hot unary methods (KV: Range, Put, DeleteRange, Txn).
//
// grpc-js runs every call through an interceptor chain, per-call objects, a message decoder
// stream, metadata conversions both ways and deadline timers: measured here at 40-50 µs of CPU
// per unary call, as much as all of a put's own work. For the methods that carry most of the
// load, this answers the HTTP/2 stream itself with the same registered handler, the same
// (de)serializers, the same metrics and the same response headers and trailers grpc-js sends;
// anything unusual (compressed messages, a wrong content type, other methods) goes to grpc-js.
import { EventEmitter } from 'node:events';
import type * as http2 from 'node:http2';
import * as grpc from '@grpc/grpc-js';
import {
  COMPRESSED_IDENTITY_TEXT,
  FRAME_HEADER_BYTES,
  RESPONSE_HEADERS,
  authContextOf,
  errorStatus,
  frameMessage,
  hostOf,
  peerOf,
  statusTrailers,
  tooLargeText,
  trailersOnly,
  type CallTracker,
  type FastRoute,
  type RegisteredHandler,
  type TrackCall,
} from './fast_common';

export type { CallTracker } from './fast_common';

/** How a registered unary handler is called. */
type UnaryFunc = (call: FastUnaryCall, callback: (err: unknown, value?: unknown, trailer?: grpc.Metadata | null) => void) => void;

export interface FastUnaryOptions {
  /** Full paths ("/etcdserverpb.KV/Range") to answer directly; they must be registered unary methods. */
  paths: readonly string[];
  /** grpc.max_receive_message_length of the server. */
  maxReceiveBytes: number;
  /** Starts metrics for a call and links them to its metadata (as the grpc-js interceptor does). */
  track?: TrackCall;
}

/** The call object handlers see: the fields of grpc-js's ServerUnaryCall they may use. */
class FastUnaryCall extends EventEmitter {
  cancelled = false;
  constructor(
    private readonly stream: http2.ServerHttp2Stream,
    private readonly headers: http2.IncomingHttpHeaders,
    readonly path: string,
    readonly metadata: grpc.Metadata,
    readonly request: unknown,
  ) {
    super();
  }
  getPeer(): string {
    return peerOf(this.stream);
  }
  getDeadline(): number {
    return Infinity;
  }
  getPath(): string {
    return this.path;
  }
  getHost(): string {
    return hostOf(this.headers);
  }
  getAuthContext(): ReturnType<typeof authContextOf> {
    return authContextOf(this.stream);
  }
  sendMetadata(): void {
    // Unary handlers of ours never send headers early; grpc-js sends them with the response.
  }
}

function answer(stream: http2.ServerHttp2Stream, func: UnaryFunc, serialize: (v: unknown) => Buffer, call: FastUnaryCall, tracker: CallTracker | undefined): void {
  let done = false;
  const finish = (code: number): void => {
    if (done) return;
    done = true;
    tracker?.finish(code);
  };
  const fail = (code: number, details: string, metadata: grpc.Metadata | null): void => {
    if (done || stream.destroyed || stream.closed) return finish(code);
    // Trailers-only response, as grpc-js sends an error before any message.
    stream.respond(trailersOnly({ code, details, metadata }), { endStream: true });
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
      body = serialize(value);
    } catch {
      return fail(grpc.status.INTERNAL, 'Error serializing response', null);
    }
    if (stream.destroyed || stream.closed) return finish(grpc.status.CANCELLED);
    const frame = frameMessage(body);
    tracker?.sent();
    stream.respond(RESPONSE_HEADERS, { waitForTrailers: true });
    stream.once('wantTrailers', () => stream.sendTrailers(statusTrailers({ code: grpc.status.OK, details: 'OK', metadata: trailer ?? null })));
    stream.end(frame);
    finish(grpc.status.OK);
  };
  try {
    func(call, respond);
  } catch {
    fail(grpc.status.UNKNOWN, 'Unknown error', null);
  }
}

function serveUnary(stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders, handler: RegisteredHandler, opts: FastUnaryOptions): void {
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
      stream.respond(trailersOnly({ code, details, metadata: null }), { endStream: true });
    }
  };
  // -1 until the 5-byte frame header has arrived.
  let size = -1;
  const onData = (chunk: Buffer): void => {
    if (rejected) return;
    chunks.push(chunk);
    bytes += chunk.length;
    if (size < 0 && bytes >= FRAME_HEADER_BYTES) {
      const head = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, bytes);
      size = head.readUInt32BE(1);
      // grpc-js's check, made before the message is buffered.
      if (size > opts.maxReceiveBytes) return reject(grpc.status.RESOURCE_EXHAUSTED, tooLargeText(size, opts.maxReceiveBytes));
    }
    // Anything past the first message is a second one: refuse rather than buffer it.
    if (size >= 0 && bytes > FRAME_HEADER_BYTES + size) {
      return reject(grpc.status.UNIMPLEMENTED, `Received a second request message for server streaming method ${path}`);
    }
  };
  stream.on('data', onData);
  stream.once('end', () => {
    // The request is whole: drop the listener and the chunks now. A stream in flight during a
    // mark-compact is moved to V8's old generation, and whatever an old object still points at
    // survives every young collection until the next full one, then gets promoted in turn. This
    // listener (its closure holds the chunks, the tracker, the metadata) was most of that: with 100
    // clients, promoted bytes per put 2.8-2.9 -> 1.9-2.0 KB, mark-compacts per 40k puts 13-14 -> 9-11.
    stream.removeListener('data', onData);
    if (rejected) return;
    const data = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, bytes);
    chunks.length = 0;
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
      return reject(grpc.status.INTERNAL, COMPRESSED_IDENTITY_TEXT);
    }
    tracker?.received();
    let request: unknown;
    try {
      request = handler.deserialize(data.subarray(FRAME_HEADER_BYTES));
    } catch (e) {
      return reject(grpc.status.INTERNAL, `Error deserializing request: ${e instanceof Error ? e.message : String(e)}`);
    }
    answer(stream, handler.func as unknown as UnaryFunc, handler.serialize, new FastUnaryCall(stream, headers, path, metadata, request), tracker);
  });
}

/** Routes for installFastRoutes (fast_common.ts): `opts.paths` answered without grpc-js's call machinery. */
export function fastUnaryRoutes(opts: FastUnaryOptions): FastRoute[] {
  return opts.paths.map((path) => ({ path, type: 'unary' as const, serve: (stream, headers, handler) => serveUnary(stream, headers, handler, opts) }));
}

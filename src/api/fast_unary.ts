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
import * as grpc from '@grpc/grpc-js';
import {
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
  FAST_CALL_TRACKER,
} from './fast_common';
import { H2Stream, type StreamSink } from '../h2/stream';
import { COMPRESSED_FLAG_IDENTITY_TEXT, NO_MESSAGE_TEXT, TORN_MESSAGE_TEXT, unmarshalRequestText } from './grpc_go_texts';
import { encodePooled, type EncodedParts, type PartsSerializer } from '../pb/wire';
import { POOLED_BUFFER } from '../runtime/buffer_pool';

export type { CallTracker } from './fast_common';

/** How a registered unary handler is called. */
type UnaryFunc = (call: FastUnaryCall, callback: (err: unknown, value?: unknown, trailer?: grpc.Metadata | null) => void) => void;

export interface FastUnaryOptions {
  /** Full paths ("/etcdserverpb.KV/Range") to answer directly; they must be registered unary methods. */
  paths: readonly string[];
  /** grpc.max_receive_message_length of the server. */
  maxReceiveBytes: number;
  /** Starts metrics for a call; the call object carries the tracker (FAST_CALL_TRACKER). */
  track?: TrackCall;
}

/**
 * One direct unary call: the call object handlers see (the fields of grpc-js's ServerUnaryCall
 * they may use) and the receiver of its HTTP/2 stream's events. One object per call on purpose:
 * the listener records and closures per event it replaced were ~6% of the bytes allocated per
 * put with 100 clients, and their young-generation collections are most of the tail latency.
 */
class FastUnaryCall implements StreamSink {
  cancelled = false;
  /** The call's listeners ('cancelled'), made on first subscription: KV handlers never subscribe. */
  private emitter: EventEmitter | undefined = undefined;
  request: unknown = undefined;
  readonly [FAST_CALL_TRACKER]: CallTracker | undefined;
  private md: grpc.Metadata | undefined = undefined;
  private chunks: Buffer[] = [];
  private bytes = 0;
  /** -1 until the 5-byte frame header has arrived. */
  private size = -1;
  private rejected = false;
  /** The handler has the request: a close before the answer cancels the call. */
  private answering = false;
  private done = false;

  constructor(
    private readonly stream: http2.ServerHttp2Stream,
    private readonly headers: http2.IncomingHttpHeaders,
    private readonly handler: RegisteredHandler,
    private readonly opts: FastUnaryOptions,
  ) {
    this[FAST_CALL_TRACKER] = opts.track?.(handler.path);
  }

  // The EventEmitter surface of grpc-js's call, backed by an emitter made on demand.
  on(event: string | symbol, listener: (...args: unknown[]) => void): this {
    (this.emitter ??= new EventEmitter()).on(event, listener);
    return this;
  }
  once(event: string | symbol, listener: (...args: unknown[]) => void): this {
    (this.emitter ??= new EventEmitter()).once(event, listener);
    return this;
  }
  off(event: string | symbol, listener: (...args: unknown[]) => void): this {
    this.emitter?.off(event, listener);
    return this;
  }
  removeListener(event: string | symbol, listener: (...args: unknown[]) => void): this {
    return this.off(event, listener);
  }
  emit(event: string | symbol, ...args: unknown[]): boolean {
    return this.emitter?.emit(event, ...args) ?? false;
  }
  listenerCount(event: string | symbol): number {
    return this.emitter?.listenerCount(event) ?? 0;
  }

  get path(): string {
    return this.handler.path;
  }
  /** grpc-js's Metadata of the request headers, built on first use: most calls never read it. */
  get metadata(): grpc.Metadata {
    return (this.md ??= grpc.Metadata.fromHttp2Headers(this.headers));
  }
  /** False when the request has no `key` header, so `metadata` holds no value for it (auth.ts). */
  mayCarry(key: string): boolean {
    return this.headers[key] !== undefined;
  }
  firstHeader(key: string): string | undefined {
    const v = this.headers[key];
    return Array.isArray(v) ? v[0] : v;
  }
  getPeer(): string {
    return peerOf(this.stream);
  }
  getDeadline(): number {
    return Infinity;
  }
  getPath(): string {
    return this.handler.path;
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

  /** Receives the stream's events: directly from our own HTTP/2 streams, through listeners from Node's. */
  attach(): void {
    const s = this.stream as unknown;
    if (s instanceof H2Stream) {
      s.setSink(this);
      return;
    }
    const stream = this.stream;
    const onData = (chunk: Buffer): void => this.onStreamData(chunk);
    stream.on('data', onData);
    stream.once('end', () => {
      stream.removeListener('data', onData);
      this.onStreamEnd();
    });
    stream.once('close', () => this.onStreamClose());
  }

  onStreamData(chunk: Buffer): void {
    if (this.rejected || this.answering || this.whole) return;
    this.chunks.push(chunk);
    this.bytes += chunk.length;
    if (this.size < 0 && this.bytes >= FRAME_HEADER_BYTES) {
      const head = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks, this.bytes);
      this.size = head.readUInt32BE(1);
      // grpc-js's check, made before the message is buffered.
      if (this.size > this.opts.maxReceiveBytes) return this.reject(grpc.status.RESOURCE_EXHAUSTED, tooLargeText(this.size, this.opts.maxReceiveBytes));
    }
    // Anything past the first message is dropped unread, as grpc-go's unary calls do (they read
    // one message and answer): kept only up to the first message's end, nothing more is buffered.
    if (this.size >= 0 && this.bytes >= FRAME_HEADER_BYTES + this.size) {
      const keep = FRAME_HEADER_BYTES + this.size;
      if (this.bytes > keep) {
        const all = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks, this.bytes);
        this.chunks = [all.subarray(0, keep)];
        this.bytes = keep;
      }
      this.whole = true;
    }
  }

  /** The first message is in: later bytes are ignored. */
  private whole = false;

  onStreamEnd(): void {
    if (this.rejected || this.answering) return;
    const chunks = this.chunks;
    const data = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, this.bytes);
    // The request is whole: a call in flight during a mark-compact is moved to V8's old
    // generation, and what an old object points at survives young collections until the next
    // full one; the chunks must not be among that.
    this.chunks = NO_CHUNKS;
    // grpc-go's answers (etcd's): no message at all is io.EOF, half a message io.ErrUnexpectedEOF,
    // both as code Unknown.
    if (data.length < FRAME_HEADER_BYTES) return this.reject(grpc.status.UNKNOWN, NO_MESSAGE_TEXT);
    const size = data.readUInt32BE(1);
    if (data.length < FRAME_HEADER_BYTES + size) return this.reject(grpc.status.UNKNOWN, TORN_MESSAGE_TEXT);
    assert(data.length === FRAME_HEADER_BYTES + size, 'a unary request keeps only its first message');
    if (data[0] !== 0) return this.reject(grpc.status.INTERNAL, COMPRESSED_FLAG_IDENTITY_TEXT);
    this[FAST_CALL_TRACKER]?.received();
    try {
      this.request = this.handler.deserialize(data.subarray(FRAME_HEADER_BYTES));
    } catch (e) {
      return this.reject(grpc.status.INTERNAL, unmarshalRequestText());
    }
    this.answering = true;
    try {
      (this.handler.func as unknown as UnaryFunc)(this, (err, value, trailer) => this.respond(err, value, trailer));
    } catch {
      this.fail(grpc.status.UNKNOWN, 'Unknown error', null);
    }
  }

  onStreamClose(): void {
    if (!this.answering || this.done) return;
    this.cancelled = true;
    this.emit('cancelled', 'cancelled');
    this.done = true;
    this[FAST_CALL_TRACKER]?.cancelled(false);
  }

  /** Refuses the request before the handler saw it. */
  private reject(code: number, details: string): void {
    if (this.rejected) return;
    this.rejected = true;
    this.chunks = NO_CHUNKS;
    this[FAST_CALL_TRACKER]?.finish(code);
    if (!this.stream.destroyed && !this.stream.closed) {
      this.stream.respond(trailersOnly({ code, details, metadata: null }), { endStream: true });
    }
  }

  private finish(code: number): void {
    if (this.done) return;
    this.done = true;
    this[FAST_CALL_TRACKER]?.finish(code);
  }

  private fail(code: number, details: string, metadata: grpc.Metadata | null): void {
    if (this.done || this.stream.destroyed || this.stream.closed) return this.finish(code);
    // Trailers-only response, as grpc-js sends an error before any message.
    this.stream.respond(trailersOnly({ code, details, metadata }), { endStream: true });
    this.finish(code);
  }

  private respond(err: unknown, value?: unknown, trailer?: grpc.Metadata | null): void {
    if (this.done) return;
    if (err) {
      const s = errorStatus(err);
      return this.fail(s.code, s.details, trailer ?? s.metadata);
    }
    let body: Buffer | null = null;
    let parts: EncodedParts | null = null;
    // Our HTTP/2 stream hands a pooled buffer back once the socket has written it (a paged list's
    // ~0.5 MiB response no longer a new allocation per page: src/runtime/buffer_pool.ts), and
    // writes a response given in parts as they are (a large range's keys are not copied again).
    const h2 = (this.stream as unknown) instanceof H2Stream;
    try {
      if (h2) parts = (this.handler.serialize as PartsSerializer).parts?.(value) ?? null;
      if (parts === null) body = h2 ? encodePooled(this.handler.serialize, value) : this.handler.serialize(value);
    } catch {
      return this.fail(grpc.status.INTERNAL, 'Error serializing response', null);
    }
    const stream = this.stream;
    if (stream.destroyed || stream.closed) return this.finish(grpc.status.CANCELLED);
    this[FAST_CALL_TRACKER]?.sent();
    const trailers = statusTrailers({ code: grpc.status.OK, details: 'OK', metadata: trailer ?? null });
    const s = stream as unknown;
    if (parts !== null) {
      (s as H2Stream).respondWithTrailers(RESPONSE_HEADERS, framedParts(parts), trailers);
      return this.finish(grpc.status.OK);
    }
    const frame = frameMessage(body!);
    if (s instanceof H2Stream) {
      s.respondWithTrailers(RESPONSE_HEADERS, frame, trailers);
    } else {
      stream.respond(RESPONSE_HEADERS, { waitForTrailers: true });
      stream.once('wantTrailers', () => stream.sendTrailers(trailers));
      stream.end(frame);
    }
    this.finish(grpc.status.OK);
  }
}

/** A message in parts with gRPC's prefix in front: with its first part when that is small and its own. */
function framedParts(p: EncodedParts): Buffer[] {
  const first = p.parts[0];
  const merge = first !== undefined && first.length <= FRAME_MERGE_MAX_BYTES && (first as Buffer & { [POOLED_BUFFER]?: Buffer })[POOLED_BUFFER] === undefined;
  const prefix = Buffer.allocUnsafe(FRAME_HEADER_BYTES + (merge ? first.length : 0));
  prefix[0] = 0;
  prefix.writeUInt32BE(p.bytes, 1);
  if (!merge) return [prefix, ...p.parts];
  first.copy(prefix, FRAME_HEADER_BYTES);
  return [prefix, ...p.parts.slice(1)];
}

/** A first part up to this size is copied behind the prefix rather than sent as a DATA frame of its own. */
const FRAME_MERGE_MAX_BYTES = 4096;

/** Frozen: a push after the request was taken would throw rather than keep bytes alive. */
const NO_CHUNKS = Object.freeze([]) as unknown as Buffer[];

function serveUnary(stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders, handler: RegisteredHandler, opts: FastUnaryOptions): void {
  new FastUnaryCall(stream, headers, handler, opts).attach();
}

/** Routes for installFastRoutes (fast_common.ts): `opts.paths` answered without grpc-js's call machinery. */
export function fastUnaryRoutes(opts: FastUnaryOptions): FastRoute[] {
  return opts.paths.map((path) => ({ path, type: 'unary' as const, serve: (stream, headers, handler) => serveUnary(stream, headers, handler, opts) }));
}

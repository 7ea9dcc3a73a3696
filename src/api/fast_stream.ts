// A direct path for the hot bidirectional streams (Watch/Watch, Lease/LeaseKeepAlive).
//
// grpc-js wraps every stream in an intercepting call, an object-mode Duplex and a decoder, and
// pauses and resumes the HTTP/2 stream around every message it reads: per message and per
// call that is most of the CPU of a watch event or a KeepAliveOnce. This answers the HTTP/2
// stream itself: the same registered handler gets a small call object with the parts of
// grpc.ServerDuplexStream our handlers use (FastDuplexCall), and the client sees the same
// headers, messages, trailers, status texts and metrics as through grpc-js. Responses written
// in the same turn leave in one HTTP/2 write.
import assert from 'node:assert';
import { EventEmitter } from 'node:events';
import type * as http2 from 'node:http2';
import * as grpc from '@grpc/grpc-js';
import {
  FRAME_HEADER_BYTES,
  RESPONSE_HEADERS,
  authContextOf,
  errorStatus,
  frameMessages,
  hostOf,
  peerOf,
  statusTrailers,
  tooLargeText,
  trailersOnly,
  type CallTracker,
  type FastRoute,
  type GrpcStatus,
  type RegisteredHandler,
  type TrackCall,
  FAST_CALL_TRACKER,
} from './fast_common';
import { sendTooLargeText, TORN_MESSAGE_TEXT, unmarshalStreamText } from './grpc_go_texts';

export interface FastStreamOptions {
  /** Full paths ("/etcdserverpb.Watch/Watch") to answer directly; they must be registered bidi methods. */
  paths: readonly string[];
  /** grpc.max_receive_message_length of the server. */
  maxReceiveBytes: number;
  /** grpc.max_send_message_length of the server. */
  maxSendBytes: number;
  track?: TrackCall;
  /**
   * A request message the call could not read (too large, not decodable, cut short): what
   * grpc-go's Recv returns as an error to etcd's stream handlers, which count it in
   * etcd_network_server_stream_failures_total{Type="receive"}. A client's cancel is not one.
   */
  onReceiveFailure?: (path: string, details: string) => void;
}

/**
 * Bytes of responses a call holds (queued in this turn plus what the HTTP/2 stream has not
 * handed to the session yet) before write() returns false and the handler waits for 'drain'.
 */
export const WRITE_HIGH_WATER_BYTES = 64 * 1024;

/**
 * Responses queued in one turn before write() returns false: etcd's watch stream buffers 128
 * (mvcc's chanBufLen) before its watchers become victims served by the catch-up. This was
 * grpc-js's Duplex's 16, which made a stream of 100 watchers on one key (etcd's benchmark, 1000
 * watchers over 10 streams) send 16 of them live and move the other 84 to the catch-up and back on
 * every revision: with 128, server CPU in that case 1.45-1.71 -> 1.14-1.23 s per run, the Go
 * client still taking all 50k events/s. (When the limit was first set the client fell to half
 * that rate without it; it did not here.) WRITE_HIGH_WATER_BYTES still bounds the bytes.
 */
export const WRITE_HIGH_WATER_MESSAGES = 128;

/**
 * Requests parsed but not yet delivered while the handler has paused: the rest of the one
 * chunk being parsed when it paused (a chunk is one HTTP/2 DATA frame, 16 KiB at most by our
 * SETTINGS, so at most ~3.3k empty messages). The bound is a sanity check.
 */
const MAX_INBOX_MESSAGES = 16 * 1024;

/**
 * Incremental reader of length-prefixed gRPC messages: any number of messages per chunk, and
 * messages split across chunks. The size check happens on the frame header, before buffering.
 */
export class FrameReader {
  private readonly head = Buffer.alloc(FRAME_HEADER_BYTES);
  private headBytes = 0;
  /** Body size of the message being read; -1 while its header is incomplete. */
  private size = -1;
  private parts: Buffer[] = [];
  private partBytes = 0;

  constructor(private readonly maxMessageBytes: number) {
    assert(Number.isSafeInteger(maxMessageBytes) && maxMessageBytes >= 0, 'bad receive limit');
  }

  /** True when no message is partly read (a half-close now is clean). */
  get idle(): boolean {
    return this.headBytes === 0 && this.size < 0;
  }

  /**
   * Calls `onMessage(compressedFlag, body)` for every message completed by `chunk`, in order.
   * Throws a TooLarge error (before buffering) for a header above the limit.
   */
  push(chunk: Buffer, onMessage: (flag: number, body: Buffer) => void): void {
    let pos = 0;
    const len = chunk.length;
    while (pos < len) {
      if (this.size < 0) {
        if (this.headBytes === 0 && len - pos >= FRAME_HEADER_BYTES) {
          // Common case: the whole header in this chunk.
          this.startBody(chunk[pos]!, chunk.readUInt32BE(pos + 1));
          pos += FRAME_HEADER_BYTES;
        } else {
          const n = Math.min(FRAME_HEADER_BYTES - this.headBytes, len - pos);
          chunk.copy(this.head, this.headBytes, pos, pos + n);
          this.headBytes += n;
          pos += n;
          if (this.headBytes < FRAME_HEADER_BYTES) return;
          this.headBytes = 0;
          this.startBody(this.head[0]!, this.head.readUInt32BE(1));
        }
        if (this.size === 0) {
          this.size = -1;
          onMessage(this.flag, Buffer.alloc(0));
        }
        continue;
      }
      const want = this.size - this.partBytes;
      const n = Math.min(want, len - pos);
      if (this.partBytes === 0 && n === want) {
        // The whole body in this chunk: no copy.
        const body = chunk.subarray(pos, pos + n);
        pos += n;
        this.size = -1;
        onMessage(this.flag, body);
        continue;
      }
      this.parts.push(chunk.subarray(pos, pos + n));
      this.partBytes += n;
      assert(this.partBytes <= this.size);
      pos += n;
      if (this.partBytes === this.size) {
        const body = Buffer.concat(this.parts, this.partBytes);
        this.parts = [];
        this.partBytes = 0;
        this.size = -1;
        onMessage(this.flag, body);
      }
    }
  }

  private flag = 0;

  private startBody(flag: number, size: number): void {
    if (size > this.maxMessageBytes) throw new TooLarge(tooLargeText(size, this.maxMessageBytes));
    this.flag = flag;
    this.size = size;
  }
}

class TooLarge extends Error {}

type BidiFunc = (call: FastDuplexCall) => void;

/**
 * The call object bidi handlers see: what they use of grpc.ServerDuplexStream. Events:
 * 'data' (one decoded request), 'end' (the client half-closed), 'drain' (write() may go on),
 * 'cancelled' (the client went away, or the transport failed, before our status),
 * 'finish' (our status was sent), 'close' (the HTTP/2 stream is gone, always last).
 * Emitting 'error' with {code, details, metadata} ends the call with that status, as in grpc-js.
 */
export class FastDuplexCall extends EventEmitter {
  cancelled = false;
  private headersSent = false;
  /** Our status is sent (or the call was cancelled): nothing more goes out. */
  private done = false;
  private closed = false;
  private paused = false;
  private inputEnded = false;
  private endEmitted = false;
  /** Request bodies read from the HTTP/2 stream but not delivered, while paused (at most one chunk's worth). */
  private inbox: Buffer[] = [];
  /** Responses written this turn (encoded, not yet framed), sent together on the next tick. */
  private out: Buffer[] = [];
  /** Their bytes once framed. */
  private outBytes = 0;
  private flushScheduled = false;
  private readonly flushBound = (): void => this.flush();
  private needDrain = false;
  private readonly reader: FrameReader;
  readonly [FAST_CALL_TRACKER]: CallTracker | undefined;

  constructor(
    private readonly stream: http2.ServerHttp2Stream,
    private readonly headers: http2.IncomingHttpHeaders,
    private readonly handler: RegisteredHandler,
    readonly metadata: grpc.Metadata,
    private readonly tracker: CallTracker | undefined,
    private readonly opts: FastStreamOptions,
  ) {
    super();
    this[FAST_CALL_TRACKER] = tracker;
    this.reader = new FrameReader(opts.maxReceiveBytes);
    // grpc-js: an emitted error becomes the call's status.
    this.on('error', (err: unknown) => this.sendStatus(errorStatus(err)));
  }

  /** Wires the HTTP/2 stream to this call; called once the handler has attached its listeners. */
  start(): void {
    const s = this.stream;
    s.on('data', (chunk: Buffer) => this.onChunk(chunk));
    s.once('end', () => {
      this.inputEnded = true;
      this.maybeEmitEnd();
    });
    s.on('drain', () => this.onStreamDrain());
    s.once('close', () => this.onStreamClose());
    if (s.destroyed || s.closed) this.onStreamClose();
  }

  get path(): string {
    return this.handler.path;
  }
  getPeer(): string {
    return peerOf(this.stream);
  }
  getDeadline(): number {
    // Calls with a grpc-timeout go through grpc-js (see fastStreamRoutes).
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

  sendMetadata(md?: grpc.Metadata): void {
    if (this.done || this.headersSent) return;
    this.headersSent = true;
    this.stream.respond(md ? { ...RESPONSE_HEADERS, ...md.toHttp2Headers() } : RESPONSE_HEADERS, { waitForTrailers: true });
  }

  isPaused(): boolean {
    return this.paused;
  }

  /** Stop delivering requests; the HTTP/2 stream stops reading, so flow control pushes back on the client. */
  pause(): this {
    if (!this.paused) {
      this.paused = true;
      this.stream.pause();
    }
    return this;
  }

  resume(): this {
    if (!this.paused) return this;
    this.paused = false;
    // As a Readable's resume(): delivery restarts on a later tick, not inside this call.
    process.nextTick(() => this.deliverInbox());
    return this;
  }

  /** Queues one response; false asks the caller to wait for 'drain'. */
  write(msg: unknown): boolean {
    if (this.done) return true;
    let body: Buffer;
    try {
      body = this.handler.serialize(msg);
    } catch {
      this.abort({ code: grpc.status.INTERNAL, details: 'Error serializing response', metadata: null });
      return true;
    }
    if (body.length > this.opts.maxSendBytes) {
      this.abort({ code: grpc.status.RESOURCE_EXHAUSTED, details: sendTooLargeText(body.length + FRAME_HEADER_BYTES, this.opts.maxSendBytes), metadata: null });
      return true;
    }
    this.sendMetadata();
    this.tracker?.sent();
    this.out.push(body);
    this.outBytes += FRAME_HEADER_BYTES + body.length;
    if (!this.flushScheduled) {
      this.flushScheduled = true;
      // A microtask, not nextTick: the apply that emits watch events resolves its proposals after,
      // and the put's response (queued from those promises' continuations) must not be handed to
      // its connection before the events: nextTick runs after the whole microtask queue, so the
      // put's connection was flushed first and watchers heard of a write after its writer did.
      queueMicrotask(this.flushBound);
    }
    if (this.out.length < WRITE_HIGH_WATER_MESSAGES && this.outBytes + this.stream.writableLength < WRITE_HIGH_WATER_BYTES) return true;
    this.needDrain = true;
    return false;
  }

  /** Ends the call with status OK (grpc-js: the Duplex's end()). */
  end(trailer?: grpc.Metadata): void {
    this.sendStatus({ code: grpc.status.OK, details: 'OK', metadata: trailer ?? null });
  }

  private flush(): void {
    this.flushScheduled = false;
    if (this.out.length === 0 || this.closed) {
      this.out = [];
      this.outBytes = 0;
      return;
    }
    const buf = frameMessages(this.out, this.outBytes);
    this.out = [];
    this.outBytes = 0;
    const ok = this.stream.write(buf);
    // The stream's own 'drain' follows a false; a true means there is room already.
    if (ok && this.needDrain && !this.done) {
      this.needDrain = false;
      this.emit('drain');
    }
  }

  private onStreamDrain(): void {
    if (!this.needDrain || this.done || this.outBytes > 0) return;
    this.needDrain = false;
    this.emit('drain');
  }

  /** The handler's status: after every written response, as trailers (or trailers-only). */
  private sendStatus(status: GrpcStatus): void {
    if (this.done) return;
    this.done = true;
    this.tracker?.finish(status.code);
    this.writeStatus(status);
    this.emit('finish');
  }

  /** A request message that could not be read: reported (onReceiveFailure), then abort(). */
  private failReceive(status: GrpcStatus): void {
    if (this.done) return;
    this.opts.onReceiveFailure?.(this.handler.path, status.details);
    this.abort(status);
  }

  /**
   * A transport-level failure (oversized or undecodable request, unserializable response).
   * grpc-js sends these below its interceptors, so its metrics and the handler see a cancel.
   */
  private abort(status: GrpcStatus): void {
    if (this.done) return;
    this.done = true;
    this.writeStatus(status);
    this.cancel();
  }

  private writeStatus(status: GrpcStatus): void {
    const s = this.stream;
    this.inbox = [];
    if (this.closed || s.destroyed || s.closed) return;
    if (!this.headersSent) {
      this.out = [];
      this.outBytes = 0;
      this.headersSent = true;
      s.respond(trailersOnly(status), { endStream: true });
      return;
    }
    if (this.out.length > 0) {
      s.write(frameMessages(this.out, this.outBytes));
      this.out = [];
      this.outBytes = 0;
    }
    s.once('wantTrailers', () => s.sendTrailers(statusTrailers(status)));
    s.end();
  }

  private cancel(): void {
    if (this.cancelled) return;
    this.cancelled = true;
    this.tracker?.cancelled(false);
    this.emit('cancelled', 'cancelled');
  }

  private onStreamClose(): void {
    if (this.closed) return;
    this.closed = true;
    this.inbox = [];
    this.out = [];
    this.outBytes = 0;
    if (!this.done) {
      this.done = true;
      this.cancel();
    }
    this.emit('close');
  }

  private onChunk(chunk: Buffer): void {
    if (this.done) return;
    try {
      this.reader.push(chunk, (flag, body) => this.onMessage(flag, body));
    } catch (e) {
      if (!(e instanceof TooLarge)) throw e;
      this.failReceive({ code: grpc.status.RESOURCE_EXHAUSTED, details: e.message, metadata: null });
    }
  }

  private onMessage(flag: number, body: Buffer): void {
    if (this.done) return;
    // grpc-js reads a compressed-flag message on an identity stream as uncompressed; so do we
    // (compressed streams never come here: they carry a grpc-encoding and go to grpc-js).
    void flag;
    if (this.paused || this.inbox.length > 0) {
      // A chunk holds at most one HTTP/2 read's worth of messages: the bound of this queue.
      if (this.inbox.length >= MAX_INBOX_MESSAGES) {
        // Cannot happen with HTTP/2 framing as we configure it; if it did, this is client input:
        // end the call rather than the process.
        this.failReceive({ code: grpc.status.RESOURCE_EXHAUSTED, details: 'too many pending request messages', metadata: null });
        return;
      }
      this.inbox.push(body);
      return;
    }
    this.deliver(body);
  }

  private deliver(body: Buffer): void {
    let req: unknown;
    try {
      req = this.handler.deserialize(body);
    } catch {
      this.failReceive({ code: grpc.status.INTERNAL, details: unmarshalStreamText(), metadata: null });
      return;
    }
    this.tracker?.received();
    this.emit('data', req);
  }

  private deliverInbox(): void {
    while (!this.paused && !this.done && this.inbox.length > 0) this.deliver(this.inbox.shift()!);
    if (this.paused || this.done) return;
    this.stream.resume();
    this.maybeEmitEnd();
  }

  private maybeEmitEnd(): void {
    if (!this.inputEnded || this.endEmitted || this.paused || this.inbox.length > 0 || this.closed) return;
    this.endEmitted = true;
    if (!this.reader.idle && !this.done) {
      // The client half-closed inside a message: grpc-go's Recv returns io.ErrUnexpectedEOF,
      // which etcd's stream handlers return as it is (code Unknown).
      this.failReceive({ code: grpc.status.UNKNOWN, details: TORN_MESSAGE_TEXT, metadata: null });
      return;
    }
    this.emit('end');
  }
}

function serveBidi(stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders, handler: RegisteredHandler, opts: FastStreamOptions): void {
  const metadata = grpc.Metadata.fromHttp2Headers(headers);
  const tracker = opts.track?.(handler.path);
  const call = new FastDuplexCall(stream, headers, handler, metadata, tracker, opts);
  try {
    (handler.func as unknown as BidiFunc)(call);
  } catch {
    // grpc-js: a handler that throws ends the call with UNKNOWN.
    call.emit('error', { code: grpc.status.UNKNOWN, details: 'Unknown error' });
  }
  call.start();
}

/** Routes for installFastRoutes (fast_common.ts): `opts.paths` answered without grpc-js's call machinery. */
export function fastStreamRoutes(opts: FastStreamOptions): FastRoute[] {
  return opts.paths.map((path) => ({
    path,
    type: 'bidi' as const,
    // A deadline needs grpc-js's timer; etcd's clients open these streams without one.
    accepts: (headers: http2.IncomingHttpHeaders) => headers['grpc-timeout'] === undefined,
    serve: (stream, headers, handler) => serveBidi(stream, headers, handler, opts),
  }));
}

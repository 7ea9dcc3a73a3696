// One server-side HTTP/2 stream with the surface of Node's ServerHttp2Stream that gRPC servers use
// (grpc-js's server call and our direct paths in src/api): respond, write, end, sendTrailers with
// 'wantTrailers', close, pause/resume, and the 'data', 'end', 'drain', 'close' events, with the
// same meaning as in Node. The connection (connection.ts) does the framing and flow control.
import assert from 'node:assert';
import { EventEmitter } from 'node:events';
import type { Duplex } from 'node:stream';
import { POOLED_BUFFER } from '../runtime/buffer_pool';
import { ErrorCode } from './frames';
import type { OutgoingValue } from './hpack';

/** What a stream needs from its connection. */
export interface StreamOwner {
  /** The connection's transport; handlers read addresses and TLS state from it. */
  readonly socket: Duplex;
  /** Shared by the connection's streams (Node's `stream.session`). */
  readonly session: { readonly socket: Duplex };
  sendHeaders(stream: H2Stream, headers: Readonly<Record<string, OutgoingValue>>, endStream: boolean): void;
  /** The stream has DATA (or its end) to send. */
  wakeSender(stream: H2Stream): void;
  /** `bytes` of received DATA were handed to the stream's reader: credit them back to the peer. */
  consumed(stream: H2Stream, bytes: number): void;
  resetStream(stream: H2Stream, code: number): void;
  /** The stream is closed on both sides: forget it. */
  released(stream: H2Stream): void;
}

/** Node's default writableHighWaterMark for an HTTP/2 stream. */
export const STREAM_HIGH_WATER_BYTES = 16 * 1024;

export interface RespondOptions {
  endStream?: boolean;
  waitForTrailers?: boolean;
}

type WriteCallback = (err?: Error | null) => void;

/**
 * A direct receiver of a stream's events in place of 'data', 'end' and 'close' listeners: the
 * unary fast path (src/api/fast_unary.ts) makes one object per call instead of a listener
 * record and closure per event (with 100 clients, these were ~6% of the bytes allocated per put).
 */
export interface StreamSink {
  onStreamData(chunk: Buffer): void;
  onStreamEnd(): void;
  /** As 'close': on the next tick after the stream closed; the listeners, if any, follow. */
  onStreamClose(): void;
}

const NO_WRITES: readonly { cb: WriteCallback | undefined }[] = Object.freeze([]);

function emitClose(stream: H2Stream, pending: readonly { cb: WriteCallback | undefined }[]): void {
  for (const w of pending) w.cb?.(new Error('stream closed'));
  const sink = stream.sink;
  stream.sink = undefined;
  sink?.onStreamClose();
  stream.emit('close');
}

export class H2Stream extends EventEmitter {
  /** Node's: the session, whose `socket` grpc-js reads the peer address and TLS state from. */
  readonly session: { readonly socket: Duplex };
  headersSent = false;
  /** Closed on both sides or reset; no more events but 'close'. */
  closed = false;
  destroyed = false;
  /** The RST_STREAM code the stream ended with (NO_ERROR when it ended normally); undefined while open. */
  rstCode: number | undefined = undefined;

  // Receiving side.
  /** Bytes the peer may still send on this stream, and bytes read but not yet credited back (the connection's). */
  recvWindow: number;
  recvUnacked = 0;
  private paused = false;
  private inbox: Buffer[] = [];
  /** The peer sent END_STREAM. */
  private remoteEnded = false;
  private endEmitted = false;
  private deliveryScheduled = false;

  // Sending side (the connection pumps `outQueue` into DATA frames).
  /** Bytes the peer lets us send on this stream. */
  sendWindow: number;
  /** In its connection's list of streams with something to send (H2Connection.sending). */
  sendQueued = false;
  /** `pooled`: the buffer to hand back to responsePool once `data`'s last byte is written. */
  readonly outQueue: { data: Buffer; cb: WriteCallback | undefined; pooled: Buffer | undefined }[] = [];
  outBytes = 0;
  /** end() was called: once outQueue is empty, trailers or an empty END_STREAM DATA frame follow. */
  localEnding = false;
  /** END_STREAM went out (in HEADERS or DATA). */
  localClosed = false;
  waitForTrailers = false;
  wantTrailersEmitted = false;
  private needDrain = false;
  /** Trailers respondWithTrailers() queued: sent once the DATA is out, without 'wantTrailers'. */
  private queuedTrailers: Readonly<Record<string, OutgoingValue>> | undefined = undefined;
  /** Receives 'data', 'end' and 'close' instead of listeners (setSink). */
  sink: StreamSink | undefined = undefined;

  constructor(
    readonly id: number,
    private readonly owner: StreamOwner,
    initialSendWindow: number,
    initialRecvWindow: number,
  ) {
    super();
    this.session = owner.session;
    this.sendWindow = initialSendWindow;
    this.recvWindow = initialRecvWindow;
  }

  get writableLength(): number {
    return this.outBytes;
  }

  /** end() was called (or END_STREAM went out with the headers). */
  get writableEnded(): boolean {
    return this.localEnding || this.localClosed;
  }

  respond(headers: Readonly<Record<string, OutgoingValue>>, options: RespondOptions = {}): void {
    if (this.closed) return;
    if (this.headersSent) assert.fail(`stream ${this.id}: headers sent twice`);
    this.headersSent = true;
    const endStream = options.endStream === true;
    this.waitForTrailers = options.waitForTrailers === true;
    this.owner.sendHeaders(this, headers, endStream);
    if (endStream) this.sentEnd();
  }

  write(data: Buffer | Uint8Array, cb?: WriteCallback): boolean {
    if (this.closed || this.localEnding) {
      if (cb) process.nextTick(cb, new Error('write after end'));
      return false;
    }
    if (!this.headersSent) this.respond({ ':status': 200 });
    const buf = Buffer.isBuffer(data) ? data : Buffer.from(data.buffer, data.byteOffset, data.byteLength);
    this.outQueue.push({ data: buf, cb, pooled: (buf as Buffer & { [POOLED_BUFFER]?: Buffer })[POOLED_BUFFER] });
    this.outBytes += buf.length;
    this.owner.wakeSender(this);
    if (this.outBytes >= STREAM_HIGH_WATER_BYTES) {
      this.needDrain = true;
      return false;
    }
    return true;
  }

  /** end(), end(cb), end(data), end(data, cb), as Node's Writable. */
  end(dataOrCb?: Buffer | Uint8Array | WriteCallback, cb?: WriteCallback): this {
    if (typeof dataOrCb === 'function') {
      cb = dataOrCb;
      dataOrCb = undefined;
    }
    if (this.closed || this.localEnding || this.localClosed) return this;
    if (dataOrCb !== undefined) this.write(dataOrCb);
    if (!this.headersSent) this.respond({ ':status': 200 });
    if (this.localClosed) return this;
    this.localEnding = true;
    if (cb) this.outQueue.push({ data: Buffer.alloc(0), cb, pooled: undefined });
    this.owner.wakeSender(this);
    return this;
  }

  /**
   * A whole unary answer at once: headers, one DATA payload (or its parts in order), then
   * `trailers` as soon as the payload is out (what respond(waitForTrailers) + end(body) +
   * sendTrailers on 'wantTrailers' do, without the listener).
   */
  respondWithTrailers(headers: Readonly<Record<string, OutgoingValue>>, body: Buffer | readonly Buffer[], trailers: Readonly<Record<string, OutgoingValue>>): void {
    if (this.closed) return;
    this.respond(headers, { waitForTrailers: true });
    this.queuedTrailers = trailers;
    if (Buffer.isBuffer(body)) {
      this.end(body);
      return;
    }
    // A payload in parts (a large range's runs of records), each written as it is.
    for (const part of body) this.write(part);
    this.end();
  }

  /** Events go to `sink` from now on; at most one sink, set before any data arrives. */
  setSink(sink: StreamSink): void {
    if (this.sink !== undefined) assert.fail(`stream ${this.id}: second sink`);
    this.sink = sink;
  }

  sendTrailers(headers: Readonly<Record<string, OutgoingValue>>): void {
    if (this.closed) return;
    if (!(this.waitForTrailers && this.localEnding && !this.localClosed)) assert.fail(`stream ${this.id}: trailers out of order`);
    this.owner.sendHeaders(this, headers, true);
    this.sentEnd();
  }

  /** Resets the stream with `code` (RST_STREAM), as Node's close(). */
  close(code: number = ErrorCode.NO_ERROR, cb?: () => void): void {
    if (cb) this.once('close', cb);
    if (this.closed) return;
    this.owner.resetStream(this, code);
    this.finish(code);
  }

  destroy(err?: Error): this {
    if (!this.closed) this.close(err ? ErrorCode.INTERNAL_ERROR : ErrorCode.CANCEL);
    return this;
  }

  pause(): this {
    this.paused = true;
    return this;
  }

  resume(): this {
    if (!this.paused) return this;
    this.paused = false;
    // As a Node stream: data flows again from the next tick, not inside resume().
    if (!this.deliveryScheduled && (this.inbox.length > 0 || (this.remoteEnded && !this.endEmitted))) {
      this.deliveryScheduled = true;
      process.nextTick(() => {
        this.deliveryScheduled = false;
        this.deliver();
      });
    }
    return this;
  }

  // ---- Called by the connection. ----

  /** A DATA payload arrived (flow control already charged). */
  receive(data: Buffer): void {
    if (this.closed || this.remoteEnded) {
      this.owner.consumed(this, data.length);
      return;
    }
    if (data.length === 0) return;
    this.inbox.push(data);
    if (!this.paused) this.deliver();
  }

  /** The peer sent END_STREAM. */
  receiveEnd(): void {
    if (this.remoteEnded) return;
    this.remoteEnded = true;
    if (!this.paused) this.deliver();
    this.maybeRelease();
  }

  /** The peer reset the stream, or the connection went away (code INTERNAL_ERROR/CANCEL). */
  aborted(code: number): void {
    if (this.closed) return;
    this.finish(code);
  }

  /** DATA frames went out up to this point: callbacks of fully sent writes, 'drain'. */
  afterSend(): void {
    if (this.needDrain && this.outBytes < STREAM_HIGH_WATER_BYTES && !this.closed) {
      this.needDrain = false;
      this.emit('drain');
    }
  }

  /** All queued DATA is out and end() was called. */
  readyToEnd(): void {
    if (this.waitForTrailers) {
      if (this.wantTrailersEmitted) return;
      this.wantTrailersEmitted = true;
      const t = this.queuedTrailers;
      if (t !== undefined) {
        this.queuedTrailers = undefined;
        this.sendTrailers(t);
        return;
      }
      this.emit('wantTrailers');
    }
  }

  /** END_STREAM went out. */
  sentEnd(): void {
    this.localClosed = true;
    this.localEnding = true;
    if (!this.remoteEnded) {
      // Done before the client: what Go's gRPC server does (RFC 9113 section 8.1), so the
      // client stops sending and the stream does not linger half-open.
      this.owner.resetStream(this, ErrorCode.NO_ERROR);
      this.finish(ErrorCode.NO_ERROR);
      return;
    }
    this.maybeRelease();
  }

  private deliver(): void {
    while (!this.paused && this.inbox.length > 0 && !this.closed) {
      const chunk = this.inbox.shift()!;
      this.owner.consumed(this, chunk.length);
      if (this.sink !== undefined) this.sink.onStreamData(chunk);
      else this.emit('data', chunk);
    }
    if (!this.paused && this.inbox.length === 0 && this.remoteEnded && !this.endEmitted && !this.closed) {
      this.endEmitted = true;
      if (this.sink !== undefined) this.sink.onStreamEnd();
      else this.emit('end');
      this.maybeRelease();
    }
  }

  private maybeRelease(): void {
    if (this.closed || !this.localClosed || !this.remoteEnded) return;
    this.finish(ErrorCode.NO_ERROR);
  }

  private finish(code: number): void {
    if (this.closed) assert.fail(`stream ${this.id} closed twice`);
    this.closed = true;
    this.destroyed = true;
    this.rstCode = code;
    this.inbox.length = 0;
    const pending = this.outQueue.length === 0 ? NO_WRITES : this.outQueue.splice(0);
    this.outBytes = 0;
    this.queuedTrailers = undefined;
    this.owner.released(this);
    process.nextTick(emitClose, this, pending);
  }
}

// The server side of one HTTP/2 connection (RFC 9113), lean enough for gRPC's small messages:
// frames parsed straight from the socket's chunks, header blocks decoded by our HPACK decoder,
// one socket write per event-loop turn for everything that turn produced, and no per-frame or
// per-header objects beyond the stream itself. Node's http2 module costs ~55 µs of CPU per
// unary gRPC call on these machines (its JS layer, nghttp2, and the garbage of an external
// string per header value); this costs a few. What a gRPC server needs is all here: flow
// control both ways, SETTINGS, PING (and keepalive pings of our own), GOAWAY, RST_STREAM,
// CONTINUATION, padding, the stream limit. Server push, priorities and HTTP/1.1 upgrade are not.
import assert from 'node:assert';
import type net from 'node:net';
import type { Duplex } from 'node:stream';
import {
  DEFAULT_MAX_FRAME_BYTES,
  DEFAULT_WINDOW_BYTES,
  ErrorCode,
  FLAG_ACK,
  FLAG_END_HEADERS,
  FLAG_END_STREAM,
  FLAG_PADDED,
  FRAME_HEADER_BYTES,
  FrameType,
  MAX_FRAME_BYTES_CEILING,
  MAX_WINDOW_BYTES,
  PREFACE,
  Setting,
  frame,
  frameHeader,
  u32Frame,
} from './frames';
import { responsePool } from '../runtime/buffer_pool';
import { SlotMap } from '../runtime/slot_map';
import { stripScheme } from './authority';
import { ConnectionError, FrameSplitter, HeaderBlockCollector, unpad, type FrameSink, type HeaderBlock } from './frame_reader';
import { FrozenHeaderEncoder, HpackDecoder, HpackError, type OutgoingValue } from './hpack';
import { H2Stream, type StreamOwner } from './stream';
import { TokenBucket } from './token_bucket';

/** Request headers as Node's http2 gives them: lowercase names, repeated fields as arrays. */
export type IncomingHeaders = Record<string, string | string[] | undefined>;

export interface H2ConnectionOptions {
  /** A new stream with its request headers; the handler owns it from here. */
  onStream: (stream: H2Stream, headers: IncomingHeaders) => void;
  /** SETTINGS_MAX_CONCURRENT_STREAMS; streams beyond it are refused. */
  maxConcurrentStreams?: number;
  /** Our PING every this many ms of the connection's life (0 = never); grpc.keepalive_time_ms. */
  keepaliveIntervalMs?: number;
  /** How long a keepalive PING may go unanswered before the connection is dropped. */
  keepaliveTimeoutMs?: number;
  /**
   * grpc-go's keepalive enforcement, as etcd configures it (--grpc-keepalive-min-time, pings
   * without an open stream not permitted): absent, every PING is answered and nothing else.
   */
  pingPolicy?: PingPolicy;
  /** Called once when the connection has ended, for whatever reason. */
  onClose?: (err: Error | undefined) => void;
  /** Connection-level protocol problems, for a debug log. */
  onProtocolError?: (message: string) => void;
  /** The connection was cut off for going over one of its budgets (for a metric). */
  onCutOff?: (reason: CutOffReason) => void;
}

/**
 * Why a connection was cut off (GOAWAY ENHANCE_YOUR_CALM, or dropped when not even that can reach
 * the peer): a fixed set, so that it can label a metric.
 */
export type CutOffReason =
  /** More than MAX_QUEUED_CONTROL_FRAMES control frames (its SETTINGS and PING ACKs) left unread. */
  | 'control_frames'
  /** More than MAX_UNREAD_OUTPUT_BYTES of output left unread. */
  | 'unread_output'
  /** Streams reset before they finished faster than the reset budget allows (rapid reset). */
  | 'rapid_reset'
  /** Frames that do nothing (empty DATA, PRIORITY, unknown types...) faster than their budget allows. */
  | 'empty_frames'
  /** A header block over its bounds (bytes, CONTINUATION frames, decoded size). */
  | 'header_block'
  /** PINGs more often than the keepalive policy allows (grpc-go's too_many_pings). */
  | 'pings';

/** A budget ran out: a connection error (ENHANCE_YOUR_CALM) that says which one. */
export class BudgetExceeded extends ConnectionError {
  constructor(
    readonly reason: CutOffReason,
    message: string,
  ) {
    super(ErrorCode.ENHANCE_YOUR_CALM, message);
  }
}

export interface PingPolicy {
  /** Shortest gap between a client's PINGs while it has streams open. */
  minTimeMs: number;
  /** Whether PINGs are expected with no stream open (else the gap is PING_GAP_WITHOUT_STREAMS_MS). */
  permitWithoutStream: boolean;
}

/** grpc-go: PINGs too soon (a strike each) tolerated before the connection is sent away. */
export const MAX_PING_STRIKES = 2;
/** grpc-go's defaultPingTimeout: the gap expected between PINGs with no stream open when those are not permitted. */
export const PING_GAP_WITHOUT_STREAMS_MS = 2 * 60 * 60 * 1000;
/** The GOAWAY's debug data, which grpc-go and grpc-js clients read to back their keepalive off. */
export const TOO_MANY_PINGS = 'too_many_pings';

/** Receive window we give each stream (SETTINGS_INITIAL_WINDOW_SIZE): a whole 1.5 MiB request in flight. */
export const STREAM_WINDOW_BYTES = 2 * 1024 * 1024;
/** Receive window of the whole connection: bounds what a connection can have buffered with us. */
export const CONNECTION_WINDOW_BYTES = 16 * 1024 * 1024;
/** Decoded header list bound (SETTINGS_MAX_HEADER_LIST_SIZE: names, values and 32 bytes per field). */
export const MAX_HEADER_LIST_BYTES = 64 * 1024;
/** Our DATA frames never exceed the protocol's default frame size, whatever the peer allows. */
const DATA_FRAME_BYTES = DEFAULT_MAX_FRAME_BYTES;
/**
 * Bytes waiting in the socket beyond which DATA is not framed until it drains; control frames
 * still go. A peer that stops reading and keeps sending PINGs or SETTINGS piles up only those,
 * and is dropped at MAX_UNREAD_OUTPUT_BYTES.
 */
const SOCKET_HIGH_WATER_BYTES = 256 * 1024;
/**
 * What one stream may send per pass of pumpData before the streams behind it get their turn (one
 * DATA frame, as grpc-go's writer gives each stream per turn).
 */
const SEND_QUANTUM_BYTES = DATA_FRAME_BYTES;
/** Passes per flush (the socket's high-water mark usually ends a flush first); the next turn goes on. */
const MAX_SEND_PASSES = 64;
/**
 * Output the kernel has not taken past which the connection is dropped outright (no GOAWAY could
 * get through). Reading stops long before (READ_PAUSE_UNSENT_BYTES); this catches output made
 * without reading anything more (responses to requests already read).
 */
const MAX_UNREAD_OUTPUT_BYTES = 16 * 1024 * 1024;
/**
 * Output not yet taken by the kernel (our queue plus the socket's) past which we stop reading the
 * connection until the socket drains: a peer that does not read what we send cannot make us make
 * more (grpc-go's server stops reading while its queue of SETTINGS/PING ACKs and RST_STREAMs is
 * full; its own bound is 50 frames). DATA stops being framed at SOCKET_HIGH_WATER_BYTES already,
 * so an honest client reading a large response never gets here; a client that stopped reading
 * is held back by TCP instead of by our memory.
 */
export const READ_PAUSE_UNSENT_BYTES = 1024 * 1024;
/** Unsent output below which a connection paused by READ_PAUSE_UNSENT_BYTES is read again. */
const READ_RESUME_UNSENT_BYTES = READ_PAUSE_UNSENT_BYTES / 2;
/**
 * Control frames (all but HEADERS, CONTINUATION and DATA: SETTINGS and PING ACKs, RST_STREAM,
 * WINDOW_UPDATE, our PINGs) queued and not yet taken by the kernel, past which the connection is
 * cut off: Go's net/http2 maxQueuedControlFrames. Every SETTINGS or PING a peer sends makes us
 * queue an ACK; one that sent them without reading any made us keep them all (~500 MB from one
 * connection, each 9-byte ACK in a socket write of its own). Honest peers read their ACKs: the
 * count stays near 0. 10,000 ACKs are ~170 KB, below READ_PAUSE_UNSENT_BYTES: such a flood is
 * cut off before reading would pause.
 */
export const MAX_QUEUED_CONTROL_FRAMES = 10_000;
/**
 * Control frames queued by one read past which they are written at once instead of at the end of
 * the loop's turn: several reads can come in one turn, and their ACKs, not yet offered to the
 * kernel, must not count as unread (a peer reading them all could be cut off). A 64 KiB read
 * holds at most ~7300 frames: the count stays under MAX_QUEUED_CONTROL_FRAMES until the kernel
 * stops taking them. gRPC clients send a few per connection.
 */
const FLUSH_AT_QUEUED_CONTROL_FRAMES = 1024;
/**
 * Rapid reset (CVE-2023-44487): a client opening streams and resetting them at once makes us start
 * and abort a handler per stream at no cost to itself. Each stream the client resets while it is
 * still open here (its handler not finished), and each stream we reset because of what the client
 * sent (MadeYouReset, CVE-2025-8671: a zero or overflowing WINDOW_UPDATE, DATA past the window),
 * takes a token from a bucket of this many, refilled at RESET_BUDGET_REFILL_STREAMS_PER_SEC:
 * nghttp2's default stream reset rate limit (what Node's http2, and so every grpc-js server, runs
 * with), which counts every RST_STREAM received. Empty, the connection is cut off.
 */
export const RESET_BUDGET_BURST_STREAMS = 1000;
export const RESET_BUDGET_REFILL_STREAMS_PER_SEC = 33;
/**
 * Frames that make us work and do nothing (nghttp2's "glitches"): DATA without data or
 * END_STREAM, empty CONTINUATIONs, header blocks without fields or for closed streams, PRIORITY,
 * SETTINGS and PING ACKs, unknown frame types. One connection sent 60M empty DATA frames, taking
 * the event loop from the others. A bucket of this many, refilled at
 * GLITCH_BUDGET_REFILL_FRAMES_PER_SEC: nghttp2's default glitch rate limit. gRPC clients send
 * none of these but the ACKs of our SETTINGS and keepalive PINGs.
 */
export const GLITCH_BUDGET_BURST_FRAMES = 10_000;
export const GLITCH_BUDGET_REFILL_FRAMES_PER_SEC = 330;
/**
 * After an error GOAWAY, how long the socket stays open once the GOAWAY is in the kernel, reading
 * (and dropping) what the peer still sends, so that the close is a FIN the peer reads after the
 * GOAWAY and not a reset that could discard it: Go's goAwayTimeout. Also how long the peer may
 * take no bytes at all before the GOAWAY has gone (a peer that never reads is then dropped).
 */
export const GOAWAY_LINGER_MS = 1000;
/**
 * What is read (and dropped) after an error GOAWAY, at most: a peer still flooding after it would
 * otherwise keep us reading at full speed for GOAWAY_LINGER_MS (a GB on loopback). Past it,
 * reading stops until the close.
 */
const GOAWAY_DRAIN_MAX_BYTES = 1024 * 1024;
/** After an error GOAWAY, the longest the socket stays open, however slowly the peer reads. */
const GOAWAY_MAX_LINGER_MS = 10_000;
/**
 * The prototype of request header objects: an empty object with no prototype, so nothing of
 * Object.prototype shows through (a header named "constructor" or "__proto__" is only a header),
 * as with Node's null-prototype header objects. Unlike Object.create(null), which V8 keeps in
 * dictionary mode, objects made from it get fast properties, and a client sending the same fields
 * in the same order gets the same shape every request (measured with etcd's benchmark: the
 * header object was ~1.7 KB of allocation per request as a dictionary).
 */
const HEADERS_PROTO: object = Object.freeze(Object.create(null) as object);

/** Every SETTINGS ACK is the same 9 bytes: one buffer for all (an ACK queued costs no allocation). */
const SETTINGS_ACK = frame(FrameType.SETTINGS, FLAG_ACK, 0, Buffer.alloc(0));

/** Longest a PING ACK waits for a response to travel with (queueAck). */
export const PING_ACK_DELAY_MS = 5;
/** One write gathers frames up to this size into one buffer; beyond it, a vectored write. */
const COALESCE_BYTES = 64 * 1024;
/** Buffers under this size are copied together in a large write (gatherSmall); larger ones go as they are. */
const GATHER_PIECE_BYTES = 1024;

export class H2Connection implements StreamOwner, FrameSink {
  private readonly streams: SlotMap<number, H2Stream>;
  private readonly decoder = new HpackDecoder();
  private readonly encoder = new FrozenHeaderEncoder();
  private readonly maxConcurrentStreams: number;
  private lastStreamId = 0;
  private readonly frames = new FrameSplitter(this, PREFACE);
  private readonly headerBlocks = new HeaderBlockCollector();

  // Flow control. Receive: what the peer may still send us before our next WINDOW_UPDATE.
  private recvWindow = DEFAULT_WINDOW_BYTES;
  private recvUnacked = 0;
  // Send: the peer's windows.
  private sendWindow = DEFAULT_WINDOW_BYTES;
  private peerInitialWindow = DEFAULT_WINDOW_BYTES;
  /**
   * Streams with DATA or an end queued, in the order they asked; a stream is in it at most once
   * (its sendQueued flag). An array, not a Set (nor a Map for `streams`): an insert and a delete
   * per request made V8's tables keep finished requests alive through young collections (see
   * src/runtime/slot_map.ts).
   */
  private readonly sending: H2Stream[] = [];
  /** Entries of `sending` still queued (the rest were released while waiting: dropped lazily). */
  private sendingQueued = 0;
  private pumping = false;
  /** Streams that sent DATA in this flush: their 'drain' is checked once it is written. */
  private readonly drainCheck: H2Stream[] = [];

  private out: Buffer[] = [];
  private outBytes = 0;
  /** Pooled buffers whose last bytes are in `out`: handed back once the write carrying them is done. */
  private readonly lentInOut: Buffer[] = [];
  private flushScheduled = false;
  /** Sends a held PING ACK when no response has taken it along (queueAck). */
  private ackTimer: NodeJS.Timeout | undefined;
  /** A WINDOW_UPDATE in the chunk being read let held DATA go: send it before returning. */
  private windowOpened = false;
  /**
   * Assigned in the constructor, not by an initializer: V8 treats a field only its initializer
   * has written as a constant of the class and optimized code relies on that, so the first
   * connection to close threw away the whole request path's optimized code (~30 functions; the
   * next few thousand requests ran slow again). The class field's own `undefined` first makes the
   * constructor's store an ordinary write. (scripts/bench/README.md, "Fields written late".)
   */
  private closed: boolean;
  private goawaySent = false;

  // Budgets (see MAX_QUEUED_CONTROL_FRAMES and the ones after it).
  /** Control frames in `out`, and in socket writes the kernel has not finished. */
  private controlQueued = 0;
  private controlInSocket = 0;
  /** Reading stopped until the socket drains (READ_PAUSE_UNSENT_BYTES). Set in the constructor (see `closed`). */
  private readPaused: boolean;
  private readonly resetBudget: TokenBucket;
  private readonly glitchBudget: TokenBucket;
  /** Closes the socket after an error GOAWAY (lingerAfterGoaway). Set in the constructor (see `closed`). */
  private lingerTimer: NodeJS.Timeout | undefined;

  private keepaliveTimer: NodeJS.Timeout | undefined;
  private keepaliveDeadline: NodeJS.Timeout | undefined;

  // The client's PINGs, judged by opts.pingPolicy (grpc-go's server does the same).
  /** When the last PING came (performance.now()), or -1 before the first. */
  private lastPingAtMs = -1;
  private pingStrikes = 0;
  /** We sent HEADERS or DATA since the last PING: the next one is not judged (a bandwidth probe answers our data). */
  private sentSincePing = false;

  readonly session: { readonly socket: Duplex };

  constructor(
    readonly socket: Duplex,
    private readonly opts: H2ConnectionOptions,
  ) {
    this.session = { socket };
    this.closed = false;
    this.readPaused = false;
    this.lingerTimer = undefined;
    const nowMs = performance.now();
    this.resetBudget = new TokenBucket(RESET_BUDGET_BURST_STREAMS, RESET_BUDGET_REFILL_STREAMS_PER_SEC, nowMs);
    this.glitchBudget = new TokenBucket(GLITCH_BUDGET_BURST_FRAMES, GLITCH_BUDGET_REFILL_FRAMES_PER_SEC, nowMs);
    this.maxConcurrentStreams = opts.maxConcurrentStreams ?? 2 ** 32 - 1;
    assert(Number.isSafeInteger(this.maxConcurrentStreams) && this.maxConcurrentStreams >= 0, 'bad maxConcurrentStreams');
    this.streams = new SlotMap<number, H2Stream>(Math.max(1, this.maxConcurrentStreams));
    // Our SETTINGS first, then the connection window raised past the protocol's default.
    const settings: [Setting, number][] = [
      [Setting.ENABLE_PUSH, 0],
      [Setting.INITIAL_WINDOW_SIZE, STREAM_WINDOW_BYTES],
      [Setting.MAX_HEADER_LIST_SIZE, MAX_HEADER_LIST_BYTES],
    ];
    if (opts.maxConcurrentStreams !== undefined) settings.unshift([Setting.MAX_CONCURRENT_STREAMS, this.maxConcurrentStreams]);
    const payload = Buffer.allocUnsafe(6 * settings.length);
    settings.forEach(([id, v], i) => {
      payload.writeUInt16BE(id, 6 * i);
      payload.writeUInt32BE(v, 6 * i + 2);
    });
    this.queueControl(frame(FrameType.SETTINGS, 0, 0, payload));
    this.queueControl(u32Frame(FrameType.WINDOW_UPDATE, 0, CONNECTION_WINDOW_BYTES - DEFAULT_WINDOW_BYTES));
    this.recvWindow = CONNECTION_WINDOW_BYTES;

    // Small frames must not wait for Nagle's algorithm (Node's http2 sets this too).
    (socket as Partial<Pick<net.Socket, 'setNoDelay'>>).setNoDelay?.(true);
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    socket.on('drain', () => this.scheduleFlush());
    socket.on('error', (e: Error) => this.teardown(e));
    socket.on('close', () => this.teardown(undefined));
    socket.on('end', () => this.teardown(undefined));
    this.startKeepalive();
  }

  /** Feeds bytes read before the connection took the socket (the sniffed preface). */
  feed(head: Buffer): void {
    if (head.length > 0) this.onData(head);
  }

  // ---- StreamOwner ----

  sendHeaders(stream: H2Stream, headers: Readonly<Record<string, OutgoingValue>>, endStream: boolean): void {
    if (this.closed) return;
    const block = this.encoder.encode(headers);
    this.sentSincePing = true;
    // Headers must not overtake DATA already queued for the stream (trailers come after it).
    if (endStream && stream.outQueue.length !== 0) assert.fail(`stream ${stream.id}: END_STREAM headers with DATA queued`);
    let flags = endStream ? FLAG_END_STREAM : 0;
    if (block.length <= DATA_FRAME_BYTES) {
      this.queue(frameHeader(block.length, FrameType.HEADERS, flags | FLAG_END_HEADERS, stream.id), block);
      return;
    }
    // Larger blocks (huge trailing metadata) go out as HEADERS + CONTINUATION frames.
    for (let at = 0; at < block.length; at += DATA_FRAME_BYTES) {
      const part = block.subarray(at, at + DATA_FRAME_BYTES);
      const last = at + DATA_FRAME_BYTES >= block.length;
      const type = at === 0 ? FrameType.HEADERS : FrameType.CONTINUATION;
      this.queue(frameHeader(part.length, type, flags | (last ? FLAG_END_HEADERS : 0), stream.id), part);
      flags = 0;
    }
  }

  wakeSender(stream: H2Stream): void {
    this.queueToSend(stream);
    this.scheduleFlush();
  }

  private queueToSend(stream: H2Stream): void {
    if (stream.sendQueued) return;
    // Streams released while waiting (a client resetting them while the connection window is
    // shut) would otherwise pile up here until the window opens.
    const dead = this.sending.length - this.sendingQueued;
    if (!this.pumping && dead > 64 && dead > this.sendingQueued) this.dropReleased();
    stream.sendQueued = true;
    this.sendingQueued++;
    this.sending.push(stream);
  }

  private unqueue(stream: H2Stream): void {
    if (!stream.sendQueued) return;
    stream.sendQueued = false;
    this.sendingQueued--;
  }

  private dropReleased(): void {
    const list = this.sending;
    let kept = 0;
    for (let i = 0; i < list.length; i++) if (list[i]!.sendQueued) list[kept++] = list[i]!;
    list.length = kept;
    if (kept !== this.sendingQueued) assert.fail(`send queue holds ${kept} queued streams, counted ${this.sendingQueued}`);
  }

  consumed(stream: H2Stream, bytes: number): void {
    if (this.closed || bytes === 0) return;
    this.creditConnection(bytes);
    if (stream.closed) return;
    stream.recvUnacked += bytes;
    if (stream.recvUnacked >= STREAM_WINDOW_BYTES / 2) {
      this.queueControl(u32Frame(FrameType.WINDOW_UPDATE, stream.id, stream.recvUnacked));
      stream.recvWindow += stream.recvUnacked;
      stream.recvUnacked = 0;
    }
  }

  resetStream(stream: H2Stream, code: number): void {
    if (this.closed) return;
    this.queueControl(u32Frame(FrameType.RST_STREAM, stream.id, code));
  }

  released(stream: H2Stream): void {
    this.streams.delete(stream.id);
    // A released stream is closed and never queued again: pumpData drops it from `sending`.
    this.unqueue(stream);
  }

  // ---- Receiving ----

  private onData(chunk: Buffer): void {
    if (this.closed) return;
    try {
      this.frames.feed(chunk);
    } catch (e) {
      if (e instanceof BudgetExceeded) return this.cutOff(e.reason, e.message);
      // The header block bounds (frame_reader.ts, endHeaderBlock) are budgets too.
      if (e instanceof ConnectionError && e.code === ErrorCode.ENHANCE_YOUR_CALM) return this.cutOff('header_block', e.message);
      if (e instanceof ConnectionError) return this.goaway(e.code, e.message);
      if (e instanceof HpackError) return this.goaway(ErrorCode.COMPRESSION_ERROR, e.message);
      throw e;
    }
    if (this.closed) return;
    // A chunk of SETTINGS or PINGs queues an ACK each: checked once per chunk (a 64 KiB read
    // holds at most ~7300 frames), before they are written.
    if (this.controlQueued + this.controlInSocket > MAX_QUEUED_CONTROL_FRAMES) {
      return this.cutOff('control_frames', 'too many control frames unread');
    }
    if (!this.readPaused && this.socket.writableLength + this.outBytes > READ_PAUSE_UNSENT_BYTES) {
      // Resumed by flush once the socket has drained (its 'drain' schedules one).
      this.readPaused = true;
      this.socket.pause();
    }
    if (this.controlQueued >= FLUSH_AT_QUEUED_CONTROL_FRAMES) this.flush();
    if (this.windowOpened && !this.closed) {
      // A large response waits a round trip per window; on a busy loop the next turn can be
      // milliseconds away, so the held DATA goes now, as nghttp2 sends after each read.
      this.windowOpened = false;
      this.flush();
    }
  }

  /** FrameSink: the splitter's frames; false once the connection has closed. */
  receiveFrame(type: number, flags: number, streamId: number, payload: Buffer): boolean {
    this.onFrame(type, flags, streamId, payload);
    return !this.closed;
  }

  private onFrame(type: number, flags: number, streamId: number, payload: Buffer): void {
    if (this.headerBlocks.open && type !== FrameType.CONTINUATION) {
      throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'expected CONTINUATION');
    }
    switch (type) {
      case FrameType.DATA:
        return this.onDataFrame(flags, streamId, payload);
      case FrameType.HEADERS:
        return this.onHeaders(flags, streamId, payload);
      case FrameType.CONTINUATION:
        return this.onContinuation(flags, streamId, payload);
      case FrameType.PRIORITY:
        if (streamId === 0) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'PRIORITY on stream 0');
        // Priorities are not acted on here: the frame is work for nothing.
        this.spendGlitch();
        return;
      case FrameType.RST_STREAM: {
        if (streamId === 0 || payload.length !== 4) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'bad RST_STREAM');
        if (streamId > this.lastStreamId) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'RST_STREAM on an idle stream');
        const s = this.streams.get(streamId);
        if (s === undefined) return;
        // Reset while its handler still runs: what rapid reset does (a stream we had finished
        // costs nothing more to forget).
        this.spendReset();
        s.aborted(payload.readUInt32BE(0));
        return;
      }
      case FrameType.SETTINGS:
        return this.onSettings(flags, streamId, payload);
      case FrameType.PUSH_PROMISE:
        throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'PUSH_PROMISE from a client');
      case FrameType.PING:
        if (streamId !== 0 || payload.length !== 8) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'bad PING');
        if (flags & FLAG_ACK) {
          this.spendGlitch();
          this.onPingAck();
        } else {
          this.queueAck(frame(FrameType.PING, FLAG_ACK, 0, payload));
          if (this.opts.pingPolicy !== undefined) this.judgePing(this.opts.pingPolicy);
        }
        return;
      case FrameType.GOAWAY:
        // The client is leaving; its open streams finish, and it closes the socket.
        if (streamId !== 0) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'GOAWAY on a stream');
        return;
      case FrameType.WINDOW_UPDATE:
        return this.onWindowUpdate(streamId, payload);
      default:
        // Unknown frame types are ignored (section 4.1), within the budget of frames that do nothing.
        this.spendGlitch();
        return;
    }
  }

  private onDataFrame(flags: number, streamId: number, payload: Buffer): void {
    if (streamId === 0) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'DATA on stream 0');
    if (streamId > this.lastStreamId) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'DATA on an idle stream');
    // No data (padding at most) and no END_STREAM: a frame that does nothing.
    if ((flags & FLAG_END_STREAM) === 0 && (payload.length === 0 || ((flags & FLAG_PADDED) !== 0 && payload[0]! + 1 >= payload.length))) {
      this.spendGlitch();
    }
    // Flow control counts the whole payload, padding included.
    if (payload.length > this.recvWindow) throw new ConnectionError(ErrorCode.FLOW_CONTROL_ERROR, 'connection window exceeded');
    this.recvWindow -= payload.length;
    const stream = this.streams.get(streamId);
    if (stream === undefined) {
      // A stream we already closed or reset: frames in flight still count, then are dropped.
      this.creditConnection(payload.length);
      return;
    }
    if (payload.length > stream.recvWindow) {
      this.spendReset();
      this.queueControl(u32Frame(FrameType.RST_STREAM, streamId, ErrorCode.FLOW_CONTROL_ERROR));
      stream.aborted(ErrorCode.FLOW_CONTROL_ERROR);
      this.creditConnection(payload.length);
      return;
    }
    stream.recvWindow -= payload.length;
    const data = unpad(flags, payload, 0);
    const padding = payload.length - data.length;
    if (padding > 0) {
      this.creditConnection(padding);
      stream.recvWindow += padding;
    }
    stream.receive(data);
    if (flags & FLAG_END_STREAM) stream.receiveEnd();
  }

  private creditConnection(bytes: number): void {
    this.recvUnacked += bytes;
    if (this.recvUnacked >= CONNECTION_WINDOW_BYTES / 2) {
      this.queueControl(u32Frame(FrameType.WINDOW_UPDATE, 0, this.recvUnacked));
      this.recvWindow += this.recvUnacked;
      this.recvUnacked = 0;
    }
  }

  private onHeaders(flags: number, streamId: number, payload: Buffer): void {
    if (streamId === 0) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'HEADERS on stream 0');
    const hb = this.headerBlocks.headers(flags, streamId, payload);
    if (hb !== undefined) this.endHeaderBlock(hb);
  }

  private onContinuation(flags: number, streamId: number, payload: Buffer): void {
    if (payload.length === 0) this.spendGlitch();
    const hb = this.headerBlocks.continuation(flags, streamId, payload);
    if (hb !== undefined) this.endHeaderBlock(hb);
  }

  private endHeaderBlock(hb: HeaderBlock): void {
    const block = hb.block;
    const headers = Object.create(HEADERS_PROTO) as IncomingHeaders;
    let listBytes = 0;
    // Decoded even for a stream we refuse: the HPACK table must see every block.
    const fields = this.decoder.decode(block);
    // A block without fields is no request and no trailers (gRPC clients send none).
    if (fields.length === 0) this.spendGlitch();
    for (let i = 0; i < fields.length; i += 2) {
      const name = fields[i]!;
      const value = fields[i + 1]!;
      listBytes += name.length + value.length + 32;
      const prev = headers[name];
      if (prev === undefined) headers[name] = value;
      else if (Array.isArray(prev)) prev.push(value);
      else headers[name] = [prev, value];
    }
    if (listBytes > MAX_HEADER_LIST_BYTES) throw new ConnectionError(ErrorCode.ENHANCE_YOUR_CALM, 'header list too large');
    const id = hb.streamId;
    const existing = this.streams.get(id);
    if (existing !== undefined) {
      // Trailers from the client: gRPC has none to read, but they may end the stream.
      if ((hb.flags & FLAG_END_STREAM) === 0) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'second HEADERS without END_STREAM');
      existing.receiveEnd();
      return;
    }
    if (id % 2 === 0 || id <= this.lastStreamId) {
      // Closed streams (ours already reset them) may still see the client's trailers.
      if (id <= this.lastStreamId && id % 2 === 1) return this.spendGlitch();
      throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, `bad stream id ${id}`);
    }
    this.lastStreamId = id;
    if (this.goawaySent) return;
    if (this.streams.size >= this.maxConcurrentStreams) {
      this.queueControl(u32Frame(FrameType.RST_STREAM, id, ErrorCode.REFUSED_STREAM));
      return;
    }
    // Go clients dialled with a URL send the scheme in :authority; it is not part of one.
    const authority = headers[':authority'];
    const stripped = typeof authority === 'string' ? stripScheme(authority) : undefined;
    if (stripped !== undefined) headers[':authority'] = stripped;
    const stream = new H2Stream(id, this, this.peerInitialWindow, STREAM_WINDOW_BYTES);
    this.streams.set(id, stream);
    this.opts.onStream(stream, headers);
    if (hb.flags & FLAG_END_STREAM) stream.receiveEnd();
  }

  private onSettings(flags: number, streamId: number, payload: Buffer): void {
    if (streamId !== 0) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'SETTINGS on a stream');
    if (flags & FLAG_ACK) {
      if (payload.length !== 0) throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, 'SETTINGS ack with a payload');
      // We send one SETTINGS: an honest peer sends one ACK.
      this.spendGlitch();
      return;
    }
    if (payload.length % 6 !== 0) throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, 'SETTINGS payload not a multiple of 6');
    for (let at = 0; at < payload.length; at += 6) {
      const id = payload.readUInt16BE(at);
      const value = payload.readUInt32BE(at + 2);
      if (id === Setting.INITIAL_WINDOW_SIZE) {
        if (value > MAX_WINDOW_BYTES) throw new ConnectionError(ErrorCode.FLOW_CONTROL_ERROR, 'initial window too large');
        const delta = value - this.peerInitialWindow;
        this.peerInitialWindow = value;
        for (const s of this.streams.values()) {
          s.sendWindow += delta;
          if (s.sendWindow > MAX_WINDOW_BYTES) throw new ConnectionError(ErrorCode.FLOW_CONTROL_ERROR, 'stream window overflow');
          if (delta > 0 && s.outQueue.length > 0) this.queueToSend(s);
        }
      } else if (id === Setting.MAX_FRAME_SIZE) {
        if (value < DEFAULT_MAX_FRAME_BYTES || value > MAX_FRAME_BYTES_CEILING) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'bad max frame size');
      } else if (id === Setting.ENABLE_PUSH) {
        if (value > 1) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'bad enable push');
      }
      else if (id === Setting.HEADER_TABLE_SIZE) {
        // Blocks encoded from here on follow this SETTINGS' ACK (queued below) on the wire.
        this.encoder.setPeerTableSize(value);
      }
      // The rest do not bind a server.
    }
    this.queueControl(SETTINGS_ACK);
  }

  private onWindowUpdate(streamId: number, payload: Buffer): void {
    if (payload.length !== 4) throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, 'bad WINDOW_UPDATE');
    const increment = payload.readUInt32BE(0) & 0x7fffffff;
    if (streamId === 0) {
      if (increment === 0) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'zero window increment');
      this.sendWindow += increment;
      if (this.sendWindow > MAX_WINDOW_BYTES) throw new ConnectionError(ErrorCode.FLOW_CONTROL_ERROR, 'connection window overflow');
      if (this.sendingQueued > 0) this.windowOpened = true;
      return;
    }
    const s = this.streams.get(streamId);
    if (s === undefined) return;
    if (increment === 0) {
      this.spendReset();
      this.queueControl(u32Frame(FrameType.RST_STREAM, streamId, ErrorCode.PROTOCOL_ERROR));
      s.aborted(ErrorCode.PROTOCOL_ERROR);
      return;
    }
    s.sendWindow += increment;
    if (s.sendWindow > MAX_WINDOW_BYTES) {
      this.spendReset();
      this.queueControl(u32Frame(FrameType.RST_STREAM, streamId, ErrorCode.FLOW_CONTROL_ERROR));
      s.aborted(ErrorCode.FLOW_CONTROL_ERROR);
      return;
    }
    if (s.outQueue.length > 0 || s.localEnding) {
      this.queueToSend(s);
      this.windowOpened = true;
    }
  }

  // ---- Sending ----

  private queue(a: Buffer, b?: Buffer): void {
    this.out.push(a);
    this.outBytes += a.length;
    if (b !== undefined && b.length > 0) {
      this.out.push(b);
      this.outBytes += b.length;
    }
    // Frames queued while pumpData runs (a stream's trailers) leave in the write that flush is
    // about to make. Scheduling another flush for them left an empty one on the next turn, and a
    // PING arriving before it went out alone instead of with the next response (queueAck).
    if (!this.pumping) this.scheduleFlush();
  }

  /** A control frame (see MAX_QUEUED_CONTROL_FRAMES): counted until the kernel has taken it. */
  private queueControl(f: Buffer): void {
    this.controlQueued++;
    this.queue(f);
  }

  /**
   * A PING ACK waits (at most PING_ACK_DELAY_MS) for the next flush instead of taking a socket
   * write of its own. Go's gRPC client sends a PING (its bandwidth probe) each time a response
   * reaches it with no probe outstanding: with one request or one watch event per round trip, that
   * is a PING per response, and answering each on its own doubled the writes of those connections
   * (a loopback write costs the loop 20-40 µs here). Riding on the next response, the ACK also
   * slows the client's probing to that connection's own pace. Keepalive PINGs (seconds of timeout)
   * do not notice the delay.
   */
  private queueAck(ack: Buffer): void {
    this.controlQueued++;
    this.out.push(ack);
    this.outBytes += ack.length;
    if (this.flushScheduled || this.ackTimer !== undefined || this.closed) return;
    this.ackTimer = setTimeout(() => {
      this.ackTimer = undefined;
      if (this.outBytes > 0) this.scheduleFlush();
    }, PING_ACK_DELAY_MS);
    this.ackTimer.unref();
  }

  private scheduleFlush(): void {
    if (this.flushScheduled || this.closed) return;
    this.flushScheduled = true;
    // After the turn's other work, so that every response of one turn leaves in one write.
    setImmediate(() => this.flush());
  }

  private flush(): void {
    this.flushScheduled = false;
    if (this.ackTimer !== undefined) {
      clearTimeout(this.ackTimer);
      this.ackTimer = undefined;
    }
    if (this.closed) return;
    // Control frames queued by handlers (RST_STREAMs) since the last read count too.
    if (this.controlQueued + this.controlInSocket > MAX_QUEUED_CONTROL_FRAMES) {
      this.cutOff('control_frames', 'too many control frames unread');
      return;
    }
    const callbacks: (() => void)[] = [];
    if (this.socket.writableLength < SOCKET_HIGH_WATER_BYTES) this.pumpData(callbacks);
    if (this.outBytes > 0) {
      const out = this.out;
      const bytes = this.outBytes;
      this.out = [];
      this.outBytes = 0;
      // Writes complete in order: the last one's callback (also called when the socket is
      // destroyed first) means no write holds a view of these buffers any more, and that the
      // kernel has taken its control frames.
      const lent = this.lentInOut.length === 0 ? null : this.lentInOut.splice(0);
      const control = this.controlQueued;
      let written: (() => void) | undefined;
      if (control === 0) {
        written = lent === null ? undefined : () => giveBackAll(lent);
      } else {
        this.controlQueued = 0;
        this.controlInSocket += control;
        written = () => {
          this.controlInSocket -= control;
          if (lent !== null) giveBackAll(lent);
        };
      }
      if (out.length === 1) {
        this.socket.write(out[0], written);
      } else if (bytes <= COALESCE_BYTES) {
        this.socket.write(Buffer.concat(out, bytes), written);
      } else {
        const pieces = gatherSmall(out);
        this.socket.cork();
        const last = pieces.length - 1;
        for (let i = 0; i < last; i++) this.socket.write(pieces[i]);
        this.socket.write(pieces[last], written);
        this.socket.uncork();
      }
      if (this.socket.writableLength > MAX_UNREAD_OUTPUT_BYTES) {
        // No GOAWAY would get past what is waiting: dropped.
        this.opts.onCutOff?.('unread_output');
        this.teardown(new Error('peer does not read its frames'));
        return;
      }
    }
    for (const cb of callbacks) cb();
    for (const s of this.drainCheck.splice(0)) s.afterSend();
    if (this.readPaused && !this.closed && this.socket.writableLength + this.outBytes <= READ_RESUME_UNSENT_BYTES) {
      this.readPaused = false;
      this.socket.resume();
    }
  }

  /**
   * Moves queued DATA into frames while windows allow: passes over the streams in the order they
   * asked, each stream sending at most SEND_QUANTUM_BYTES per pass, so that a small response
   * queued behind a large one leaves in the first pass instead of after all of it (the large
   * one would otherwise take every byte of the connection's window for as long as it lasts).
   */
  private pumpData(callbacks: (() => void)[]): void {
    for (let pass = 0; pass < MAX_SEND_PASSES; pass++) {
      if (!this.pumpPass(callbacks) || this.closed) return;
    }
    // More to send with room for it: the next turn goes on (nothing else would call it).
    this.scheduleFlush();
  }

  /**
   * One pass of pumpData. Streams done sending leave `sending`, the others keep their place; a
   * stream queued while this runs (trailers) is reached in the same pass. Returns whether a
   * stream stopped at its quantum while the connection's window and the socket had room.
   */
  private pumpPass(callbacks: (() => void)[]): boolean {
    const list = this.sending;
    let stoppedAtQuantum = false;
    let kept = 0;
    let i = 0;
    this.pumping = true;
    try {
      for (; i < list.length; i++) {
        const s = list[i]!;
        if (!s.sendQueued || s.closed) {
          this.unqueue(s);
          continue;
        }
        let wrote = false;
        let quantum = SEND_QUANTUM_BYTES;
        while (s.outQueue.length > 0) {
          const head = s.outQueue[0]!;
          const room = Math.min(this.sendWindow, s.sendWindow, DATA_FRAME_BYTES, quantum);
          if (head.data.length > 0 && room <= 0) {
            if (quantum <= 0 && this.sendWindow > 0 && s.sendWindow > 0) stoppedAtQuantum = true;
            break;
          }
          const n = Math.min(head.data.length, room);
          // Most writes fit whole: no subarray objects for them.
          const whole = n === head.data.length;
          const chunk = whole ? head.data : head.data.subarray(0, n);
          const lastOfAll = whole && s.outQueue.length === 1 && s.localEnding && !s.waitForTrailers;
          if (n > 0 || lastOfAll) {
            this.sentSincePing = true;
            this.out.push(frameHeader(n, FrameType.DATA, lastOfAll ? FLAG_END_STREAM : 0, s.id));
            this.outBytes += FRAME_HEADER_BYTES;
            if (n > 0) {
              this.out.push(chunk);
              this.outBytes += n;
            }
          }
          this.sendWindow -= n;
          s.sendWindow -= n;
          s.outBytes -= n;
          quantum -= n;
          wrote = true;
          if (!whole) {
            head.data = head.data.subarray(n);
            continue;
          }
          s.outQueue.shift();
          if (head.pooled !== undefined) this.lentInOut.push(head.pooled);
          if (head.cb) {
            const cb = head.cb;
            callbacks.push(() => cb(null));
          }
          if (lastOfAll) {
            s.sentEnd();
            break;
          }
        }
        if (wrote) this.drainCheck.push(s);
        if (s.outQueue.length > 0 && !s.closed) {
          list[kept++] = s;
          if (this.sendWindow <= 0 || this.socket.writableLength + this.outBytes >= SOCKET_HIGH_WATER_BYTES) {
            i++;
            break;
          }
          continue;
        }
        this.unqueue(s);
        if (s.localEnding && !s.localClosed && !s.closed) {
          if (s.waitForTrailers) {
            s.readyToEnd();
          } else {
            // end() with nothing left to send: an empty END_STREAM DATA frame.
            this.out.push(frameHeader(0, FrameType.DATA, FLAG_END_STREAM, s.id));
            this.outBytes += FRAME_HEADER_BYTES;
            s.sentEnd();
          }
        }
        if (this.socket.writableLength + this.outBytes >= SOCKET_HIGH_WATER_BYTES) {
          i++;
          break;
        }
      }
    } finally {
      this.pumping = false;
      // Streams not reached keep their places after the ones kept (also when a handler threw:
      // the list stays free of duplicates). A teardown from inside (a handler's reaction to its
      // end) has emptied the list already.
      if (!this.closed) {
        while (i < list.length) list[kept++] = list[i++]!;
        list.length = kept;
      }
    }
    if (this.sendingQueued > list.length) assert.fail(`send queue of ${list.length} streams counts ${this.sendingQueued} queued`);
    return stoppedAtQuantum && this.sendWindow > 0 && this.socket.writableLength + this.outBytes < SOCKET_HIGH_WATER_BYTES;
  }

  // ---- Keepalive, errors, teardown ----

  private startKeepalive(): void {
    const interval = this.opts.keepaliveIntervalMs ?? 0;
    if (interval <= 0) return;
    this.keepaliveTimer = setInterval(() => {
      if (this.closed || this.keepaliveDeadline !== undefined) return;
      this.queueControl(frame(FrameType.PING, 0, 0, Buffer.alloc(8)));
      this.keepaliveDeadline = setTimeout(() => this.teardown(new Error('keepalive ping not answered')), this.opts.keepaliveTimeoutMs ?? 20_000);
      this.keepaliveDeadline.unref();
    }, interval);
    this.keepaliveTimer.unref();
  }

  private onPingAck(): void {
    if (this.keepaliveDeadline !== undefined) {
      clearTimeout(this.keepaliveDeadline);
      this.keepaliveDeadline = undefined;
    }
  }

  /** grpc-go's handlePing: a PING sooner than the policy allows is a strike; past MAX_PING_STRIKES, GOAWAY. */
  private judgePing(policy: PingPolicy): void {
    const nowMs = performance.now();
    const lastMs = this.lastPingAtMs;
    this.lastPingAtMs = nowMs;
    if (this.sentSincePing) {
      this.sentSincePing = false;
      this.pingStrikes = 0;
      return;
    }
    if (lastMs < 0) return;
    const gapMs = this.streams.size === 0 && !policy.permitWithoutStream ? PING_GAP_WITHOUT_STREAMS_MS : policy.minTimeMs;
    if (nowMs - lastMs < gapMs) this.pingStrikes++;
    if (this.pingStrikes > MAX_PING_STRIKES) this.cutOff('pings', TOO_MANY_PINGS);
  }

  // ---- Budgets ----

  /** A stream ended early by the client (see RESET_BUDGET_BURST_STREAMS); throws once over budget. */
  private spendReset(): void {
    if (!this.resetBudget.take(performance.now())) throw new BudgetExceeded('rapid_reset', 'too many streams reset');
  }

  /** A frame that does nothing (see GLITCH_BUDGET_BURST_FRAMES); throws once over budget. */
  private spendGlitch(): void {
    if (!this.glitchBudget.take(performance.now())) throw new BudgetExceeded('empty_frames', 'too many frames doing nothing');
  }

  /**
   * The peer went over a budget: GOAWAY ENHANCE_YOUR_CALM, then the socket closes. Queued
   * control frames are dropped first when they are what the peer did not read.
   */
  private cutOff(reason: CutOffReason, message: string): void {
    if (this.closed || this.goawaySent) return;
    this.opts.onCutOff?.(reason);
    if (reason === 'control_frames') {
      this.out = [];
      this.outBytes = 0;
    }
    this.goaway(ErrorCode.ENHANCE_YOUR_CALM, message);
  }

  /** A connection error: GOAWAY with `code`, then the socket ends once written (lingerAfterGoaway). */
  private goaway(code: ErrorCode, message: string): void {
    if (this.closed || this.goawaySent) return;
    this.goawaySent = true;
    if (code !== ErrorCode.NO_ERROR) this.opts.onProtocolError?.(message);
    const debug = Buffer.from(message, 'utf8').subarray(0, 256);
    const payload = Buffer.allocUnsafe(8 + debug.length);
    payload.writeUInt32BE(this.lastStreamId, 0);
    payload.writeUInt32BE(code, 4);
    debug.copy(payload, 8);
    const bytes = Buffer.concat([...this.out, frame(FrameType.GOAWAY, 0, 0, payload)]);
    this.out = [];
    this.outBytes = 0;
    this.socket.end(bytes);
    this.teardown(undefined);
    this.lingerAfterGoaway();
  }

  /**
   * After an error GOAWAY nothing more is read as frames, and a peer that keeps sending must not
   * keep the socket (nor our reads) busy: reading stops until the GOAWAY is in the kernel, then
   * what comes is read and dropped (GOAWAY_DRAIN_MAX_BYTES at most) for GOAWAY_LINGER_MS (Go's
   * goAwayTimeout: a close with unread bytes would be a reset, which can discard the GOAWAY before
   * the peer reads it), and the socket is destroyed. A peer that takes none of our bytes for GOAWAY_LINGER_MS before that (it never
   * reads) is dropped then, and none stays past GOAWAY_MAX_LINGER_MS. A peer that reads the
   * GOAWAY and closes its side ends it sooner ('end').
   */
  private lingerAfterGoaway(): void {
    const socket = this.socket;
    if (socket.destroyed) return;
    socket.pause();
    const startMs = performance.now();
    let unsent = socket.writableLength;
    const destroy = (): void => {
      this.lingerTimer = undefined;
      socket.destroy();
    };
    const check = (): void => {
      const now = socket.writableLength;
      if (now >= unsent || performance.now() - startMs >= GOAWAY_MAX_LINGER_MS) return destroy();
      unsent = now;
      this.lingerTimer = setTimeout(check, GOAWAY_LINGER_MS).unref();
    };
    this.lingerTimer = setTimeout(check, GOAWAY_LINGER_MS).unref();
    socket.once('finish', () => {
      if (this.lingerTimer !== undefined) clearTimeout(this.lingerTimer);
      if (socket.destroyed) return;
      let drained = 0;
      const drain = (chunk: Buffer): void => {
        drained += chunk.length;
        if (drained <= GOAWAY_DRAIN_MAX_BYTES) return;
        socket.off('data', drain);
        socket.pause();
      };
      socket.on('data', drain);
      socket.resume();
      this.lingerTimer = setTimeout(destroy, GOAWAY_LINGER_MS).unref();
    });
    socket.once('close', () => {
      if (this.lingerTimer !== undefined) clearTimeout(this.lingerTimer);
      this.lingerTimer = undefined;
    });
  }

  private teardown(err: Error | undefined): void {
    if (this.closed) return;
    this.closed = true;
    this.frames.clear();
    if (this.keepaliveTimer !== undefined) clearInterval(this.keepaliveTimer);
    if (this.keepaliveDeadline !== undefined) clearTimeout(this.keepaliveDeadline);
    if (this.ackTimer !== undefined) clearTimeout(this.ackTimer);
    this.ackTimer = undefined;
    for (const s of this.streams.values()) s.aborted(ErrorCode.CANCEL);
    this.streams.clear();
    for (const s of this.sending) s.sendQueued = false;
    this.sending.length = 0;
    this.sendingQueued = 0;
    this.out = [];
    this.outBytes = 0;
    // Their bytes may still be in the socket's queue: left to the garbage collector, not reused.
    this.lentInOut.length = 0;
    if (err !== undefined || !this.goawaySent) this.socket.destroy();
    this.opts.onClose?.(err);
  }
}

/**
 * `out` with each run of small buffers (frame headers, control frames, header blocks) copied into
 * one, up to COALESCE_BYTES: every write waiting in a socket costs ~200 bytes of its own, twenty
 * times a 9-byte ACK, and a peer that does not read has them wait. DATA payloads are not copied.
 */
function gatherSmall(out: Buffer[]): Buffer[] {
  const pieces: Buffer[] = [];
  let runStart = 0;
  let runBytes = 0;
  const endRun = (end: number): void => {
    if (end - runStart === 1) pieces.push(out[runStart]!);
    else if (end > runStart) pieces.push(Buffer.concat(out.slice(runStart, end), runBytes));
    runBytes = 0;
  };
  for (let i = 0; i < out.length; i++) {
    const b = out[i]!;
    if (b.length >= GATHER_PIECE_BYTES || runBytes + b.length > COALESCE_BYTES) {
      endRun(i);
      runStart = i;
      if (b.length >= GATHER_PIECE_BYTES) {
        pieces.push(b);
        runStart = i + 1;
        continue;
      }
    }
    runBytes += b.length;
  }
  endRun(out.length);
  return pieces;
}

function giveBackAll(buffers: Buffer[]): void {
  for (const b of buffers) responsePool.giveBack(b);
}

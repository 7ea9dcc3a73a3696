// The sending side of the peer Stream call on a plain HTTP/2 connection of our own: the request
// headers, gRPC message framing and status handling grpc-js's client would use, framed straight
// onto the socket (src/h2's frames and HPACK). Node's http2 client queued every write into
// nghttp2 and sent it on a later turn of the event loop, after the leader's own WAL write and
// the rest of its Ready; written here, a leader's appends are on the wire before its own write
// begins, as etcd's stream writers send beside its WAL. Used for insecure peer URLs; TLS peers
// go through grpc-js.
import assert from 'node:assert';
import net from 'node:net';
import * as grpc from '@grpc/grpc-js';
import {
  DEFAULT_MAX_FRAME_BYTES,
  DEFAULT_WINDOW_BYTES,
  ErrorCode,
  FLAG_ACK,
  FLAG_END_HEADERS,
  FLAG_END_STREAM,
  FRAME_HEADER_BYTES as H2_FRAME_HEADER_BYTES,
  FrameType,
  MAX_WINDOW_BYTES,
  PREFACE,
  Setting,
  frame,
  frameHeader,
  u32Frame,
} from '../h2/frames';
import { ConnectionError, FrameSplitter, HeaderBlockCollector, type FrameSink, type HeaderBlock } from '../h2/frame_reader';
import { HpackDecoder, encodeHeaders } from '../h2/hpack';
import type { PeerTarget } from './urls';

/** The end of a stream: grpc-js's ServiceError shape, so callers handle both paths alike. */
export interface StreamEnd extends Error {
  code: grpc.status;
  details: string;
}

function streamEnd(code: grpc.status, details: string): StreamEnd {
  const e = new Error(`${code} ${grpc.status[code] ?? ''}: ${details}`) as StreamEnd;
  e.code = code;
  e.details = details;
  return e;
}

export interface RawStreamHandlers {
  /** The peer accepted the call (response headers without a status). */
  onAccepted(): void;
  /** The call ended; `end.code` is OK when the peer closed it normally. Called once. */
  onEnded(end: StreamEnd): void;
}

export interface RawStreamOptions {
  path: string;
  /** Request metadata (lower-case keys). */
  metadata: Record<string, string>;
  keepaliveTimeMs: number;
  keepaliveTimeoutMs: number;
}

function decodeGrpcMessage(v: string | undefined): string {
  if (v === undefined) return '';
  try {
    return decodeURIComponent(v);
  } catch {
    return v;
  }
}

/** The one stream of the connection (client-initiated streams are odd). */
const STREAM_ID = 1;
/** Received DATA is credited back once this much has come (the peer sends no messages today). */
const RECEIVE_CREDIT_BYTES = 32 * 1024;
/**
 * Above this a message's DATA frames go out as separate writes of a corked socket instead of
 * one gathered buffer (Raft batches are usually a few hundred bytes; snapshots go elsewhere).
 */
const GATHER_BYTES = 64 * 1024;

/** What grpc-js reports for a response that is not HTTP 200 (its mapping of HTTP statuses). */
function httpStatusCode(status: number): grpc.status {
  switch (status) {
    case 400:
      return grpc.status.INTERNAL;
    case 401:
      return grpc.status.UNAUTHENTICATED;
    case 403:
      return grpc.status.PERMISSION_DENIED;
    case 404:
      return grpc.status.UNIMPLEMENTED;
    case 429:
    case 502:
    case 503:
    case 504:
      return grpc.status.UNAVAILABLE;
    default:
      return grpc.status.UNKNOWN;
  }
}

interface OutMessage {
  data: Buffer;
  /** Bytes of `data` already framed. */
  sent: number;
  cb: () => void;
}

/** One client-streaming call on its own HTTP/2 connection. */
export class RawClientStream implements FrameSink {
  private readonly socket: net.Socket;
  private readonly decoder = new HpackDecoder();
  // Assigned in the constructor, not here, so that V8 takes them for ordinary fields rather than
  // constants of the class: their first writes (the first keepalive PING, the first stream's end)
  // came minutes into a member's life and deoptimized code that had relied on them (see
  // H2Connection.closed).
  private ended: boolean;
  private connected = false;
  private pingOutstanding: boolean;
  private readonly keepalive: NodeJS.Timeout;

  /** Splits the socket's bytes into frames, keeping an incomplete one for the next read. */
  private readonly frames = new FrameSplitter(this);
  /** A header block being collected across CONTINUATION frames. */
  private readonly headerBlocks = new HeaderBlockCollector();
  private responseSeen = false;

  // Send flow control: what the peer lets us send, connection-wide and on the stream.
  private connectionWindow = DEFAULT_WINDOW_BYTES;
  private streamWindow = DEFAULT_WINDOW_BYTES;
  private peerInitialWindow = DEFAULT_WINDOW_BYTES;
  /** Messages waiting for window; the sender keeps one write in flight, so this stays short. */
  private readonly outQueue: OutMessage[] = [];
  private receivedUncredited = 0;

  constructor(target: PeerTarget, opts: RawStreamOptions, private readonly handlers: RawStreamHandlers) {
    assert(!target.secure, 'the raw peer stream carries no TLS');
    this.ended = false;
    this.pingOutstanding = false;
    const unixPath = target.target.startsWith('unix:') ? target.target.slice('unix:'.length) : null;
    const authority = unixPath === null ? target.target : 'localhost';
    this.socket = unixPath === null ? net.connect(hostPort(target.target)) : net.connect({ path: unixPath });
    // Raft messages are small and latency-bound: never wait to coalesce them.
    this.socket.setNoDelay(true);
    this.socket.on('connect', () => {
      this.connected = true;
    });
    this.socket.on('data', (chunk: Buffer) => this.onData(chunk));
    this.socket.on('error', (e: Error) => this.end(grpc.status.UNAVAILABLE, e.message));
    this.socket.on('close', () => this.end(grpc.status.UNAVAILABLE, 'connection closed'));
    const settings = Buffer.alloc(6);
    settings.writeUInt16BE(Setting.ENABLE_PUSH, 0);
    settings.writeUInt32BE(0, 2);
    const block = encodeHeaders({
      ':method': 'POST',
      ':scheme': 'http',
      ':path': opts.path,
      ':authority': authority,
      'content-type': 'application/grpc',
      te: 'trailers',
      'grpc-accept-encoding': 'identity',
      ...opts.metadata,
    });
    assert(block.length <= DEFAULT_MAX_FRAME_BYTES, 'peer stream request headers exceed one frame');
    // Written before the connection is up: the socket holds them until it is.
    this.socket.write(
      Buffer.concat([
        PREFACE,
        frame(FrameType.SETTINGS, 0, 0, settings),
        frameHeader(block.length, FrameType.HEADERS, FLAG_END_HEADERS, STREAM_ID),
        block,
      ]),
    );
    // A silent peer (paused, partitioned) must be noticed: a ping per interval, answered within
    // the next one, and a connection that never completes counts the same.
    let silentTicks = 0;
    this.keepalive = setInterval(() => {
      if (this.ended) return;
      if (!this.connected || this.pingOutstanding) {
        silentTicks++;
        if (silentTicks * opts.keepaliveTimeMs >= opts.keepaliveTimeMs + opts.keepaliveTimeoutMs) {
          this.end(grpc.status.UNAVAILABLE, 'keepalive timeout');
        }
        return;
      }
      silentTicks = 0;
      this.pingOutstanding = true;
      this.socket.write(frame(FrameType.PING, 0, 0, Buffer.alloc(8)));
    }, opts.keepaliveTimeMs);
    this.keepalive.unref();
  }

  /**
   * Writes one gRPC-framed message (see codec.ts encodeFramedBatch): onto the socket now as far
   * as the peer's flow-control windows allow, the rest when they open. `cb` runs once the whole
   * message was handed to the socket.
   */
  write(framed: Buffer, cb: () => void): void {
    if (this.ended) return;
    this.outQueue.push({ data: framed, sent: 0, cb });
    this.pump();
  }

  /** Ends the call from this side, as grpc-js's cancel does (reported as CANCELLED, on a later tick). */
  cancel(): void {
    this.end(grpc.status.CANCELLED, 'Cancelled on client');
  }

  /** Frames queued messages into DATA frames while both windows have room. */
  private pump(): void {
    while (this.outQueue.length > 0 && !this.ended) {
      const m = this.outQueue[0]!;
      const frames: Buffer[] = [];
      let bytes = 0;
      while (m.sent < m.data.length) {
        const n = Math.min(m.data.length - m.sent, this.connectionWindow, this.streamWindow, DEFAULT_MAX_FRAME_BYTES);
        if (n <= 0) break;
        frames.push(frameHeader(n, FrameType.DATA, 0, STREAM_ID), m.data.subarray(m.sent, m.sent + n));
        bytes += H2_FRAME_HEADER_BYTES + n;
        m.sent += n;
        this.connectionWindow -= n;
        this.streamWindow -= n;
      }
      if (frames.length === 0) return;
      const done = m.sent === m.data.length;
      if (done) this.outQueue.shift();
      const cb = done ? m.cb : undefined;
      if (bytes <= GATHER_BYTES) {
        this.socket.write(Buffer.concat(frames, bytes), cb === undefined ? undefined : () => cb());
      } else {
        this.socket.cork();
        frames.forEach((f, i) => this.socket.write(f, i === frames.length - 1 && cb !== undefined ? () => cb() : undefined));
        this.socket.uncork();
      }
      if (!done) return;
    }
  }

  // ---- Receiving ----

  private onData(chunk: Buffer): void {
    if (this.ended) return;
    try {
      this.frames.feed(chunk);
    } catch (e) {
      if (!(e instanceof ConnectionError)) throw e;
      this.fail(e.code, e.message);
    }
  }

  /** FrameSink: the splitter's frames; false once the stream has ended. */
  receiveFrame(type: number, flags: number, streamId: number, payload: Buffer): boolean {
    this.onFrame(type, flags, streamId, payload);
    return !this.ended;
  }

  private onFrame(type: number, flags: number, streamId: number, payload: Buffer): void {
    if (this.headerBlocks.open && type !== FrameType.CONTINUATION) {
      throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'header block interrupted');
    }
    switch (type) {
      case FrameType.DATA:
        this.onDataFrame(flags, streamId, payload.length);
        return;
      case FrameType.HEADERS: {
        if (streamId !== STREAM_ID) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, `HEADERS on stream ${streamId}`);
        const hb = this.headerBlocks.headers(flags, streamId, payload);
        if (hb !== undefined) this.endHeaderBlock(hb);
        return;
      }
      case FrameType.CONTINUATION: {
        const hb = this.headerBlocks.continuation(flags, streamId, payload);
        if (hb !== undefined) this.endHeaderBlock(hb);
        return;
      }
      case FrameType.RST_STREAM:
        if (payload.length !== 4) throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, 'bad RST_STREAM');
        if (streamId === STREAM_ID) this.end(grpc.status.UNAVAILABLE, `stream reset by peer (code ${payload.readUInt32BE(0)})`);
        return;
      case FrameType.SETTINGS:
        this.onSettings(flags, payload);
        return;
      case FrameType.PING:
        if (payload.length !== 8) throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, 'bad PING');
        if (flags & FLAG_ACK) this.pingOutstanding = false;
        else this.socket.write(frame(FrameType.PING, FLAG_ACK, 0, Buffer.from(payload)));
        return;
      case FrameType.GOAWAY:
        this.end(grpc.status.UNAVAILABLE, 'peer closed the connection');
        return;
      case FrameType.WINDOW_UPDATE: {
        if (payload.length !== 4) throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, 'bad WINDOW_UPDATE');
        const inc = payload.readUInt32BE(0) & 0x7fffffff;
        if (streamId === 0) this.connectionWindow += inc;
        else if (streamId === STREAM_ID) this.streamWindow += inc;
        if (this.connectionWindow > MAX_WINDOW_BYTES || this.streamWindow > MAX_WINDOW_BYTES) {
          this.fail(ErrorCode.FLOW_CONTROL_ERROR, 'window overflow');
          return;
        }
        this.pump();
        return;
      }
      case FrameType.PUSH_PROMISE:
        this.fail(ErrorCode.PROTOCOL_ERROR, 'push is disabled');
        return;
      default:
        // PRIORITY and unknown frame types are ignored (RFC 9113 section 5.5).
        return;
    }
  }

  private onDataFrame(flags: number, streamId: number, bytes: number): void {
    // The peer sends no messages on this call: whatever comes is credited back and dropped.
    this.receivedUncredited += bytes;
    if (this.receivedUncredited >= RECEIVE_CREDIT_BYTES) {
      const n = this.receivedUncredited;
      this.receivedUncredited = 0;
      this.socket.write(Buffer.concat([u32Frame(FrameType.WINDOW_UPDATE, 0, n), u32Frame(FrameType.WINDOW_UPDATE, STREAM_ID, n)]));
    }
    if (streamId === STREAM_ID && flags & FLAG_END_STREAM) this.end(grpc.status.UNAVAILABLE, 'stream closed without a status');
  }

  private onSettings(flags: number, payload: Buffer): void {
    if (flags & FLAG_ACK) return;
    if (payload.length % 6 !== 0) {
      this.fail(ErrorCode.FRAME_SIZE_ERROR, 'bad SETTINGS length');
      return;
    }
    for (let at = 0; at < payload.length; at += 6) {
      if (payload.readUInt16BE(at) !== Setting.INITIAL_WINDOW_SIZE) continue;
      const v = payload.readUInt32BE(at + 2);
      if (v > MAX_WINDOW_BYTES) {
        this.fail(ErrorCode.FLOW_CONTROL_ERROR, 'bad initial window');
        return;
      }
      this.streamWindow += v - this.peerInitialWindow;
      this.peerInitialWindow = v;
    }
    this.socket.write(frame(FrameType.SETTINGS, FLAG_ACK, 0, Buffer.alloc(0)));
    this.pump();
  }

  private endHeaderBlock(hb: HeaderBlock): void {
    const fields = new Map<string, string>();
    try {
      // Every block goes through the decoder: its table changes with each.
      const list = this.decoder.decode(hb.block);
      for (let i = 0; i < list.length; i += 2) {
        if (!fields.has(list[i]!)) fields.set(list[i]!, list[i + 1]!);
      }
    } catch (e) {
      this.fail(ErrorCode.COMPRESSION_ERROR, (e as Error).message);
      return;
    }
    const endStream = (hb.flags & FLAG_END_STREAM) !== 0;
    const status = fields.get('grpc-status');
    if (!this.responseSeen) {
      this.responseSeen = true;
      const http = Number(fields.get(':status'));
      if (http !== 200) {
        this.end(httpStatusCode(http), `Received HTTP status code ${fields.get(':status') ?? ''}`);
        return;
      }
      // A trailers-only answer is a refusal (or a status) before any message.
      if (status !== undefined) {
        this.end(Number(status), decodeGrpcMessage(fields.get('grpc-message')));
        return;
      }
      if (endStream) {
        this.end(grpc.status.UNKNOWN, 'stream closed without a status');
        return;
      }
      this.handlers.onAccepted();
      return;
    }
    this.end(status === undefined ? grpc.status.UNKNOWN : Number(status), decodeGrpcMessage(fields.get('grpc-message')));
  }

  /** A connection error: tell the peer (GOAWAY) and end the call. */
  private fail(code: ErrorCode, message: string): void {
    if (this.ended) return;
    const payload = Buffer.alloc(8);
    payload.writeUInt32BE(0, 0);
    payload.writeUInt32BE(code, 4);
    this.socket.write(frame(FrameType.GOAWAY, 0, 0, payload));
    this.end(grpc.status.INTERNAL, `HTTP/2 protocol error: ${message}`);
  }

  private end(code: grpc.status, details: string): void {
    if (this.ended) return;
    this.ended = true;
    clearInterval(this.keepalive);
    this.outQueue.length = 0;
    this.frames.clear();
    // At once, as a peer that stopped reading would hold a graceful close open: whatever is
    // still unwritten (a GOAWAY) is lost, which the peer learns from the close instead.
    this.socket.destroy();
    const e = streamEnd(code, details);
    // Never re-enter the caller from inside its own write or cancel.
    process.nextTick(() => this.handlers.onEnded(e));
  }
}

function hostPort(target: string): { host: string; port: number } {
  const i = target.lastIndexOf(':');
  assert(i > 0, `peer target without port: ${target}`);
  let host = target.slice(0, i);
  if (host.startsWith('[') && host.endsWith(']')) host = host.slice(1, -1);
  return { host, port: Number(target.slice(i + 1)) };
}

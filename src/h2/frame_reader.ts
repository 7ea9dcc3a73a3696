// The receiving half of HTTP/2 framing (RFC 9113 sections 4.1, 6.2, 6.10), shared by our server
// connection (connection.ts) and the peers' client (transport/raw_client.ts): splitting the byte
// stream into frames, stripping padding, and collecting a header block across CONTINUATIONs.
import assert from 'node:assert';
import { DEFAULT_MAX_FRAME_BYTES, ErrorCode, FLAG_END_HEADERS, FLAG_PADDED, FLAG_PRIORITY, FRAME_HEADER_BYTES } from './frames';

/** A connection error (section 5.4.1): whoever catches it sends GOAWAY with `code` and closes. */
export class ConnectionError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
  ) {
    super(message);
  }
}

/**
 * Gets each whole frame; returns false to stop reading (the connection is closing). An object's
 * method rather than a callback: each connection passed a closure of its own, and the second
 * connection's first frame deoptimized the splitter's loop with everything inlined into it
 * ("wrong call target").
 */
export interface FrameSink {
  receiveFrame(type: number, flags: number, streamId: number, payload: Buffer): boolean;
}

/**
 * Splits what the socket delivers into frames. A partial frame (at most one frame's header and
 * largest payload: we never raise SETTINGS_MAX_FRAME_SIZE) is kept for the next read.
 */
export class FrameSplitter {
  private pending: Buffer | undefined;
  private prefaceLeft: boolean;

  /** `preface`: bytes that must come before the first frame (a server expects the client's). */
  constructor(
    private readonly sink: FrameSink,
    private readonly preface?: Buffer,
  ) {
    this.prefaceLeft = preface !== undefined;
    // Written here so that V8 takes it for an ordinary field, not a constant of the class: its
    // first write otherwise came at the first connection's close (see H2Connection.closed).
    this.pending = undefined;
  }

  /** Delivers the whole frames in what was kept plus `chunk`. Throws ConnectionError on bad framing. */
  feed(chunk: Buffer): void {
    let buf = chunk;
    if (this.pending !== undefined) {
      buf = Buffer.concat([this.pending, chunk]);
      this.pending = undefined;
    }
    let pos = 0;
    if (this.prefaceLeft) {
      const preface = this.preface!;
      const n = Math.min(buf.length, preface.length);
      if (!preface.subarray(0, n).equals(buf.subarray(0, n))) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'bad connection preface');
      if (n < preface.length) {
        this.pending = buf;
        return;
      }
      this.prefaceLeft = false;
      pos = preface.length;
    }
    while (buf.length - pos >= FRAME_HEADER_BYTES) {
      const length = (buf[pos]! << 16) | (buf[pos + 1]! << 8) | buf[pos + 2]!;
      if (length > DEFAULT_MAX_FRAME_BYTES) throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, `frame of ${length} bytes`);
      if (buf.length - pos < FRAME_HEADER_BYTES + length) break;
      const type = buf[pos + 3]!;
      const flags = buf[pos + 4]!;
      const streamId = buf.readUInt32BE(pos + 5) & 0x7fffffff;
      const payload = buf.subarray(pos + FRAME_HEADER_BYTES, pos + FRAME_HEADER_BYTES + length);
      pos += FRAME_HEADER_BYTES + length;
      if (!this.sink.receiveFrame(type, flags, streamId, payload)) return;
    }
    if (pos < buf.length) {
      assert(buf.length - pos < FRAME_HEADER_BYTES + DEFAULT_MAX_FRAME_BYTES, 'partial frame over its bound');
      // Copy: the rest may be a small tail of a large read.
      this.pending = Buffer.from(buf.subarray(pos));
    }
  }

  /** Drops a kept partial frame (the connection is gone). */
  clear(): void {
    this.pending = undefined;
  }
}

/** The payload without its padding (PADDED flag); `extra` bytes of fields precede the content. */
export function unpad(flags: number, payload: Buffer, extra: number): Buffer {
  if ((flags & FLAG_PADDED) === 0) {
    if (payload.length < extra) throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, 'frame shorter than its fields');
    return extra === 0 ? payload : payload.subarray(extra);
  }
  if (payload.length < 1) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'padded frame without pad length');
  const pad = payload[0]!;
  if (1 + extra + pad > payload.length) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'padding beyond the frame');
  return payload.subarray(1 + extra, payload.length - pad);
}

/** A header block (HEADERS plus CONTINUATIONs) larger than this ends the connection, either side's. */
export const MAX_HEADER_BLOCK_BYTES = 64 * 1024;
/**
 * CONTINUATION frames one header block may have. A 64 KiB block needs 4 at the default frame size;
 * clients send none for gRPC. Without a count, empty CONTINUATIONs (no bytes toward the size bound)
 * were kept without end: one connection sending them filled the heap (the CONTINUATION flood).
 */
export const MAX_CONTINUATION_FRAMES = 64;

/** A complete header block: the HEADERS frame's stream and flags, and the HPACK bytes of all its frames. */
export interface HeaderBlock {
  streamId: number;
  flags: number;
  block: Buffer;
}

/**
 * Collects one header block at a time (HEADERS, then CONTINUATIONs until END_HEADERS). While one
 * is open, any other frame is a connection error (section 6.10): callers check `open` first.
 */
export class HeaderBlockCollector {
  private current: { streamId: number; flags: number; parts: Buffer[]; bytes: number; frames: number } | undefined;

  constructor(private readonly maxBlockBytes = MAX_HEADER_BLOCK_BYTES) {}

  get open(): boolean {
    return this.current !== undefined;
  }

  /** A HEADERS frame's payload; returns the block when this frame ends it. */
  headers(flags: number, streamId: number, payload: Buffer): HeaderBlock | undefined {
    assert(this.current === undefined, 'HEADERS while a header block is open');
    const fragment = unpad(flags, payload, flags & FLAG_PRIORITY ? 5 : 0);
    if (fragment.length > this.maxBlockBytes) throw new ConnectionError(ErrorCode.ENHANCE_YOUR_CALM, 'header block too large');
    if (flags & FLAG_END_HEADERS) return { streamId, flags, block: fragment };
    this.current = { streamId, flags, parts: [fragment], bytes: fragment.length, frames: 0 };
    return undefined;
  }

  /** A CONTINUATION frame's payload; returns the block when this frame ends it. */
  continuation(flags: number, streamId: number, payload: Buffer): HeaderBlock | undefined {
    const hb = this.current;
    if (hb === undefined || hb.streamId !== streamId) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'unexpected CONTINUATION');
    if (++hb.frames > MAX_CONTINUATION_FRAMES) throw new ConnectionError(ErrorCode.ENHANCE_YOUR_CALM, 'too many CONTINUATION frames');
    hb.bytes += payload.length;
    if (hb.bytes > this.maxBlockBytes) throw new ConnectionError(ErrorCode.ENHANCE_YOUR_CALM, 'header block too large');
    if (payload.length > 0) hb.parts.push(payload);
    if ((flags & FLAG_END_HEADERS) === 0) return undefined;
    this.current = undefined;
    return { streamId: hb.streamId, flags: hb.flags, block: Buffer.concat(hb.parts, hb.bytes) };
  }
}

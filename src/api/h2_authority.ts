// Go's gRPC client, dialled as `passthrough:///http://host:port` (etcdctl 3.4 does this for its
// per-endpoint maintenance calls when --endpoints carries a scheme), sends the HTTP/2
// pseudo-header `:authority: http://host:port`. Go's server ignores it; nghttp2 (under Node's
// http2, under grpc-js) resets the stream with PROTOCOL_ERROR because the value holds a '/'.
// So the client->server bytes at the start of each HTTP/2 connection are parsed just far enough
// to find the first header block and strip a scheme from its :authority; everything after that
// block passes through untouched (gRPC uses one authority per connection).
import assert from 'node:assert';
import type net from 'node:net';
import { Duplex } from 'node:stream';
import { stripScheme } from '../h2/authority';
import { FLAG_ACK, FLAG_END_HEADERS, FLAG_PADDED, FLAG_PRIORITY, FRAME_HEADER_BYTES, FrameType, PREFACE } from '../h2/frames';
import { encodeInt } from '../h2/hpack';
import { huffmanDecode } from '../h2/huffman';

export { stripScheme };
/**
 * Bound on the first HEADERS frame held for rewriting (a larger one passes unchanged) and on the
 * bytes collected before the hand-over to grpc-js (beyond it the connection takes the slow path).
 */
export const MAX_PENDING_BYTES = 64 * 1024;
/** HPACK integers above this are not something a sane first header block holds. */
const MAX_HPACK_INT = 1 << 24;
/** RFC 7541 Appendix A: static table index of `:authority`. */
const STATIC_INDEX_AUTHORITY = 1;

interface Cursor {
  pos: number;
}

/** RFC 7541 section 5.1; undefined if the integer runs past `end` or is absurdly large. */
function readInt(buf: Buffer, c: Cursor, prefixBits: number, end: number): number | undefined {
  if (c.pos >= end) return undefined;
  const max = (1 << prefixBits) - 1;
  let v = buf[c.pos++]! & max;
  if (v < max) return v;
  let scale = 1;
  for (;;) {
    if (c.pos >= end) return undefined;
    const b = buf[c.pos++]!;
    v += (b & 0x7f) * scale;
    if (v > MAX_HPACK_INT) return undefined;
    if ((b & 0x80) === 0) return v;
    scale *= 128;
  }
}

/** RFC 7541 section 5.2; the decoded octets, or undefined if malformed. */
function readString(buf: Buffer, c: Cursor, end: number): Buffer | undefined {
  if (c.pos >= end) return undefined;
  const huffman = (buf[c.pos]! & 0x80) !== 0;
  const len = readInt(buf, c, 7, end);
  if (len === undefined || c.pos + len > end) return undefined;
  const raw = buf.subarray(c.pos, c.pos + len);
  c.pos += len;
  return huffman ? huffmanDecode(raw) : raw;
}

/** A plain (non-Huffman) HPACK string literal. */
function encodeRawString(s: Buffer): Buffer {
  return Buffer.concat([encodeInt(s.length, 7, 0), s]);
}

/**
 * Returns the header block with a scheme stripped from its :authority literal, or undefined
 * when it needs no change or cannot be parsed (then it must be forwarded as it is).
 *
 * Only the value bytes change and the representation keeps its type, so a literal with
 * incremental indexing still adds one entry to the server's dynamic table, as it does to the
 * client's. That entry is shorter on the server side (its size is name + value + 32), so the
 * server's table never has to evict an entry the client's table still holds: every index the
 * client sends later resolves to the same header on both sides (for :authority, to the
 * stripped value, which is what we want the server to see anyway).
 */
export function rewriteHeaderBlock(block: Buffer): Buffer | undefined {
  const c: Cursor = { pos: 0 };
  const end = block.length;
  while (c.pos < end) {
    const b = block[c.pos]!;
    if ((b & 0x80) !== 0) {
      // Indexed header field: nothing literal to fix.
      if (readInt(block, c, 7, end) === undefined) return undefined;
      continue;
    }
    if ((b & 0xe0) === 0x20) {
      // Dynamic table size update.
      if (readInt(block, c, 5, end) === undefined) return undefined;
      continue;
    }
    // Literal: with incremental indexing (01xxxxxx, 6-bit index) or without / never indexed
    // (0000xxxx / 0001xxxx, 4-bit index).
    const nameIndex = readInt(block, c, (b & 0xc0) === 0x40 ? 6 : 4, end);
    if (nameIndex === undefined) return undefined;
    let isAuthority = nameIndex === STATIC_INDEX_AUTHORITY;
    if (nameIndex === 0) {
      const name = readString(block, c, end);
      if (name === undefined) return undefined;
      isAuthority = name.toString('latin1') === ':authority';
    }
    const valueStart = c.pos;
    const value = readString(block, c, end);
    if (value === undefined) return undefined;
    if (!isAuthority) continue;
    const stripped = stripScheme(value.toString('latin1'));
    if (stripped === undefined) return undefined;
    return Buffer.concat([
      block.subarray(0, valueStart),
      encodeRawString(Buffer.from(stripped, 'latin1')),
      block.subarray(c.pos),
    ]);
  }
  return undefined;
}

/**
 * Rewrites one complete HEADERS frame (header included); undefined when it is to be forwarded
 * unchanged (no scheme, a header block continued in CONTINUATION frames, or malformed).
 */
export function rewriteHeadersFrame(frame: Buffer): Buffer | undefined {
  assert(frame.length >= FRAME_HEADER_BYTES);
  const flags = frame[4]!;
  // A block split over CONTINUATION frames is rare for a gRPC request; not worth the states.
  if ((flags & FLAG_END_HEADERS) === 0) return undefined;
  const payload = frame.subarray(FRAME_HEADER_BYTES);
  let blockStart = 0;
  let padBytes = 0;
  if ((flags & FLAG_PADDED) !== 0) {
    if (payload.length < 1) return undefined;
    padBytes = payload[0]!;
    blockStart = 1;
  }
  if ((flags & FLAG_PRIORITY) !== 0) blockStart += 5;
  const blockEnd = payload.length - padBytes;
  if (blockEnd < blockStart) return undefined;
  const block = rewriteHeaderBlock(payload.subarray(blockStart, blockEnd));
  if (block === undefined) return undefined;
  const newPayload = Buffer.concat([payload.subarray(0, blockStart), block, payload.subarray(blockEnd)]);
  assert(newPayload.length < payload.length, 'stripping a scheme must shorten the frame');
  const header = Buffer.from(frame.subarray(0, FRAME_HEADER_BYTES));
  header.writeUIntBE(newPayload.length, 0, 3);
  return Buffer.concat([header, newPayload]);
}

/** An empty SETTINGS frame: the server's connection preface, sent before grpc-js takes over. */
export const EMPTY_SETTINGS_FRAME = Buffer.from([0, 0, 0, 0x4, 0, 0, 0, 0, 0]);

export interface RewriterOptions {
  /**
   * Drop the client's first SETTINGS ACK: it answers the EMPTY_SETTINGS_FRAME the listener
   * sent itself, and the HTTP/2 stack taking over later must not see an ACK it did not ask for.
   */
  dropFirstSettingsAck?: boolean;
}

/**
 * The client->server byte filter of one connection: feed it each chunk as it arrives and
 * forward what it returns. Only the first HEADERS frame is held back (bounded); every other
 * byte is returned as soon as it arrives, since clients wait for the server before they send
 * requests. Once that frame (and the ACK to drop, if asked) has passed, chunks pass as they are.
 */
export class AuthorityRewriter {
  private prefaceLeft = PREFACE.length;
  /** Payload bytes of the current frame still to forward unexamined. */
  private skipLeft = 0;
  /** A partial frame header, or the whole first HEADERS frame while it arrives. */
  private held: Buffer[] = [];
  private heldBytes = 0;
  /** Bytes of the frame being held (header included); 0 while reading a frame header. */
  private holdTarget = 0;
  private headersSeen = false;
  private ackPending: boolean;
  private done = false;

  constructor(opts: RewriterOptions = {}) {
    this.ackPending = opts.dropFirstSettingsAck === true;
  }

  /** True once parsing has stopped and chunks pass straight through. */
  get passthrough(): boolean {
    return this.done;
  }

  push(chunk: Buffer): Buffer {
    if (this.done) return chunk;
    const out: Buffer[] = [];
    let pos = 0;
    while (pos < chunk.length) {
      if (this.headersSeen && !this.ackPending && this.holdTarget === 0 && this.heldBytes === 0) {
        // At a frame boundary or inside a frame being forwarded: the rest needs no look.
        this.done = true;
        out.push(chunk.subarray(pos));
        break;
      }
      if (this.prefaceLeft > 0 || this.skipLeft > 0) {
        const n = Math.min(chunk.length - pos, this.prefaceLeft > 0 ? this.prefaceLeft : this.skipLeft);
        out.push(chunk.subarray(pos, pos + n));
        if (this.prefaceLeft > 0) this.prefaceLeft -= n;
        else this.skipLeft -= n;
        pos += n;
        continue;
      }
      const want = (this.holdTarget === 0 ? FRAME_HEADER_BYTES : this.holdTarget) - this.heldBytes;
      const n = Math.min(chunk.length - pos, want);
      this.held.push(chunk.subarray(pos, pos + n));
      this.heldBytes += n;
      pos += n;
      if (n < want) break;
      const bytes = Buffer.concat(this.held);
      this.held = [];
      this.heldBytes = 0;
      if (this.holdTarget !== 0) {
        this.holdTarget = 0;
        out.push(rewriteHeadersFrame(bytes) ?? bytes);
        continue;
      }
      this.onFrameHeader(bytes, out);
    }
    if (this.headersSeen && !this.ackPending && this.holdTarget === 0 && this.heldBytes === 0) this.done = true;
    return out.length === 1 ? out[0]! : Buffer.concat(out);
  }

  private onFrameHeader(header: Buffer, out: Buffer[]): void {
    assert.strictEqual(header.length, FRAME_HEADER_BYTES);
    const payloadBytes = header.readUIntBE(0, 3);
    const type = header[3]!;
    const flags = header[4]!;
    if (this.ackPending && type === FrameType.SETTINGS && (flags & FLAG_ACK) !== 0 && payloadBytes === 0) {
      this.ackPending = false;
      return; // dropped
    }
    if (type === FrameType.HEADERS && !this.headersSeen) {
      this.headersSeen = true;
      if (FRAME_HEADER_BYTES + payloadBytes <= MAX_PENDING_BYTES) {
        this.held = [header];
        this.heldBytes = FRAME_HEADER_BYTES;
        this.holdTarget = FRAME_HEADER_BYTES + payloadBytes;
        if (payloadBytes > 0) return;
        this.held = [];
        this.heldBytes = 0;
        this.holdTarget = 0;
      }
    }
    out.push(header);
    this.skipLeft = payloadBytes;
  }
}

/**
 * Wraps an HTTP/2 server-side socket so that the client's first header block reaches the
 * HTTP/2 stack with a scheme-free :authority. Server->client bytes go straight to the socket.
 * Every byte then crosses JS streams, so the listener uses this only when the fast hand-over
 * (injectWithAuthorityFix) cannot be completed.
 */
export class AuthorityFixingStream extends Duplex {
  private readonly rewriter: AuthorityRewriter;

  /**
   * `head`: bytes already read off the socket and not yet filtered; `filtered`: bytes already
   * through `rewriter`, handed on first.
   */
  constructor(
    private readonly socket: net.Socket,
    head?: Buffer,
    rewriter?: AuthorityRewriter,
    filtered?: Buffer,
  ) {
    super({ allowHalfOpen: false });
    this.rewriter = rewriter ?? new AuthorityRewriter();
    if (filtered !== undefined && filtered.length > 0) this.push(filtered);
    if (head !== undefined && head.length > 0) {
      const out = this.rewriter.push(head);
      if (out.length > 0) this.push(out);
    }
    socket.on('data', (chunk: Buffer) => {
      const out = this.rewriter.push(chunk);
      if (out.length > 0 && !this.push(out)) socket.pause();
    });
    socket.on('end', () => this.push(null));
    socket.on('close', () => this.destroy());
    socket.on('error', (e) => this.destroy(e));
  }

  // Peer details for logs and channelz, which would otherwise see none through the wrapper.
  get remoteAddress(): string | undefined {
    return this.socket.remoteAddress;
  }

  get remotePort(): number | undefined {
    return this.socket.remotePort;
  }

  get remoteFamily(): string | undefined {
    return this.socket.remoteFamily;
  }

  get localAddress(): string | undefined {
    return this.socket.localAddress;
  }

  get localPort(): number | undefined {
    return this.socket.localPort;
  }

  override _read(): void {
    this.socket.resume();
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (e?: Error | null) => void): void {
    this.socket.write(chunk, cb);
  }

  override _writev(chunks: Array<{ chunk: Buffer }>, cb: (e?: Error | null) => void): void {
    this.socket.write(Buffer.concat(chunks.map((c) => c.chunk)), cb);
  }

  override _final(cb: (e?: Error | null) => void): void {
    this.socket.end(cb);
  }

  override _destroy(err: Error | null, cb: (e?: Error | null) => void): void {
    this.socket.destroy();
    cb(err);
  }
}

/** How long a new connection may take to send its first request before it gets the slow path. */
export const DEFAULT_FIRST_REQUEST_WAIT_MS = 1000;

/**
 * Hands an HTTP/2 connection (preface in `head`, socket paused) to `inject` with the first
 * request's :authority fixed. The listener answers the preface with its own empty SETTINGS so
 * that clients which wait for the server before their first request (Go's gRPC does) send it;
 * it holds the client's bytes until that request and the ACK of those SETTINGS have arrived,
 * then gives grpc-js the raw socket with the fixed bytes unshifted: no per-byte cost after
 * that. A client that sends no request within `waitMs` (or too much before one) gets the
 * socket wrapped in an AuthorityFixingStream instead.
 */
export function injectWithAuthorityFix(
  socket: net.Socket,
  head: Buffer,
  inject: (connection: Duplex) => void,
  waitMs: number = DEFAULT_FIRST_REQUEST_WAIT_MS,
): void {
  const rewriter = new AuthorityRewriter({ dropFirstSettingsAck: true });
  const out: Buffer[] = [];
  let outBytes = 0;
  let settled = false;
  const cleanup = (): void => {
    settled = true;
    clearTimeout(timer);
    socket.off('data', onData);
    socket.off('close', onClose);
    socket.pause();
  };
  const onClose = (): void => {
    if (!settled) cleanup();
  };
  const slowPath = (): void => {
    if (settled) return;
    cleanup();
    if (socket.destroyed) return;
    inject(new AuthorityFixingStream(socket, undefined, rewriter, Buffer.concat(out)));
  };
  const take = (chunk: Buffer): void => {
    const o = rewriter.push(chunk);
    if (o.length > 0) {
      out.push(o);
      outBytes += o.length;
    }
    if (rewriter.passthrough) {
      cleanup();
      // http2 sessions pick up bytes already buffered on the socket.
      socket.unshift(Buffer.concat(out));
      inject(socket);
    } else if (outBytes > MAX_PENDING_BYTES) {
      slowPath();
    }
  };
  const onData = (chunk: Buffer): void => {
    if (!settled) take(chunk);
  };
  const timer = setTimeout(slowPath, waitMs);
  socket.on('data', onData);
  socket.on('close', onClose);
  socket.write(EMPTY_SETTINGS_FRAME);
  take(head);
  if (!settled) socket.resume();
}

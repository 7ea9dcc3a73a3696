// Protobuf wire primitives for the hand-written codecs of the hot messages (kv_wire.ts,
// internal.ts). They produce what protobufjs 8 produces for proto3 (fields in number order,
// zero scalars omitted, oneof members written whenever set) and read what any conforming
// encoder writes. Anything they are not sure about throws NotFast, and the caller redoes the
// whole message with protobufjs, so unusual input behaves exactly as before.
import assert from 'node:assert';
import { POOLED_BUFFER, responsePool } from '../runtime/buffer_pool';

/** Thrown when a message needs the generic (protobufjs) path; never escapes the codecs. */
export class NotFast extends Error {
  constructor(what: string) {
    super(what);
  }
}

const TWO_32 = 4294967296;
const MAX_SAFE = Number.MAX_SAFE_INTEGER;
const DECIMAL = /^-?[0-9]+$/;
/** Up to 15 digits a decimal is always a safe integer. */
const SAFE_DIGITS = 15;

/** A 64-bit value as two unsigned 32-bit halves (BigInt is several times slower here). */
export interface Long64 {
  readonly lo: number;
  readonly hi: number;
}

const DIGIT_CHUNK = 4;
const CHUNK_SCALE = [1, 10, 100, 1000, 10000];
/** Digits of the low part in decimalToLong64's split (10^9 < 2^30). */
const LOW_DIGITS = 9;
const MAX_SPLIT_DIGITS = 20;

/**
 * The 64-bit two's complement of a decimal string of any length (wrapping modulo 2^64 like
 * Long.fromString, which protobufjs uses). The caller checked it matches DECIMAL.
 */
function decimalToLong64(v: string): Long64 {
  const neg = v.charCodeAt(0) === 45;
  const start = neg ? 1 : 0;
  const digits = v.length - start;
  let lo: number;
  let hi: number;
  if (digits <= LOW_DIGITS) {
    lo = Number(v.slice(start));
    hi = 0;
  } else if (digits <= MAX_SPLIT_DIGITS) {
    // value = a * 10^9 + b, a below 10^11 and b below 10^9; 10^9 = 15625 * 64000 keeps
    // every product below 2^53, so the float arithmetic is exact.
    let a = 0;
    let i = start;
    for (const headEnd = v.length - LOW_DIGITS; i < headEnd; i++) a = a * 10 + (v.charCodeAt(i) - 48);
    let b = 0;
    for (; i < v.length; i++) b = b * 10 + (v.charCodeAt(i) - 48);
    const al = a % TWO_32;
    const ah = Math.floor(a / TWO_32);
    const x = al * 15625;
    const xlo = x % TWO_32;
    const y = xlo * 64000 + b;
    lo = y % TWO_32;
    hi = (Math.floor(x / TWO_32) * 64000 + Math.floor(y / TWO_32) + ah * 1e9) % TWO_32;
  } else {
    lo = 0;
    hi = 0;
    let i = start;
    while (i < v.length) {
      const n = Math.min(DIGIT_CHUNK, v.length - i);
      const chunk = Number(v.slice(i, i + n));
      const scale = CHUNK_SCALE[n];
      i += n;
      const l = lo * scale + chunk;
      const carry = Math.floor(l / TWO_32);
      lo = l - carry * TWO_32;
      hi = (hi * scale + carry) % TWO_32;
    }
  }
  if (neg) {
    lo = (~lo + 1) >>> 0;
    hi = (~hi + (lo === 0 ? 1 : 0)) >>> 0;
  }
  return { lo, hi };
}

/**
 * An int64/uint64 field value as it goes on the wire: a non-negative safe number, or the
 * 64-bit two's complement as two halves. Accepts what our objects carry (decimal strings,
 * safe integer numbers); anything else goes to protobufjs, which has its own rules for it.
 */
export function int64Wire(v: unknown): number | Long64 {
  if (typeof v === 'string') {
    const len = v.length;
    if (len > 0 && len <= SAFE_DIGITS) {
      // Parse and validate in one pass: short non-negative decimals are nearly every value.
      let n = 0;
      for (let i = 0; i < len; i++) {
        const d = v.charCodeAt(i) - 48;
        if (d < 0 || d > 9) return longDecimalWire(v);
        n = n * 10 + d;
      }
      return n;
    }
    return longDecimalWire(v);
  }
  if (typeof v === 'number') {
    if (!Number.isSafeInteger(v)) throw new NotFast('int64 number');
    if (v >= 0) return v;
    return negativeToLong64(v);
  }
  throw new NotFast('int64 type');
}

/**
 * Long decimals that recur are mostly a few constants (cluster and member IDs in every
 * header): those are remembered, up to a bound past which new ones are not (nothing is
 * evicted). A decimal is admitted on its second sighting, so unique values (request IDs)
 * do not crowd the constants out.
 */
const MAX_REMEMBERED_DECIMALS = 256;
const MAX_DECIMAL_CANDIDATES = 1024;
const rememberedDecimals = new Map<string, number | Long64>();
const decimalCandidates = new Set<string>();

function longDecimalWire(v: string): number | Long64 {
  const known = rememberedDecimals.get(v);
  if (known !== undefined) return known;
  if (!DECIMAL.test(v)) throw new NotFast('int64 string');
  const x = decimalToLong64(v);
  const out = x.hi < 0x200000 ? x.hi * TWO_32 + x.lo : x;
  if (rememberedDecimals.size < MAX_REMEMBERED_DECIMALS) {
    if (decimalCandidates.has(v)) {
      rememberedDecimals.set(v, out);
      decimalCandidates.delete(v);
    } else {
      if (decimalCandidates.size >= MAX_DECIMAL_CANDIDATES) decimalCandidates.clear();
      decimalCandidates.add(v);
    }
  }
  return out;
}

/** Two's complement of a negative safe integer. */
function negativeToLong64(v: number): Long64 {
  const abs = -v;
  let lo = abs % TWO_32;
  let hi = Math.floor(abs / TWO_32);
  lo = (~lo + 1) >>> 0;
  hi = (~hi + (lo === 0 ? 1 : 0)) >>> 0;
  return { lo, hi };
}

export function varintSize(n: number): number {
  if (n < 0x80) return 1;
  if (n < 0x4000) return 2;
  if (n < 0x200000) return 3;
  if (n < 0x10000000) return 4;
  let size = 4;
  n = Math.floor(n / 0x10000000);
  while (n > 0) {
    size++;
    n = Math.floor(n / 128);
  }
  return size;
}

/** Varint length of a 64-bit value given as halves (as protobufjs's LongBits.length). */
export function long64Size(x: Long64): number {
  const part0 = x.lo;
  const part1 = ((x.lo >>> 28) | (x.hi << 4)) >>> 0;
  const part2 = x.hi >>> 24;
  if (part2 === 0) {
    if (part1 === 0) return part0 < 16384 ? (part0 < 128 ? 1 : 2) : part0 < 2097152 ? 3 : 4;
    return part1 < 16384 ? (part1 < 128 ? 5 : 6) : part1 < 2097152 ? 7 : 8;
  }
  return part2 < 128 ? 9 : 10;
}

export function int64Size(v: number | Long64): number {
  return typeof v === 'number' ? varintSize(v) : long64Size(v);
}

/** int32 / enum values: negatives take ten bytes (sign-extended to 64 bits). */
export function int32Wire(v: unknown): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < -2147483648 || v > 2147483647) throw new NotFast('int32');
  return v;
}

export function int32Size(v: number): number {
  return v < 0 ? 10 : varintSize(v);
}

/** Bytes field content, or null when absent/empty (both omitted). */
export function bytesWire(v: unknown): Uint8Array | null {
  if (v === null || v === undefined) return null;
  if (v instanceof Uint8Array) return v.length === 0 ? null : v;
  throw new NotFast('bytes type');
}

/** Length-delimited field (tag + length + payload) of `len` payload bytes. */
export function delimitedSize(tagBytes: number, len: number): number {
  return tagBytes + varintSize(len) + len;
}

/** Writes the varint of n (below 2^53) into buf at pos; returns the position after it. */
export function putVarint(buf: Uint8Array, pos: number, n: number): number {
  while (n >= 0x80000000) {
    buf[pos++] = (n % 128) | 0x80;
    n = Math.floor(n / 128);
  }
  while (n >= 0x80) {
    buf[pos++] = (n & 0x7f) | 0x80;
    n >>>= 7;
  }
  buf[pos++] = n;
  return pos;
}

/** Writes into a buffer sized beforehand; `pos` is the next byte. */
export class Writer {
  pos = 0;
  constructor(readonly buf: Buffer) {}

  byte(b: number): void {
    this.buf[this.pos++] = b;
  }

  /** A tag known as its encoded bytes (all our tags are below 2^14). */
  tag(t: number): void {
    if (t < 0x80) this.buf[this.pos++] = t;
    else {
      this.buf[this.pos++] = (t & 0x7f) | 0x80;
      this.buf[this.pos++] = t >>> 7;
    }
  }

  varint(n: number): void {
    this.pos = putVarint(this.buf, this.pos, n);
  }

  long64(x: Long64): void {
    const buf = this.buf;
    let pos = this.pos;
    let lo = x.lo;
    let hi = x.hi;
    while (hi !== 0) {
      buf[pos++] = (lo & 0x7f) | 0x80;
      lo = ((lo >>> 7) | (hi << 25)) >>> 0;
      hi >>>= 7;
    }
    while (lo > 0x7f) {
      buf[pos++] = (lo & 0x7f) | 0x80;
      lo >>>= 7;
    }
    buf[pos++] = lo;
    this.pos = pos;
  }

  int64(v: number | Long64): void {
    if (typeof v === 'number') this.varint(v);
    else this.long64(v);
  }

  int32(v: number): void {
    if (v >= 0) this.varint(v);
    else this.long64({ lo: v >>> 0, hi: 0xffffffff });
  }

  bytes(b: Uint8Array): void {
    this.varint(b.length);
    this.buf.set(b, this.pos);
    this.pos += b.length;
  }

  /** A UTF-8 string whose byte length is known. */
  string(s: string, byteLen: number): void {
    this.varint(byteLen);
    const n = this.buf.write(s, this.pos, 'utf8');
    assert(n === byteLen);
    this.pos += n;
  }

  done(): Buffer {
    if (this.pos !== this.buf.length) assert.fail(`encoded ${this.pos} bytes into a buffer of ${this.buf.length}`);
    return this.buf;
  }
}

/**
 * A large encoding is made with this many free bytes in front of it, so that gRPC's message prefix
 * (src/grpcjs/wire.ts, frameMessage) can be written there instead of copying the whole message
 * into a new buffer: a paged list's 500 KiB response was allocated and copied twice.
 */
const PREFIX_ROOM_BYTES = 5;
/** Encodings at least this large get the room (smaller ones come from Node's pool, their copy is cheap). */
const PREFIX_ROOM_MIN_BYTES = 4096;
/**
 * Where such an encoding keeps the whole buffer, room included. A registered symbol: frameMessage
 * reads it without importing the protobuf layer.
 */
const PREFIX_ROOM = Symbol.for('etcd-ts.prefixRoom');

/** Whether allocEncoding may lend from responsePool now (only inside encodePooled). */
let pooling = false;

/**
 * Runs `encode(arg)` (no closure per response) with its large encodings lent from responsePool (src/runtime/buffer_pool.ts). Only
 * for a response written once, to one HTTP/2 stream of ours, which hands the buffer back when the
 * socket has written it: never for an encoding shared between streams (a watch revision's events).
 */
export function encodePooled<A, T>(encode: (arg: A) => T, arg: A): T {
  assert(!pooling, 'encodePooled nested');
  pooling = true;
  try {
    return encode(arg);
  } finally {
    pooling = false;
  }
}

/**
 * A buffer for an encoding of `size` bytes, with PREFIX_ROOM_BYTES free in front when it is large.
 * Inside encodePooled, a large one is lent from responsePool: the frame (room and body, exactly)
 * then carries the pool's buffer under POOLED_BUFFER.
 */
export function allocEncoding(size: number): Buffer {
  if (size < PREFIX_ROOM_MIN_BYTES) return Buffer.allocUnsafe(size);
  const lent = pooling ? responsePool.take(PREFIX_ROOM_BYTES + size) : null;
  const whole = lent === null ? Buffer.allocUnsafe(PREFIX_ROOM_BYTES + size) : lent.subarray(0, PREFIX_ROOM_BYTES + size);
  if (lent !== null) (whole as Buffer & { [POOLED_BUFFER]?: Buffer })[POOLED_BUFFER] = lent;
  const body = whole.subarray(PREFIX_ROOM_BYTES);
  (body as Buffer & { [PREFIX_ROOM]?: Buffer })[PREFIX_ROOM] = whole;
  return body;
}

// ---------------------------------------------------------------- fields of the encoders

/** Size of an int64/uint64 field that is omitted when zero. */
export function int64FieldSize(v: unknown, tagBytes = 1): number {
  if (v === null || v === undefined) return 0;
  const x = int64Wire(v);
  return x === 0 ? 0 : tagBytes + int64Size(x);
}

export function writeInt64Field(w: Writer, tag: number, v: unknown): void {
  if (v === null || v === undefined) return;
  const x = int64Wire(v);
  if (x === 0) return;
  w.tag(tag);
  w.int64(x);
}

export function bytesFieldSize(v: unknown, tagBytes = 1): number {
  const b = bytesWire(v);
  return b === null ? 0 : tagBytes + varintSize(b.length) + b.length;
}

export function writeBytesField(w: Writer, tag: number, v: unknown): void {
  const b = v as Uint8Array | null | undefined;
  if (b === null || b === undefined || b.length === 0) return;
  w.tag(tag);
  w.bytes(b);
}

export function stringFieldSize(v: unknown): number {
  if (v === null || v === undefined) return 0;
  if (typeof v !== 'string') throw new NotFast('string type');
  if (v.length === 0) return 0;
  const n = Buffer.byteLength(v, 'utf8');
  return 1 + varintSize(n) + n;
}

export function writeStringField(w: Writer, tag: number, v: unknown): void {
  if (v === null || v === undefined || (v as string).length === 0) return;
  w.tag(tag);
  w.string(v as string, Buffer.byteLength(v as string, 'utf8'));
}

/** A message's encoding as parts to write one after the other, `bytes` in all. */
export interface EncodedParts {
  parts: Buffer[];
  bytes: number;
}

/**
 * A response serializer that may also give a message as parts, written as they are rather than
 * joined (src/pb/kv_wire.ts, rangeResponseParts): null means serialize it whole.
 */
export type PartsSerializer = ((value: unknown) => Buffer) & { parts?: (value: unknown) => EncodedParts | null };

/** Shared zero-length buffer for absent bytes fields (nothing can be written into it). */
export const EMPTY_BYTES = Buffer.alloc(0);

export const WIRE_VARINT = 0;
export const WIRE_FIXED64 = 1;
export const WIRE_DELIMITED = 2;
export const WIRE_FIXED32 = 5;

/** Reads protobuf wire data; every malformed input throws NotFast (protobufjs decides). */
/** A 32-bit varint takes at most 5 bytes. */
const MAX_TAG_BYTES = 5;

export class Reader {
  pos: number;
  constructor(
    readonly buf: Buffer,
    start = 0,
    readonly end = buf.length,
  ) {
    this.pos = start;
  }

  /** A varint below 2^53 as a number (tags, lengths, enums, bools, small int64s). */
  varint(): number {
    const buf = this.buf;
    let b = buf[this.pos++];
    if (b < 0x80 && this.pos <= this.end) return b;
    let result = b & 0x7f;
    let mul = 128;
    for (let i = 1; i < 10; i++) {
      if (this.pos >= this.end) throw new NotFast('truncated varint');
      b = buf[this.pos++];
      result += (b & 0x7f) * mul;
      if (b < 0x80) {
        if (result > MAX_SAFE) throw new NotFast('large varint');
        return result;
      }
      mul *= 128;
    }
    throw new NotFast('varint too long');
  }

  /**
   * A field's tag: a varint of at most 32 bits whose field number is above 0. Anything else is
   * not protobuf (gogo's decoders, etcd's, say "illegal tag"; protobufjs throws too): our callers
   * fall back to protobufjs on NotFast, which then refuses it. (Read as a plain varint, field 0
   * was skipped as an unknown field and a tag over 32 bits aliased a real field through `>>> 3`.)
   */
  tag(): number {
    const start = this.pos;
    const t = this.varint();
    // protobufjs also refuses a tag in more than 5 bytes, however small its value.
    if (t > 0xffffffff || t < 8 || this.pos - start > MAX_TAG_BYTES) throw new NotFast('illegal tag');
    return t;
  }

  /** A varint's full 64 bits as lo/hi 32-bit halves. */
  private varint64(): { lo: number; hi: number } {
    let lo = 0;
    let hi = 0;
    let i = 0;
    for (; i < 4; i++) {
      if (this.pos >= this.end) throw new NotFast('truncated varint');
      const b = this.buf[this.pos++];
      lo = (lo | ((b & 0x7f) << (i * 7))) >>> 0;
      if (b < 0x80) return { lo, hi };
    }
    if (this.pos >= this.end) throw new NotFast('truncated varint');
    let b = this.buf[this.pos++];
    lo = (lo | ((b & 0x7f) << 28)) >>> 0;
    hi = (b & 0x7f) >>> 4;
    if (b < 0x80) return { lo, hi };
    for (i = 0; i < 5; i++) {
      if (this.pos >= this.end) throw new NotFast('truncated varint');
      b = this.buf[this.pos++];
      hi = (hi | ((b & 0x7f) << (i * 7 + 3))) >>> 0;
      if (b < 0x80) return { lo, hi };
    }
    throw new NotFast('varint too long');
  }

  /** int64 as protobufjs renders it with `longs: String` (signed decimal). */
  int64String(): string {
    const b = this.buf[this.pos];
    if (b < 0x80 && this.pos < this.end) {
      this.pos++;
      return SMALL_DECIMALS[b];
    }
    const { lo, hi } = this.varint64();
    if (hi < 0x200000) return String(hi * TWO_32 + lo);
    if (hi < 0x80000000) return long64ToDecimal(lo, hi);
    // Negative: the magnitude is the two's complement.
    const nlo = (~lo + 1) >>> 0;
    const nhi = (~hi + (nlo === 0 ? 1 : 0)) >>> 0;
    return '-' + long64ToDecimal(nlo, nhi);
  }

  /** uint64 as protobufjs renders it with `longs: String` (unsigned decimal). */
  uint64String(): string {
    const b = this.buf[this.pos];
    if (b < 0x80 && this.pos < this.end) {
      this.pos++;
      return SMALL_DECIMALS[b];
    }
    const { lo, hi } = this.varint64();
    if (hi < 0x200000) return String(hi * TWO_32 + lo);
    return long64ToDecimal(lo, hi);
  }

  /** int32 / enum: the low 32 bits of the varint, signed (as protobufjs). */
  int32(): number {
    const b = this.buf[this.pos];
    if (b < 0x80 && this.pos < this.end) {
      this.pos++;
      return b;
    }
    return this.varint64().lo | 0;
  }

  bool(): boolean {
    const { lo, hi } = this.varint64();
    return lo !== 0 || hi !== 0;
  }

  private length(): number {
    const len = this.varint();
    if (len > this.end - this.pos) throw new NotFast('truncated field');
    return len;
  }

  /** A bytes field: a view into the input (as protobufjs gives), or a shared empty buffer. */
  bytes(): Buffer {
    const len = this.length();
    if (len === 0) return EMPTY_BYTES;
    const start = this.pos;
    this.pos += len;
    return this.buf.subarray(start, this.pos);
  }

  string(): string {
    const len = this.length();
    const start = this.pos;
    this.pos += len;
    return this.buf.toString('utf8', start, this.pos);
  }

  /** The end offset of an embedded message starting here (after its length). */
  messageEnd(): number {
    const len = this.length();
    return this.pos + len;
  }

  skip(wireType: number): void {
    switch (wireType) {
      case WIRE_VARINT:
        this.varint64();
        return;
      case WIRE_FIXED64:
        this.pos += 8;
        break;
      case WIRE_DELIMITED: {
        // Not `this.pos += this.length()`: that would add to pos as it was before the length.
        const len = this.length();
        this.pos += len;
        return;
      }
      case WIRE_FIXED32:
        this.pos += 4;
        break;
      default:
        // Groups (3, 4) and invalid types: protobufjs has its own ideas.
        throw new NotFast(`wire type ${wireType}`);
    }
    if (this.pos > this.end) throw new NotFast('truncated field');
  }
}

const SMALL_DECIMALS: readonly string[] = Array.from({ length: 128 }, (_, i) => String(i));

const GROUP = 1e7;
const GROUP_DIGITS = 7;

/**
 * Decimal digits of the unsigned 64-bit value hi * 2^32 + lo: long division of its four
 * 16-bit limbs by 10^7, every intermediate exact in a double.
 */
function long64ToDecimal(lo: number, hi: number): string {
  let l0 = hi >>> 16;
  let l1 = hi & 0xffff;
  let l2 = lo >>> 16;
  let l3 = lo & 0xffff;
  let out = '';
  for (;;) {
    let cur = l0;
    l0 = Math.floor(cur / GROUP);
    cur = (cur - l0 * GROUP) * 65536 + l1;
    l1 = Math.floor(cur / GROUP);
    cur = (cur - l1 * GROUP) * 65536 + l2;
    l2 = Math.floor(cur / GROUP);
    cur = (cur - l2 * GROUP) * 65536 + l3;
    l3 = Math.floor(cur / GROUP);
    const group = cur - l3 * GROUP;
    if (l0 === 0 && l1 === 0 && l2 === 0 && l3 === 0) return String(group) + out;
    out = String(group).padStart(GROUP_DIGITS, '0') + out;
  }
}

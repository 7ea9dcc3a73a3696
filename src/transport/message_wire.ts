// raftpb.Message without snapshots, encoded and decoded by hand: the bytes protobufjs writes
// (fields by number, every scalar present), read back from any valid encoding. Per message this
// replaces building a protobufjs-shaped object, Long/BigInt conversions and a generic writer;
// measured several times cheaper for a heartbeat and for a MsgApp of ten 300-byte entries.
// Messages carrying a snapshot (rare, large) stay on protobufjs (codec.ts).
import assert from 'node:assert';
import type { Entry, Message } from '../raft/types';

const WIRE_VARINT = 0;
const WIRE_FIXED64 = 1;
const WIRE_BYTES = 2;
const WIRE_FIXED32 = 5;

const TWO_32 = 2 ** 32;
const U64_LIMIT = 1n << 64n;

/** Field tags (field number << 3 | wire type) of raftpb.Message and raftpb.Entry. */
const TAG = {
  type: (1 << 3) | WIRE_VARINT,
  to: (2 << 3) | WIRE_VARINT,
  from: (3 << 3) | WIRE_VARINT,
  term: (4 << 3) | WIRE_VARINT,
  logTerm: (5 << 3) | WIRE_VARINT,
  index: (6 << 3) | WIRE_VARINT,
  entries: (7 << 3) | WIRE_BYTES,
  commit: (8 << 3) | WIRE_VARINT,
  reject: (10 << 3) | WIRE_VARINT,
  rejectHint: (11 << 3) | WIRE_VARINT,
  context: (12 << 3) | WIRE_BYTES,
  entryType: (1 << 3) | WIRE_VARINT,
  entryTerm: (2 << 3) | WIRE_VARINT,
  entryIndex: (3 << 3) | WIRE_VARINT,
  entryData: (4 << 3) | WIRE_BYTES,
} as const;

/** Field number of Message.snapshot: a message with one goes to the generic codec. */
export const SNAPSHOT_FIELD = 9;

// ------------------------------------------------------------------ encoding

function varintSize(n: number): number {
  let size = 1;
  while (n >= 0x80) {
    n = Math.floor(n / 0x80);
    size++;
  }
  return size;
}

function checkU64(n: number): void {
  // The message is built only on failure: a template string per field would dominate the cost.
  if (!(Number.isSafeInteger(n) && n >= 0)) assert.fail(`not a uint64-safe number: ${n}`);
}

function putVarint(buf: Buffer, pos: number, n: number): number {
  while (n >= 0x80) {
    buf[pos++] = (n % 0x80) | 0x80;
    n = Math.floor(n / 0x80);
  }
  buf[pos++] = n;
  return pos;
}

/** Member IDs use all 64 bits; a cluster has a handful, so their varints are computed once. */
const idVarints = new Map<bigint, Buffer>();
const MAX_CACHED_IDS = 256;

function idVarint(id: bigint): Buffer {
  let v = idVarints.get(id);
  if (v !== undefined) return v;
  if (id < 0n || id >= U64_LIMIT) assert.fail(`not a uint64 ID: ${id}`);
  const bytes: number[] = [];
  let n = id;
  while (n >= 0x80n) {
    bytes.push(Number(n & 0x7fn) | 0x80);
    n >>= 7n;
  }
  bytes.push(Number(n));
  v = Buffer.from(bytes);
  if (idVarints.size >= MAX_CACHED_IDS) idVarints.clear();
  idVarints.set(id, v);
  return v;
}

function entrySize(e: Entry): number {
  checkU64(e.term);
  checkU64(e.index);
  return 1 + varintSize(e.type) + 1 + varintSize(e.term) + 1 + varintSize(e.index) + 1 + varintSize(e.data.length) + e.data.length;
}

/** Encodes a message without a snapshot (the caller checks `m.snapshot === null`). */
export function encodeMessageFast(m: Message): Buffer {
  assert(m.snapshot === null);
  const to = idVarint(m.to);
  const from = idVarint(m.from);
  checkU64(m.term);
  checkU64(m.logTerm);
  checkU64(m.index);
  checkU64(m.commit);
  checkU64(m.rejectHint);
  let size =
    1 + varintSize(m.type) +
    1 + to.length +
    1 + from.length +
    1 + varintSize(m.term) +
    1 + varintSize(m.logTerm) +
    1 + varintSize(m.index) +
    1 + varintSize(m.commit) +
    2 +
    1 + varintSize(m.rejectHint);
  const ents = m.entries;
  let entrySizes: number[] | null = null;
  if (ents.length > 0) {
    entrySizes = new Array<number>(ents.length);
    for (let i = 0; i < ents.length; i++) {
      const s = entrySize(ents[i]!);
      entrySizes[i] = s;
      size += 1 + varintSize(s) + s;
    }
  }
  if (m.context !== null) size += 1 + varintSize(m.context.length) + m.context.length;

  const buf = Buffer.allocUnsafe(size);
  let p = 0;
  buf[p++] = TAG.type;
  p = putVarint(buf, p, m.type);
  buf[p++] = TAG.to;
  p += to.copy(buf, p);
  buf[p++] = TAG.from;
  p += from.copy(buf, p);
  buf[p++] = TAG.term;
  p = putVarint(buf, p, m.term);
  buf[p++] = TAG.logTerm;
  p = putVarint(buf, p, m.logTerm);
  buf[p++] = TAG.index;
  p = putVarint(buf, p, m.index);
  for (let i = 0; i < ents.length; i++) {
    const e = ents[i]!;
    buf[p++] = TAG.entries;
    p = putVarint(buf, p, entrySizes![i]!);
    buf[p++] = TAG.entryType;
    p = putVarint(buf, p, e.type);
    buf[p++] = TAG.entryTerm;
    p = putVarint(buf, p, e.term);
    buf[p++] = TAG.entryIndex;
    p = putVarint(buf, p, e.index);
    buf[p++] = TAG.entryData;
    p = putVarint(buf, p, e.data.length);
    p += e.data.copy(buf, p);
  }
  buf[p++] = TAG.commit;
  p = putVarint(buf, p, m.commit);
  buf[p++] = TAG.reject;
  buf[p++] = m.reject ? 1 : 0;
  buf[p++] = TAG.rejectHint;
  p = putVarint(buf, p, m.rejectHint);
  if (m.context !== null) {
    buf[p++] = TAG.context;
    p = putVarint(buf, p, m.context.length);
    p += m.context.copy(buf, p);
  }
  assert.equal(p, size);
  return buf;
}

// ------------------------------------------------------------------ decoding

/** Thrown for bytes that are not a raftpb.Message this reader handles. */
export class WireError extends Error {}

/** A cursor over one buffer; varints come back as numbers (or, for IDs, bigints). */
class Reader {
  pos: number;
  constructor(
    readonly buf: Buffer,
    start: number,
    public end: number,
  ) {
    this.pos = start;
  }

  /** A varint of at most 53 bits (index, term, lengths, enums). */
  number(): number {
    const buf = this.buf;
    let result = 0;
    let mul = 1;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= this.end) throw new WireError('truncated varint');
      const b = buf[this.pos++]!;
      result += (b & 0x7f) * mul;
      if (b < 0x80) {
        // Index/term/commit above 2^53 cannot come from a sane peer; refuse instead of rounding.
        if (!Number.isSafeInteger(result)) throw new WireError('uint64 beyond 2^53 in raft message');
        return result;
      }
      mul *= 0x80;
    }
    throw new WireError('varint too long');
  }

  /** A full 64-bit varint (member IDs). */
  bigint(): bigint {
    const start = this.pos;
    let lo = 0;
    let hi = 0;
    // Running place values: `2 ** shift` with a variable shift is a call to pow in V8 (it showed
    // in a member's profile at ~0.6%, every received message carries two IDs).
    let loMul = 1;
    let hiMul = 8;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= this.end) throw new WireError('truncated varint');
      const b = this.buf[this.pos++]!;
      const bits = b & 0x7f;
      if (i < 4) {
        lo += bits * loMul;
        loMul *= 0x80;
      } else if (i === 4) {
        lo += (bits & 0x0f) * 0x10000000;
        hi += bits >> 4;
      } else {
        hi += bits * hiMul;
        hiMul *= 0x80;
      }
      if (b < 0x80) return cachedId(hi % TWO_32, lo);
    }
    this.pos = start;
    throw new WireError('varint too long');
  }

  bytes(): Buffer {
    const len = this.number();
    if (this.pos + len > this.end) throw new WireError('truncated bytes');
    const out = this.buf.subarray(this.pos, this.pos + len);
    this.pos += len;
    return out;
  }

  skip(wireType: number): void {
    switch (wireType) {
      case WIRE_VARINT:
        this.bigint();
        return;
      case WIRE_FIXED64:
        this.pos += 8;
        break;
      case WIRE_BYTES:
        this.pos += this.number();
        break;
      case WIRE_FIXED32:
        this.pos += 4;
        break;
      default:
        throw new WireError(`unsupported wire type ${wireType}`);
    }
    if (this.pos > this.end) throw new WireError('truncated field');
  }
}

/** Decoded member IDs by their two 32-bit halves (exact, and no BigInt arithmetic per message). */
const idsByHalves = new Map<number, Map<number, bigint>>();
let cachedIdCount = 0;

function cachedId(hi: number, lo: number): bigint {
  let byLo = idsByHalves.get(hi);
  let id = byLo?.get(lo);
  if (id !== undefined) return id;
  id = (BigInt(hi) << 32n) | BigInt(lo);
  if (cachedIdCount >= MAX_CACHED_IDS) {
    idsByHalves.clear();
    cachedIdCount = 0;
    byLo = undefined;
  }
  if (byLo === undefined) {
    byLo = new Map();
    idsByHalves.set(hi, byLo);
  }
  byLo.set(lo, id);
  cachedIdCount++;
  return id;
}

const EMPTY = Buffer.alloc(0);

/** Reads one Entry ending at `end`, with the reader narrowed to it meanwhile. */
function decodeEntry(r: Reader, end: number): Entry {
  const e: Entry = { term: 0, index: 0, type: 0, data: EMPTY };
  const outerEnd = r.end;
  r.end = end;
  while (r.pos < end) {
    const tag = r.number();
    switch (tag) {
      case TAG.entryType:
        e.type = r.number();
        break;
      case TAG.entryTerm:
        e.term = r.number();
        break;
      case TAG.entryIndex:
        e.index = r.number();
        break;
      case TAG.entryData:
        e.data = r.bytes();
        break;
      default:
        r.skip(tag & 7);
    }
  }
  r.end = outerEnd;
  return e;
}

/**
 * Decodes a raftpb.Message; returns null when it carries a snapshot (the caller then uses the
 * generic codec). Bytes fields are views of `buf`, as protobufjs's are.
 */
export function decodeMessageFast(buf: Buffer): Message | null {
  const r = new Reader(buf, 0, buf.length);
  const m: Message = {
    type: 0,
    to: 0n,
    from: 0n,
    term: 0,
    logTerm: 0,
    index: 0,
    entries: [],
    commit: 0,
    snapshot: null,
    reject: false,
    rejectHint: 0,
    context: null,
  };
  while (r.pos < r.end) {
    const tag = r.number();
    switch (tag) {
      case TAG.type:
        m.type = r.number();
        break;
      case TAG.to:
        m.to = r.bigint();
        break;
      case TAG.from:
        m.from = r.bigint();
        break;
      case TAG.term:
        m.term = r.number();
        break;
      case TAG.logTerm:
        m.logTerm = r.number();
        break;
      case TAG.index:
        m.index = r.number();
        break;
      case TAG.entries: {
        const len = r.number();
        const end = r.pos + len;
        if (end > r.end) throw new WireError('truncated entry');
        m.entries.push(decodeEntry(r, end));
        break;
      }
      case TAG.commit:
        m.commit = r.number();
        break;
      case TAG.reject:
        m.reject = r.number() !== 0;
        break;
      case TAG.rejectHint:
        m.rejectHint = r.number();
        break;
      case TAG.context: {
        const c = r.bytes();
        // The core tests `context !== null`; an absent field and an empty one mean the same.
        m.context = c.length === 0 ? null : c;
        break;
      }
      default:
        if (tag >>> 3 === SNAPSHOT_FIELD) return null;
        r.skip(tag & 7);
    }
  }
  return m;
}

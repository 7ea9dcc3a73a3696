// mvccpb.KeyValue in protobuf wire format, written by hand: the layout etcd stores, so
// HashKV equals etcd's for equal histories. Fields: 1 key, 2 create_revision, 3 mod_revision,
// 4 version, 5 value, 6 lease (int64 varints; zero values are omitted like gogo does).
import assert from 'node:assert';
import type { KeyValue } from './types';

function varintLen(v: bigint): number {
  let n = 1;
  while (v >= 0x80n) {
    v >>= 7n;
    n++;
  }
  return n;
}

function numVarintLen(v: number): number {
  let n = 1;
  while (v >= 0x80) {
    v = Math.floor(v / 128);
    n++;
  }
  return n;
}

function writeNumVarint(buf: Buffer, pos: number, v: number): number {
  while (v >= 0x80) {
    buf[pos++] = (v % 128) | 0x80;
    v = Math.floor(v / 128);
  }
  buf[pos++] = v;
  return pos;
}

function writeBigVarint(buf: Buffer, pos: number, v: bigint): number {
  while (v >= 0x80n) {
    buf[pos++] = Number(v & 0x7fn) | 0x80;
    v >>= 7n;
  }
  buf[pos++] = Number(v);
  return pos;
}

/** int64 on the wire: negative values as their 64-bit two's complement. */
function leaseToUnsigned(lease: bigint): bigint {
  return BigInt.asUintN(64, lease);
}

export function encodeKeyValue(kv: KeyValue): Buffer {
  return encodeFields(kv.key, kv.createRevision, kv.modRevision, kv.version, kv.value, kv.lease);
}

/** Where encodeFields wrote the key's and the value's bytes (module state: it is never re-entered). */
let encodedKeyStart = 0;
let encodedValueStart = 0;

function encodeFields(key: Buffer, createRevision: number, modRevision: number, version: number, value: Buffer, leaseId: bigint): Buffer {
  assert(Number.isSafeInteger(createRevision) && createRevision >= 0);
  assert(Number.isSafeInteger(modRevision) && modRevision >= 0);
  assert(Number.isSafeInteger(version) && version >= 0);
  const lease = leaseToUnsigned(leaseId);
  let size = 0;
  if (key.length > 0) size += 1 + numVarintLen(key.length) + key.length;
  if (createRevision !== 0) size += 1 + numVarintLen(createRevision);
  if (modRevision !== 0) size += 1 + numVarintLen(modRevision);
  if (version !== 0) size += 1 + numVarintLen(version);
  if (value.length > 0) size += 1 + numVarintLen(value.length) + value.length;
  if (lease !== 0n) size += 1 + varintLen(lease);
  const buf = Buffer.allocUnsafe(size);
  let p = 0;
  if (key.length > 0) {
    buf[p++] = 0x0a;
    p = writeNumVarint(buf, p, key.length);
    encodedKeyStart = p;
    p += key.copy(buf, p);
  }
  if (createRevision !== 0) {
    buf[p++] = 0x10;
    p = writeNumVarint(buf, p, createRevision);
  }
  if (modRevision !== 0) {
    buf[p++] = 0x18;
    p = writeNumVarint(buf, p, modRevision);
  }
  if (version !== 0) {
    buf[p++] = 0x20;
    p = writeNumVarint(buf, p, version);
  }
  if (value.length > 0) {
    buf[p++] = 0x2a;
    p = writeNumVarint(buf, p, value.length);
    encodedValueStart = p;
    p += value.copy(buf, p);
  }
  if (lease !== 0n) {
    buf[p++] = 0x30;
    p = writeBigVarint(buf, p, lease);
  }
  assert(p === size);
  return buf;
}

/**
 * encodeKeyValue's record for these fields, and the KeyValue it stores with key and value as
 * views into that record: one allocation and one copy of each for a put, instead of a copy of
 * the key and of the value (so that the KeyValue does not hold the request's buffers) and then
 * the record. The KeyValue carries the record (storedRecord), so a watch event or a prev_kv
 * built from it is sent as those bytes.
 */
export function encodeStoredKeyValue(
  key: Buffer,
  createRevision: number,
  modRevision: number,
  version: number,
  value: Buffer,
  lease: bigint,
): { kv: KeyValue; record: Buffer } {
  // A put's key is never empty and its revisions and version start at 1: the record is canonical,
  // as decodeKeyValue requires of the records it hands out.
  if (key.length === 0 || createRevision === 0 || modRevision === 0 || version === 0) {
    assert.fail(`a put's KeyValue needs a key and non-zero revisions and version (${key.length}, ${createRevision}, ${modRevision}, ${version})`);
  }
  const record = encodeFields(key, createRevision, modRevision, version, value, lease);
  const keyView = record.subarray(encodedKeyStart, encodedKeyStart + key.length);
  const valueView = value.length > 0 ? record.subarray(encodedValueStart, encodedValueStart + value.length) : EMPTY;
  return { kv: new StoredKeyValue(keyView, createRevision, modRevision, version, valueView, lease, record), record };
}

/** Shared empty buffer for absent fields (never written to). */
const EMPTY = Buffer.alloc(0);

/**
 * A copy of data[start, start + len) in its own Buffer (pooled when small). Buffer.copyBytesFrom
 * does the same several times slower on Node 20, and every range reads through here.
 */
function copyOut(data: Uint8Array, start: number, len: number): Buffer {
  const out = Buffer.allocUnsafe(len);
  out.set(data.subarray(start, start + len));
  return out;
}

/**
 * Records are copied out of LMDB's read buffer into slabs of this size: one view per record
 * instead of a Buffer.allocUnsafe each (dearer, and more garbage). A slab stays alive while any
 * KeyValue decoded into it does, as Node's own Buffer pool does: keep a decoded key or value
 * for long only as a copy (keysWithLease does).
 */
const SLAB_BYTES = 16 * 1024;
/** Larger records get a buffer of their own. */
const SLAB_MAX_RECORD_BYTES = SLAB_BYTES / 4;
let slab = Buffer.allocUnsafeSlow(SLAB_BYTES);
let slabPos = 0;

function copyRecord(data: Uint8Array, len: number): Buffer {
  if (len > SLAB_MAX_RECORD_BYTES) return copyOut(data, 0, len);
  if (slabPos + len > SLAB_BYTES) {
    slab = Buffer.allocUnsafeSlow(SLAB_BYTES);
    slabPos = 0;
  }
  const start = slabPos;
  slab.set(new Uint8Array(data.buffer, data.byteOffset, len), start);
  slabPos = start + len;
  return slab.subarray(start, start + len);
}

/**
 * A KeyValue read from the store together with the record it was decoded from, when that record
 * is exactly what encodeKeyValue writes for these fields (so a response can carry the record's
 * bytes instead of encoding the fields again). The record is handed out only while every field
 * still holds what was decoded (key and value are views into the record, so the very same
 * buffers): code that changes a field gets its fields encoded, never stale bytes. (Checking is
 * cheaper than Object.freeze, which showed in profiles.)
 */
class StoredKeyValue implements KeyValue {
  key: Buffer;
  createRevision: number;
  modRevision: number;
  version: number;
  value: Buffer;
  lease: bigint;
  readonly #record: Buffer;
  readonly #key: Buffer;
  readonly #createRevision: number;
  readonly #modRevision: number;
  readonly #version: number;
  readonly #value: Buffer;
  readonly #lease: bigint;

  constructor(key: Buffer, createRevision: number, modRevision: number, version: number, value: Buffer, lease: bigint, record: Buffer) {
    this.key = key;
    this.createRevision = createRevision;
    this.modRevision = modRevision;
    this.version = version;
    this.value = value;
    this.lease = lease;
    this.#record = record;
    this.#key = key;
    this.#createRevision = createRevision;
    this.#modRevision = modRevision;
    this.#version = version;
    this.#value = value;
    this.#lease = lease;
  }

  static recordOf(kv: KeyValue): Buffer | null {
    if (!(#record in kv)) return null;
    const s = kv as StoredKeyValue;
    const unchanged =
      s.key === s.#key &&
      s.createRevision === s.#createRevision &&
      s.modRevision === s.#modRevision &&
      s.version === s.#version &&
      s.value === s.#value &&
      s.lease === s.#lease;
    return unchanged ? s.#record : null;
  }
}

/**
 * The stored mvccpb.KeyValue bytes `kv` was decoded from (the canonical encoding of its
 * fields), or null for a KeyValue built any other way or changed since.
 */
export function storedRecord(kv: KeyValue): Buffer | null {
  return StoredKeyValue.recordOf(kv);
}

// Varint reading for decodeKeyValue. The position after a varint and whether every varint so far
// was in its shortest form are module state: decoding is synchronous and never re-entered, and
// this keeps the per-record path free of allocations. Bounds are checked with plain
// comparisons (assert() per byte showed in profiles).
let varintEnd = 0;
let varintsShortest = true;

function truncated(): never {
  assert.fail('truncated varint in stored KeyValue');
}

/** A varint below 2^53 (lengths, revisions, versions) at p, within buf[0, len). */
function readSmall(buf: Uint8Array, p: number, len: number): number {
  let result = 0;
  let mul = 1;
  for (let i = 0; i < 8; i++) {
    if (p >= len) truncated();
    const b = buf[p++];
    result += (b & 0x7f) * mul;
    if ((b & 0x80) === 0) {
      // A multi-byte varint ending in a zero byte has a shorter form.
      if (b === 0 && i > 0) varintsShortest = false;
      varintEnd = p;
      return result;
    }
    mul *= 128;
  }
  const v = readBig(buf, p - 8, len);
  assert(v <= BigInt(Number.MAX_SAFE_INTEGER), 'varint beyond 2^53 in stored KeyValue');
  return Number(v);
}

function readBig(buf: Uint8Array, p: number, len: number): bigint {
  let result = 0n;
  let shift = 0n;
  for (;;) {
    if (p >= len) truncated();
    const b = buf[p++];
    result |= BigInt(b & 0x7f) << shift;
    if ((b & 0x80) === 0) {
      if ((b === 0 && shift > 0n) || result >= 1n << 64n) varintsShortest = false;
      varintEnd = p;
      return result;
    }
    shift += 7n;
    if (shift >= 70n) assert.fail('varint too long in stored KeyValue');
  }
}

/**
 * What readFields() found in a record: each field's last occurrence, the key and the value as
 * positions in the buffer read (-1: absent), and whether the fields came in encodeKeyValue's
 * layout (once each, in field order, no zero values; varintsShortest says the rest). Module
 * state, like varintEnd: reading is synchronous and never re-entered.
 */
const fields = {
  keyStart: -1,
  keyBytes: 0,
  valueStart: -1,
  valueBytes: 0,
  createRevision: 0,
  modRevision: 0,
  version: 0,
  lease: 0n,
  canonical: true,
  /** Set by readRecordFields only. */
  valueFieldStart: -1,
};

/** Reads the fields of the record in buf[0, len) into `fields`. */
function readFields(buf: Uint8Array, len: number): void {
  const f = fields;
  f.keyStart = -1;
  f.keyBytes = 0;
  f.valueStart = -1;
  f.valueBytes = 0;
  f.createRevision = 0;
  f.modRevision = 0;
  f.version = 0;
  f.lease = 0n;
  let canonical = true;
  varintsShortest = true;
  let lastTag = 0;
  let p = 0;
  while (p < len) {
    const tag = buf[p++];
    if (tag <= lastTag) canonical = false;
    lastTag = tag;
    switch (tag) {
      case 0x0a: {
        const n = readSmall(buf, p, len);
        p = varintEnd;
        if (p + n > len) assert.fail('truncated key in stored KeyValue');
        if (n === 0) canonical = false;
        f.keyStart = p;
        f.keyBytes = n;
        p += n;
        break;
      }
      case 0x10:
        f.createRevision = readSmall(buf, p, len);
        p = varintEnd;
        if (f.createRevision === 0) canonical = false;
        break;
      case 0x18:
        f.modRevision = readSmall(buf, p, len);
        p = varintEnd;
        if (f.modRevision === 0) canonical = false;
        break;
      case 0x20:
        f.version = readSmall(buf, p, len);
        p = varintEnd;
        if (f.version === 0) canonical = false;
        break;
      case 0x2a: {
        const n = readSmall(buf, p, len);
        p = varintEnd;
        if (p + n > len) assert.fail('truncated value in stored KeyValue');
        if (n === 0) canonical = false;
        f.valueStart = p;
        f.valueBytes = n;
        p += n;
        break;
      }
      case 0x30: {
        const u = readBig(buf, p, len);
        p = varintEnd;
        if (u === 0n) canonical = false;
        f.lease = BigInt.asIntN(64, u);
        break;
      }
      default:
        assert.fail(`unexpected field tag ${tag} in stored KeyValue`);
    }
  }
  assert(p === len, 'stored KeyValue overruns');
  f.canonical = canonical;
}

/**
 * Decodes a record. The returned buffers are copies (LMDB memory may be reused). With
 * `withoutValue` the value is left empty (keys-only ranges send none). Otherwise, when the
 * record is canonical, the result also carries a copy of the record (storedRecord()).
 */
export function decodeKeyValue(data: Uint8Array, withoutValue = false): KeyValue {
  const len = data.length;
  // One copy of the whole record; key and value are views into it.
  const buf: Uint8Array = withoutValue ? data : copyRecord(data, len);
  readFields(buf, len);
  const f = fields;
  let key: Buffer = EMPTY;
  if (f.keyStart >= 0) {
    key = withoutValue ? copyOut(buf, f.keyStart, f.keyBytes) : (buf as Buffer).subarray(f.keyStart, f.keyStart + f.keyBytes);
  }
  const value = withoutValue || f.valueStart < 0 ? EMPTY : (buf as Buffer).subarray(f.valueStart, f.valueStart + f.valueBytes);
  if (!withoutValue && f.canonical && varintsShortest) {
    return new StoredKeyValue(key, f.createRevision, f.modRevision, f.version, value, f.lease, buf as Buffer);
  }
  return { key, createRevision: f.createRevision, modRevision: f.modRevision, version: f.version, value, lease: f.lease };
}

/** A stored record's fields as positions and numbers (see readRecordFields). */
export interface RecordFields {
  readonly keyStart: number;
  readonly keyBytes: number;
  readonly valueStart: number;
  readonly valueBytes: number;
  readonly createRevision: number;
  readonly modRevision: number;
  readonly version: number;
  /** Where the value's field (tag, length, bytes) starts, -1 when it has none or the layout is not encodeKeyValue's. */
  readonly valueFieldStart: number;
}

/**
 * The fields of the record in data[0, len), in the object every read of a record overwrites
 * (decodeKeyValue's too); data may be a view of LMDB's read buffer. A range reads its revisions for filters and sorts,
 * and a keys-only one cuts the value's field out of the record.
 */
export function readRecordFields(data: Uint8Array, len: number): RecordFields {
  readFields(data, len);
  const f = fields;
  // In that layout the value's field is once in the record: its tag byte and shortest length in front.
  f.valueFieldStart = f.valueStart >= 0 && f.canonical && varintsShortest ? f.valueStart - 1 - numVarintLen(f.valueBytes) : -1;
  return f;
}

/** A stored record's fields but its value, with the key as a latin1 string (see decodeRecordHead). */
export interface RecordHead {
  key: string;
  createRevision: number;
  modRevision: number;
  version: number;
  lease: bigint;
}

const head: RecordHead = { key: '', createRevision: 0, modRevision: 0, version: 0, lease: 0n };

/**
 * Decodes the record in data[0, len) but its value, into one object that the next call
 * overwrites. data may be a view of LMDB's read buffer (nothing of it is kept): the key index's
 * rebuild at start-up reads every record once, and allocates nothing per record here but the
 * key's string.
 */
export function decodeRecordHead(data: Buffer, len: number): RecordHead {
  assert(len <= data.length, 'record beyond its buffer');
  readFields(data, len);
  const f = fields;
  assert(f.keyStart >= 0, 'stored KeyValue without a key');
  head.key = data.toString('latin1', f.keyStart, f.keyStart + f.keyBytes);
  head.createRevision = f.createRevision;
  head.modRevision = f.modRevision;
  head.version = f.version;
  head.lease = f.lease;
  return head;
}

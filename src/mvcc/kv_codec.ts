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
  assert(Number.isSafeInteger(kv.createRevision) && kv.createRevision >= 0);
  assert(Number.isSafeInteger(kv.modRevision) && kv.modRevision >= 0);
  assert(Number.isSafeInteger(kv.version) && kv.version >= 0);
  const lease = leaseToUnsigned(kv.lease);
  let size = 0;
  if (kv.key.length > 0) size += 1 + numVarintLen(kv.key.length) + kv.key.length;
  if (kv.createRevision !== 0) size += 1 + numVarintLen(kv.createRevision);
  if (kv.modRevision !== 0) size += 1 + numVarintLen(kv.modRevision);
  if (kv.version !== 0) size += 1 + numVarintLen(kv.version);
  if (kv.value.length > 0) size += 1 + numVarintLen(kv.value.length) + kv.value.length;
  if (lease !== 0n) size += 1 + varintLen(lease);
  const buf = Buffer.allocUnsafe(size);
  let p = 0;
  if (kv.key.length > 0) {
    buf[p++] = 0x0a;
    p = writeNumVarint(buf, p, kv.key.length);
    p += kv.key.copy(buf, p);
  }
  if (kv.createRevision !== 0) {
    buf[p++] = 0x10;
    p = writeNumVarint(buf, p, kv.createRevision);
  }
  if (kv.modRevision !== 0) {
    buf[p++] = 0x18;
    p = writeNumVarint(buf, p, kv.modRevision);
  }
  if (kv.version !== 0) {
    buf[p++] = 0x20;
    p = writeNumVarint(buf, p, kv.version);
  }
  if (kv.value.length > 0) {
    buf[p++] = 0x2a;
    p = writeNumVarint(buf, p, kv.value.length);
    p += kv.value.copy(buf, p);
  }
  if (lease !== 0n) {
    buf[p++] = 0x30;
    p = writeBigVarint(buf, p, lease);
  }
  assert(p === size);
  return buf;
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
 * Decodes a record; the returned buffers are copies (LMDB memory may be reused). With
 * `withoutValue` the value is left empty (rebuilding the index at start-up reads every record
 * and needs none of their values).
 */
export function decodeKeyValue(data: Uint8Array, withoutValue = false): KeyValue {
  const buf = data;
  const kv: KeyValue = { key: EMPTY, createRevision: 0, modRevision: 0, version: 0, value: EMPTY, lease: 0n };
  let p = 0;
  const readVarint = (): bigint => {
    let result = 0n;
    let shift = 0n;
    for (;;) {
      assert(p < buf.length, 'truncated varint');
      const b = buf[p++];
      result |= BigInt(b & 0x7f) << shift;
      if ((b & 0x80) === 0) return result;
      shift += 7n;
      assert(shift < 70n, 'varint too long');
    }
  };
  const readSmall = (): number => {
    // Fast path for varints below 2^28 (lengths, revisions of most stores).
    let result = 0;
    let mul = 1;
    const start = p;
    for (let i = 0; i < 8; i++) {
      assert(p < buf.length, 'truncated varint');
      const b = buf[p++];
      result += (b & 0x7f) * mul;
      if ((b & 0x80) === 0) return result;
      mul *= 128;
    }
    p = start;
    const v = readVarint();
    assert(v <= BigInt(Number.MAX_SAFE_INTEGER));
    return Number(v);
  };
  while (p < buf.length) {
    const tag = buf[p++];
    switch (tag) {
      case 0x0a: {
        const len = readSmall();
        assert(p + len <= buf.length, 'truncated key');
        kv.key = copyOut(buf, p, len);
        p += len;
        break;
      }
      case 0x10:
        kv.createRevision = readSmall();
        break;
      case 0x18:
        kv.modRevision = readSmall();
        break;
      case 0x20:
        kv.version = readSmall();
        break;
      case 0x2a: {
        const len = readSmall();
        assert(p + len <= buf.length, 'truncated value');
        if (!withoutValue) kv.value = copyOut(buf, p, len);
        p += len;
        break;
      }
      case 0x30:
        kv.lease = BigInt.asIntN(64, readVarint());
        break;
      default:
        assert.fail(`unexpected field tag ${tag} in stored KeyValue`);
    }
  }
  assert(p === buf.length, 'stored KeyValue overruns');
  return kv;
}

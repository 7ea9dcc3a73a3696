// How a lease is stored in the backend's "lease" sub-database. The layout follows etcd's lease
// bucket: key = the lease ID as 8 big-endian bytes (two's complement), value = the protobuf
// message leasepb.Lease { int64 ID = 1; int64 TTL = 2; int64 RemainingTTL = 3; }, so a dump of
// our bucket reads like etcd's.
import assert from 'node:assert';

export interface LeaseRecord {
  id: bigint;
  ttlSec: number;
  /** 0: unset (the full TTL applies). Set by lease checkpoints. */
  remainingTtlSec: number;
}

const INT64_MIN = -(1n << 63n);
const INT64_MAX = (1n << 63n) - 1n;

export function isInt64(v: bigint): boolean {
  return v >= INT64_MIN && v <= INT64_MAX;
}

export function leaseKey(id: bigint): Buffer {
  assert(isInt64(id), 'lease ID out of int64 range');
  const b = Buffer.alloc(8);
  b.writeBigInt64BE(id);
  return b;
}

export function leaseIdFromKey(key: Buffer): bigint {
  assert.strictEqual(key.length, 8, 'lease key must be 8 bytes');
  return key.readBigInt64BE(0);
}

function pushVarint(out: number[], value: bigint): void {
  // int64 fields are encoded as the unsigned 64-bit two's complement (negative -> 10 bytes).
  let v = BigInt.asUintN(64, value);
  while (v >= 0x80n) {
    out.push(Number(v & 0x7fn) | 0x80);
    v >>= 7n;
  }
  out.push(Number(v));
}

export function encodeLeaseRecord(r: LeaseRecord): Buffer {
  assert(Number.isSafeInteger(r.ttlSec) && Number.isSafeInteger(r.remainingTtlSec));
  const out: number[] = [];
  // proto3 omits zero-valued scalars.
  if (r.id !== 0n) {
    out.push(0x08);
    pushVarint(out, r.id);
  }
  if (r.ttlSec !== 0) {
    out.push(0x10);
    pushVarint(out, BigInt(r.ttlSec));
  }
  if (r.remainingTtlSec !== 0) {
    out.push(0x18);
    pushVarint(out, BigInt(r.remainingTtlSec));
  }
  return Buffer.from(out);
}

export function decodeLeaseRecord(buf: Buffer): LeaseRecord {
  const rec: LeaseRecord = { id: 0n, ttlSec: 0, remainingTtlSec: 0 };
  let pos = 0;
  const readVarint = (): bigint => {
    let result = 0n;
    let shift = 0n;
    for (let i = 0; i < 10; i++) {
      assert(pos < buf.length, 'truncated lease record');
      const byte = buf[pos++];
      result |= BigInt(byte & 0x7f) << shift;
      if ((byte & 0x80) === 0) return BigInt.asIntN(64, result);
      shift += 7n;
    }
    throw new Error('malformed varint in lease record');
  };
  while (pos < buf.length) {
    const tag = Number(readVarint());
    const field = tag >>> 3;
    const wire = tag & 7;
    if (wire !== 0) {
      // Only varint fields exist in leasepb.Lease; anything else is corruption.
      throw new Error(`unexpected wire type ${wire} in lease record`);
    }
    const v = readVarint();
    if (field === 1) rec.id = v;
    else if (field === 2) rec.ttlSec = Number(v);
    else if (field === 3) rec.remainingTtlSec = Number(v);
  }
  return rec;
}

// Conversions between the store's KeyValue (numbers, bigint) and the wire objects
// (int64 as decimal strings).
import { storedRecord } from '../mvcc/kv_codec';
import type { KeyValue } from '../mvcc/types';
import { keyValueWithRecord } from '../pb/kv_wire';
import type * as pb from '../pb/types';

export const EMPTY = Buffer.alloc(0);

function leaseString(lease: bigint): string {
  return lease === 0n ? '0' : lease.toString();
}

/**
 * The wire object of a KeyValue. One read from the store keeps its stored record, which is
 * its encoding, so the response encoder copies those bytes instead of encoding it again.
 */
export function toPbKv(kv: KeyValue): pb.KeyValue {
  const record = storedRecord(kv);
  if (record !== null) {
    return keyValueWithRecord(kv.key, String(kv.createRevision), String(kv.modRevision), String(kv.version), kv.value, leaseString(kv.lease), record);
  }
  return {
    key: kv.key,
    createRevision: String(kv.createRevision),
    modRevision: String(kv.modRevision),
    version: String(kv.version),
    value: kv.value,
    lease: leaseString(kv.lease),
  };
}

/** The wire object of a KeyValue without its value (keys_only). */
export function toPbKvWithoutValue(kv: KeyValue): pb.KeyValue {
  return {
    key: kv.key,
    createRevision: String(kv.createRevision),
    modRevision: String(kv.modRevision),
    version: String(kv.version),
    value: EMPTY,
    lease: leaseString(kv.lease),
  };
}

/** A header carrying only the revision; the server fills the rest of the outermost one. */
export function revHeader(rev: number): pb.ResponseHeader {
  return { clusterId: '0', memberId: '0', revision: String(rev), raftTerm: '0' };
}

/**
 * An int64 field as a JS number. Values beyond 2^53 are clamped: every revision or limit
 * that large behaves like "far in the future" / "unlimited" anyway.
 */
export function int64ToNumber(v: string | number | null | undefined): number {
  if (v === null || v === undefined || v === '') return 0;
  if (typeof v === 'number') return Number.isFinite(v) ? Math.trunc(v) : 0;
  // Up to 15 digits is always a safe integer: skip BigInt on the common path.
  if (v.length <= 15 && /^-?\d+$/.test(v)) return Number(v);
  let b: bigint;
  try {
    b = BigInt(v);
  } catch {
    return 0;
  }
  if (b > BigInt(Number.MAX_SAFE_INTEGER)) return Number.MAX_SAFE_INTEGER;
  if (b < BigInt(Number.MIN_SAFE_INTEGER)) return Number.MIN_SAFE_INTEGER;
  return Number(b);
}

export function int64ToBigInt(v: string | number | null | undefined): bigint {
  if (v === null || v === undefined || v === '' || v === '0' || v === 0) return 0n;
  try {
    return BigInt.asIntN(64, BigInt(v));
  } catch {
    return 0n;
  }
}

export function buf(b: Buffer | null | undefined): Buffer {
  return b ?? EMPTY;
}

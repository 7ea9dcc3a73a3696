// Txn compare evaluation (etcd's applyCompare / compareKV).
import type { RangeReader } from '../mvcc/store';
import type { KeyValue } from '../mvcc/types';
import { Compare_CompareResult as Result, Compare_CompareTarget as Target } from '../pb/types';
import type * as pb from '../pb/types';
import { buf, int64ToBigInt } from './kv_convert';

const ZERO_KV: KeyValue = { key: Buffer.alloc(0), createRevision: 0, modRevision: 0, version: 0, value: Buffer.alloc(0), lease: 0n };

function cmpBig(a: bigint, b: bigint): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Compares one key against the compare's target; the given-side defaults to zero when the union holds another member. */
export function compareKV(c: pb.Compare, kv: KeyValue): boolean {
  let result = 0;
  switch (c.target) {
    case Target.VALUE:
      result = Buffer.compare(kv.value, c.targetUnion === 'value' ? buf(c.value) : Buffer.alloc(0));
      break;
    case Target.CREATE:
      result = cmpBig(BigInt(kv.createRevision), c.targetUnion === 'createRevision' ? int64ToBigInt(c.createRevision) : 0n);
      break;
    case Target.MOD:
      result = cmpBig(BigInt(kv.modRevision), c.targetUnion === 'modRevision' ? int64ToBigInt(c.modRevision) : 0n);
      break;
    case Target.VERSION:
      result = cmpBig(BigInt(kv.version), c.targetUnion === 'version' ? int64ToBigInt(c.version) : 0n);
      break;
    case Target.LEASE:
      result = cmpBig(kv.lease, c.targetUnion === 'lease' ? int64ToBigInt(c.lease) : 0n);
      break;
    default:
      break;
  }
  switch (c.result) {
    case Result.EQUAL:
      return result === 0;
    case Result.NOT_EQUAL:
      return result !== 0;
    case Result.GREATER:
      return result > 0;
    case Result.LESS:
      return result < 0;
    default:
      return true;
  }
}

/** True when every key in the compare's range satisfies it (a missing key compares as zero, except for VALUE). */
export function applyCompare(reader: RangeReader, c: pb.Compare): boolean {
  let kvs: KeyValue[];
  try {
    kvs = reader.range(buf(c.key), buf(c.rangeEnd)).kvs;
  } catch {
    return false;
  }
  if (kvs.length === 0) {
    // No way to express "missing" as a value: comparing a missing key's value always fails.
    if (c.target === Target.VALUE) return false;
    return compareKV(c, ZERO_KV);
  }
  return kvs.every((kv) => compareKV(c, kv));
}

export function applyCompares(reader: RangeReader, cmps: pb.Compare[]): boolean {
  for (const c of cmps) if (!applyCompare(reader, c)) return false;
  return true;
}

// Range request semantics on top of the store (etcd's executeRange): limit with one extra key
// fetched for `more`, count ignoring limit, revision filters applied after the fetch, sort.
import type { RangeOptions, RangeReader } from '../mvcc/store';
import type { KeyValue } from '../mvcc/types';
import { RangeRequest_SortOrder as SortOrder, RangeRequest_SortTarget as SortTarget } from '../pb/types';
import type * as pb from '../pb/types';
import { keyValueFromRecord } from '../pb/kv_wire';
import { buf, int64ToNumber, revHeader, toPbKv, toPbKvWithoutValue } from './kv_convert';

function comparator(target: number): ((a: KeyValue, b: KeyValue) => number) | null {
  switch (target) {
    case SortTarget.KEY:
      return (a, b) => Buffer.compare(a.key, b.key);
    case SortTarget.VERSION:
      return (a, b) => a.version - b.version;
    case SortTarget.CREATE:
      return (a, b) => a.createRevision - b.createRevision;
    case SortTarget.MOD:
      return (a, b) => a.modRevision - b.modRevision;
    case SortTarget.VALUE:
      return (a, b) => Buffer.compare(a.value, b.value);
    default:
      return null;
  }
}

export function applyRange(reader: RangeReader, req: pb.RangeRequest): pb.RangeResponse {
  const limit = int64ToNumber(req.limit);
  const minMod = int64ToNumber(req.minModRevision);
  const maxMod = int64ToNumber(req.maxModRevision);
  const minCreate = int64ToNumber(req.minCreateRevision);
  const maxCreate = int64ToNumber(req.maxCreateRevision);
  const sortOrder = req.sortOrder ?? SortOrder.NONE;
  const sortTarget = req.sortTarget ?? SortTarget.KEY;

  // Sorting and filters need every key before the limit applies.
  let fetchLimit = limit;
  if (sortOrder !== SortOrder.NONE || minMod !== 0 || maxMod !== 0 || minCreate !== 0 || maxCreate !== 0) fetchLimit = 0;
  if (fetchLimit > 0) fetchLimit++; // one extra tells whether there is more

  const rr = reader.range(buf(req.key), buf(req.rangeEnd), {
    rev: int64ToNumber(req.revision),
    limit: fetchLimit > 0 ? fetchLimit : 0,
    countOnly: req.countOnly,
    // Sorting by value needs the values; they are dropped after the sort below.
    keysOnly: req.keysOnly && sortTarget !== SortTarget.VALUE,
  });

  let kvs = rr.kvs;
  if (maxMod !== 0) kvs = kvs.filter((kv) => !(kv.modRevision > maxMod));
  if (minMod !== 0) kvs = kvs.filter((kv) => !(kv.modRevision < minMod));
  if (maxCreate !== 0) kvs = kvs.filter((kv) => !(kv.createRevision > maxCreate));
  if (minCreate !== 0) kvs = kvs.filter((kv) => !(kv.createRevision < minCreate));

  let order: number = sortOrder;
  // The store returns keys ascending: a target other than KEY with no order means ascend,
  // and KEY ascending needs no work.
  if (sortTarget !== SortTarget.KEY && order === SortOrder.NONE) order = SortOrder.ASCEND;
  else if (sortTarget === SortTarget.KEY && order === SortOrder.ASCEND) order = SortOrder.NONE;
  const cmp = comparator(sortTarget);
  if (cmp && order === SortOrder.ASCEND) kvs = kvs.slice().sort(cmp);
  else if (cmp && order === SortOrder.DESCEND) kvs = kvs.slice().sort((a, b) => cmp(b, a));

  let more = false;
  if (limit > 0 && kvs.length > limit) {
    kvs = kvs.slice(0, limit);
    more = true;
  }
  return {
    header: revHeader(rr.rev),
    kvs: kvs.map(req.keysOnly ? toPbKvWithoutValue : toPbKv),
    more,
    count: String(rr.count),
  };
}

/** A reader that can also hand out a range's stored records (the store). */
export interface RecordRangeReader extends RangeReader {
  rangeRecords(key: Buffer, end: Buffer | null, opts: RangeOptions, each: (record: Uint8Array, length: number) => void): { count: number; rev: number };
}

/**
 * applyRange for a response that is encoded and dropped (the KV service's Range): a range with
 * no sort, no revision filters and whole keys carries each key as the bytes the store holds
 * (keyValueFromRecord), copied once, instead of decoded fields encoded again. Anything else is
 * applyRange's.
 */
export function applyRangeForWire(reader: RecordRangeReader, req: pb.RangeRequest): pb.RangeResponse {
  const sortOrder = req.sortOrder ?? SortOrder.NONE;
  const sortTarget = req.sortTarget ?? SortTarget.KEY;
  const unsorted = sortTarget === SortTarget.KEY && (sortOrder === SortOrder.NONE || sortOrder === SortOrder.ASCEND);
  const plain =
    unsorted &&
    !req.keysOnly &&
    !req.countOnly &&
    int64ToNumber(req.minModRevision) === 0 &&
    int64ToNumber(req.maxModRevision) === 0 &&
    int64ToNumber(req.minCreateRevision) === 0 &&
    int64ToNumber(req.maxCreateRevision) === 0;
  if (!plain) return applyRange(reader, req);
  const limit = int64ToNumber(req.limit);
  const kvs: pb.KeyValue[] = [];
  let more = false;
  // One key past the limit tells whether there is more; it is not copied.
  const rr = reader.rangeRecords(buf(req.key), buf(req.rangeEnd), { rev: int64ToNumber(req.revision), limit: limit > 0 ? limit + 1 : 0 }, (record, length) => {
    if (limit > 0 && kvs.length === limit) more = true;
    else kvs.push(keyValueFromRecord(record, length));
  });
  return { header: revHeader(rr.rev), kvs, more, count: String(rr.count) };
}

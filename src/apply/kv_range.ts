// Range request semantics on top of the store (etcd's executeRange): limit with one extra key
// fetched for `more`, count ignoring limit, revision filters applied after the fetch, sort.
import type { RangeOptions, RangeReader } from '../mvcc/store';
import type { KeyValue } from '../mvcc/types';
import { RangeRequest_SortOrder as SortOrder, RangeRequest_SortTarget as SortTarget } from '../pb/types';
import type * as pb from '../pb/types';
import { WireRecords } from '../pb/kv_wire';
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

/** A request's revision filters (0: none), or null when it has none. */
interface RevisionBounds {
  minMod: number;
  maxMod: number;
  minCreate: number;
  maxCreate: number;
}

function revisionBounds(req: pb.RangeRequest): RevisionBounds | null {
  const b = {
    minMod: int64ToNumber(req.minModRevision),
    maxMod: int64ToNumber(req.maxModRevision),
    minCreate: int64ToNumber(req.minCreateRevision),
    maxCreate: int64ToNumber(req.maxCreateRevision),
  };
  return b.minMod !== 0 || b.maxMod !== 0 || b.minCreate !== 0 || b.maxCreate !== 0 ? b : null;
}

/**
 * The comparator the response must be sorted with, or null when the store's order (keys
 * ascending) is the answer: a target other than KEY with no order means ascend, and KEY
 * ascending needs no work.
 */
function sortOf(req: pb.RangeRequest): ((a: KeyValue, b: KeyValue) => number) | null {
  const sortTarget = req.sortTarget ?? SortTarget.KEY;
  let order: number = req.sortOrder ?? SortOrder.NONE;
  if (sortTarget !== SortTarget.KEY && order === SortOrder.NONE) order = SortOrder.ASCEND;
  else if (sortTarget === SortTarget.KEY && order === SortOrder.ASCEND) order = SortOrder.NONE;
  if (order !== SortOrder.ASCEND && order !== SortOrder.DESCEND) return null;
  const cmp = comparator(sortTarget);
  if (cmp === null) return null;
  return order === SortOrder.ASCEND ? cmp : (a, b) => cmp(b, a);
}

export function applyRange(reader: RangeReader, req: pb.RangeRequest): pb.RangeResponse {
  return decodedRange(reader, req, revisionBounds(req), sortOf(req));
}

function decodedRange(reader: RangeReader, req: pb.RangeRequest, bounds: RevisionBounds | null, sort: ((a: KeyValue, b: KeyValue) => number) | null): pb.RangeResponse {
  const limit = int64ToNumber(req.limit);
  const sortTarget = req.sortTarget ?? SortTarget.KEY;

  // Sorting and filters need every key before the limit applies.
  let fetchLimit = limit;
  if ((req.sortOrder ?? SortOrder.NONE) !== SortOrder.NONE || bounds !== null) fetchLimit = 0;
  if (fetchLimit > 0) fetchLimit++; // one extra tells whether there is more

  const rr = reader.range(buf(req.key), buf(req.rangeEnd), {
    rev: int64ToNumber(req.revision),
    limit: fetchLimit > 0 ? fetchLimit : 0,
    countOnly: req.countOnly,
    // Sorting by value needs the values; they are dropped after the sort below.
    keysOnly: req.keysOnly && sortTarget !== SortTarget.VALUE,
  });

  let kvs = rr.kvs;
  if (bounds !== null) {
    const { minMod, maxMod, minCreate, maxCreate } = bounds;
    if (maxMod !== 0) kvs = kvs.filter((kv) => !(kv.modRevision > maxMod));
    if (minMod !== 0) kvs = kvs.filter((kv) => !(kv.modRevision < minMod));
    if (maxCreate !== 0) kvs = kvs.filter((kv) => !(kv.createRevision > maxCreate));
    if (minCreate !== 0) kvs = kvs.filter((kv) => !(kv.createRevision < minCreate));
  }
  if (sort !== null) kvs = kvs.slice().sort(sort);

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

/** A RecordRangeReader that can also read a large range's records over several turns of the event loop. */
export interface SteppedRecordRangeReader extends RecordRangeReader {
  rangeRecordsInSteps(key: Buffer, end: Buffer | null, opts: RangeOptions, each: (record: Uint8Array, length: number) => void): Promise<{ count: number; rev: number }>;
}

/** applyRangeForWire's work around the store's records: the arguments to read them with, and the response after. */
type WirePlan =
  | { resp: pb.RangeResponse }
  | {
      key: Buffer;
      end: Buffer | null;
      opts: RangeOptions;
      each: (record: Uint8Array, length: number) => void;
      done: (rr: { count: number; rev: number }) => pb.RangeResponse;
    };

function planWireRange(reader: RangeReader, req: pb.RangeRequest): WirePlan {
  const bounds = revisionBounds(req);
  const sort = sortOf(req);
  if (bounds !== null || sort !== null || req.keysOnly || req.countOnly) return { resp: decodedRange(reader, req, bounds, sort) };
  const limit = int64ToNumber(req.limit);
  const records = new WireRecords();
  const kvs = records.kvs;
  let more = false;
  return {
    key: buf(req.key),
    end: buf(req.rangeEnd),
    // One key past the limit tells whether there is more; it is not copied.
    opts: { rev: int64ToNumber(req.revision), limit: limit > 0 ? limit + 1 : 0 },
    each: (record, length) => {
      if (limit > 0 && kvs.length === limit) more = true;
      else records.push(record, length);
    },
    done: (rr) => ({ header: revHeader(rr.rev), kvs, more, count: String(rr.count) }),
  };
}

/**
 * applyRange for a response that is encoded and dropped (the KV service's Range): a range with
 * no sort, no revision filters and whole keys carries each key as the bytes the store holds
 * (WireRecords), copied once, instead of decoded fields encoded again; past its first 16 KiB the
 * copies are in pooled memory that the encoder hands back. Anything else is applyRange's.
 */
export function applyRangeForWire(reader: RecordRangeReader, req: pb.RangeRequest): pb.RangeResponse {
  const plan = planWireRange(reader, req);
  if ('resp' in plan) return plan.resp;
  return plan.done(reader.rangeRecords(plan.key, plan.end, plan.opts, plan.each));
}

/** applyRangeForWire, reading a large range's records over several turns of the event loop (rangeRecordsInSteps). */
export async function applyRangeForWireInSteps(reader: SteppedRecordRangeReader, req: pb.RangeRequest): Promise<pb.RangeResponse> {
  const plan = planWireRange(reader, req);
  if ('resp' in plan) return plan.resp;
  return plan.done(await reader.rangeRecordsInSteps(plan.key, plan.end, plan.opts, plan.each));
}

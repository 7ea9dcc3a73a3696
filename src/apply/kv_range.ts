// Range request semantics on top of the store (etcd's executeRange): limit with one extra key
// fetched for `more`, count ignoring limit, revision filters applied after the fetch, sort.
import type { RangeOptions, RangeReader } from '../mvcc/store';
import type { KeyValue } from '../mvcc/types';
import { RangeRequest_SortOrder as SortOrder, RangeRequest_SortTarget as SortTarget } from '../pb/types';
import type * as pb from '../pb/types';
import { WireRecords } from '../pb/kv_wire';
import { decodeKeyValue, encodeKeyValue, readRecordFields, type RecordFields } from '../mvcc/kv_codec';
import { nextTurn } from '../runtime/next_turn';
import { SteppedSort } from '../runtime/stepped_sort';
import { EMPTY, buf, int64ToNumber, revHeader, toPbKv, toPbKvWithoutValue } from './kv_convert';

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
 * The sort a request asks for, by etcd's rules: a target other than KEY with no order means
 * ascend, and KEY ascending is the store's order already (target null: no sort to do).
 */
function sortOrderOf(req: pb.RangeRequest): { target: number | null; descending: boolean } {
  const sortTarget = req.sortTarget ?? SortTarget.KEY;
  let order: number = req.sortOrder ?? SortOrder.NONE;
  if (sortTarget !== SortTarget.KEY && order === SortOrder.NONE) order = SortOrder.ASCEND;
  else if (sortTarget === SortTarget.KEY && order === SortOrder.ASCEND) order = SortOrder.NONE;
  if ((order !== SortOrder.ASCEND && order !== SortOrder.DESCEND) || comparator(sortTarget) === null) return { target: null, descending: false };
  return { target: sortTarget, descending: order === SortOrder.DESCEND };
}

/** The comparator the response must be sorted with, or null when the store's order is the answer. */
function sortOf(req: pb.RangeRequest): ((a: KeyValue, b: KeyValue) => number) | null {
  const { target, descending } = sortOrderOf(req);
  const cmp = target === null ? null : comparator(target);
  if (cmp === null) return null;
  return descending ? (a, b) => cmp(b, a) : cmp;
}

export function applyRange(reader: RangeReader, req: pb.RangeRequest): pb.RangeResponse {
  const bounds = revisionBounds(req);
  const sort = sortOf(req);
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
  if (bounds !== null) kvs = kvs.filter((kv) => withinBounds(bounds, kv));
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

/** Element moves of a large range's sort per turn of the event loop (a few milliseconds). */
const SORT_MOVES_PER_TURN = 128 * 1024;

/**
 * One range read for the wire (applyRangeForWire): its keys as the bytes the store holds
 * (WireRecords), copied once, whatever the request asks. etcd's order of work is kept: the store
 * fetches one key past the limit (every key when the request has a sort order or revision
 * filters), the filters drop keys, the sort orders them, and the limit cuts them; the count is
 * the store's. A keys-only range's records go without their value's field; a sort by a revision
 * or the version takes the numbers as the records go by, one by the value views of the values.
 */
class WireRange {
  readonly key: Buffer;
  readonly end: Buffer | null;
  readonly opts: RangeOptions;
  private readonly records = new WireRecords();
  private readonly limit: number;
  private readonly keysOnly: boolean;
  private readonly bounds: RevisionBounds | null;
  /** The sort by a field, or null: store order, reversed when `reverse`. */
  private readonly target: number | null;
  private readonly descending: boolean;
  private readonly reverse: boolean;
  /** Per key kept: the number it is sorted by, or its value. */
  private readonly numbers: number[] = [];
  private readonly values: Uint8Array[] = [];
  private sort: SteppedSort | null = null;
  /** The store reads one key past the limit that is not kept (no sort, no filters). */
  private readonly onePast: boolean;
  private more = false;

  constructor(req: pb.RangeRequest) {
    this.limit = int64ToNumber(req.limit);
    this.keysOnly = req.keysOnly === true;
    this.bounds = revisionBounds(req);
    const { target, descending } = sortOrderOf(req);
    this.reverse = target === SortTarget.KEY && descending;
    this.target = target === SortTarget.KEY ? null : target;
    this.descending = descending;
    // Sorting and filters need every key before the limit applies.
    const fetchAll = (req.sortOrder ?? SortOrder.NONE) !== SortOrder.NONE || this.bounds !== null;
    this.key = buf(req.key);
    this.end = buf(req.rangeEnd);
    // One key past the limit tells whether there is more; with a sort it is sorted with the rest.
    this.onePast = !fetchAll && this.limit > 0 && this.target === null;
    this.opts = {
      rev: int64ToNumber(req.revision),
      limit: !fetchAll && this.limit > 0 ? this.limit + 1 : 0,
      countOnly: req.countOnly === true,
    };
  }

  readonly each = (record: Uint8Array, length: number): void => {
    const target = this.target;
    if (this.onePast && this.records.kvs.length === this.limit) {
      // The key past the limit: it only says there is more (its copy would unframe the records).
      this.more = true;
      return;
    }
    if (this.bounds === null && !this.keysOnly && target === null) {
      this.records.push(record, length);
      return;
    }
    const f = readRecordFields(record, length);
    if (this.bounds !== null && !withinBounds(this.bounds, f)) return;
    let copy: Uint8Array;
    if (!this.keysOnly || f.valueStart < 0) {
      copy = this.records.push(record, length);
    } else if (f.valueFieldStart >= 0) {
      copy = this.records.push(record, length, f.valueFieldStart, f.valueStart + f.valueBytes);
    } else {
      // Not encodeKeyValue's layout: its fields but the value, encoded afresh.
      const kv = decodeKeyValue(new Uint8Array(record.buffer, record.byteOffset, length), true);
      const bytes = encodeKeyValue({ ...kv, value: EMPTY });
      copy = this.records.push(bytes, bytes.length);
    }
    if (target === null) return;
    if (target === SortTarget.VALUE) {
      // A keys-only copy has no value: the value is copied on its own for the sort.
      const value = f.valueStart < 0 ? EMPTY : new Uint8Array(record.buffer, record.byteOffset + f.valueStart, f.valueBytes);
      this.values.push(this.keysOnly ? value.slice() : copy.subarray(f.valueStart, f.valueStart + f.valueBytes));
    } else {
      this.numbers.push(target === SortTarget.VERSION ? f.version : target === SortTarget.CREATE ? f.createRevision : f.modRevision);
    }
  };

  /** Sorts the keys on, at most `moves` element moves; true once the response is ready. */
  sortStep(moves: number): boolean {
    if (this.target === null) return true;
    if (this.sort === null) {
      const n = this.records.kvs.length;
      if (this.target === SortTarget.VALUE) {
        const v = this.values;
        this.sort = new SteppedSort(n, this.descending ? (a, b) => Buffer.compare(v[b], v[a]) : (a, b) => Buffer.compare(v[a], v[b]));
      } else {
        const x = this.numbers;
        this.sort = new SteppedSort(n, this.descending ? (a, b) => x[b] - x[a] : (a, b) => x[a] - x[b]);
      }
    }
    return this.sort.step(moves);
  }

  response(rr: { count: number; rev: number }): pb.RangeResponse {
    const kvs = this.records.kvs;
    const n = kvs.length;
    const kept = this.limit > 0 && n > this.limit ? this.limit : n;
    if (this.sort !== null) {
      this.records.reorder(this.sort.order, kept);
    } else if (this.reverse) {
      const order = new Uint32Array(n);
      for (let p = 0; p < n; p++) order[p] = n - 1 - p;
      this.records.reorder(order, kept);
    } else {
      this.records.truncate(kept);
    }
    return { header: revHeader(rr.rev), kvs, more: this.more || kept < n, count: String(rr.count) };
  }
}

/** Whether a key's revisions pass a request's filters (a decoded key's or a stored record's). */
function withinBounds(b: RevisionBounds, f: Pick<RecordFields, 'modRevision' | 'createRevision'>): boolean {
  if (b.maxMod !== 0 && f.modRevision > b.maxMod) return false;
  if (b.minMod !== 0 && f.modRevision < b.minMod) return false;
  if (b.maxCreate !== 0 && f.createRevision > b.maxCreate) return false;
  if (b.minCreate !== 0 && f.createRevision < b.minCreate) return false;
  return true;
}

/**
 * applyRange for a response that is encoded and dropped (the KV service's Range): each key goes
 * as the bytes the store holds (WireRange), copied once, instead of decoded fields encoded
 * again; past its first 16 KiB the copies are in pooled memory that the encoder hands back.
 */
export function applyRangeForWire(reader: RecordRangeReader, req: pb.RangeRequest): pb.RangeResponse {
  const range = new WireRange(req);
  const rr = reader.rangeRecords(range.key, range.end, range.opts, range.each);
  range.sortStep(Infinity);
  return range.response(rr);
}

/**
 * applyRangeForWire over several turns of the event loop: the store reads a large range's
 * records in steps (rangeRecordsInSteps), and its sort takes sortMovesPerTurn element moves a turn.
 */
export async function applyRangeForWireInSteps(reader: SteppedRecordRangeReader, req: pb.RangeRequest, sortMovesPerTurn = SORT_MOVES_PER_TURN): Promise<pb.RangeResponse> {
  const range = new WireRange(req);
  const rr = await reader.rangeRecordsInSteps(range.key, range.end, range.opts, range.each);
  while (!range.sortStep(sortMovesPerTurn)) await nextTurn();
  return range.response(rr);
}

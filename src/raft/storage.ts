import assert from 'node:assert';
import { ErrCompacted, ErrSnapOutOfDate, ErrUnavailable } from './errors';
import {
  ConfState,
  Entry,
  EntryHead,
  HardState,
  Snapshot,
  emptySnapshot,
  entrySizeBytes,
  limitSize,
} from './types';

/**
 * What the Raft core reads of the durable log. Errors are thrown as etcd returns them:
 * ErrCompacted (index before firstIndex), ErrUnavailable (index after lastIndex),
 * ErrSnapshotTemporarilyUnavailable (snapshot()).
 */
export interface Storage {
  initialState(): { hardState: HardState; confState: ConfState };
  /** Entries [lo, hi), at least one if any, limited to maxSizeBytes. */
  entries(lo: number, hi: number, maxSizeBytes: number): Entry[];
  term(i: number): number;
  lastIndex(): number;
  firstIndex(): number;
  snapshot(): Snapshot;
}

function cloneConfState(cs: ConfState): ConfState {
  return {
    voters: [...cs.voters],
    learners: [...cs.learners],
    votersOutgoing: [...cs.votersOutgoing],
    learnersNext: [...cs.learnersNext],
    autoLeave: cs.autoLeave,
  };
}

/**
 * Where the data of entries released from memory can be read back (the durable log). It must
 * return the data of exactly that index and term, or throw: a mismatch is a broken invariant.
 */
export interface EntryDataReader {
  readEntryData(index: number, term: number): Buffer;
}

/** Stands in for the data of an entry released from memory (compared by identity, never read). */
const RELEASED: Buffer = Buffer.alloc(0);
/** The data of an entry that has none (never read back). */
const EMPTY: Buffer = Buffer.alloc(0);

/** ents[0]: the index and term of the last compacted entry (or of the snapshot), with no data. */
function dummyEntry(term: number, index: number): Entry {
  return { term, index, type: 0, data: EMPTY };
}

/**
 * In-memory Storage. ents[0] is a dummy entry holding the index and term of the last compacted entry
 * (or of the snapshot), so ents[i] sits at raft index ents[0].index + i.
 *
 * With an EntryDataReader, applied entries' data can be released (`release`) and is read back when
 * asked for: the log keeps every entry since the last compaction for slow followers (etcd's
 * MemoryStorage holds them all in memory, up to snapshot-count entries), but only a lagging
 * follower ever reads them again.
 */
export class MemoryStorage implements Storage {
  private hardState: HardState = { term: 0, vote: 0n, commit: 0 };
  private snap: Snapshot = emptySnapshot();
  private ents: Entry[] = [dummyEntry(0, 0)];
  /** Entries up to this index hold no data in memory unless their data is empty. */
  private releasedUpTo = 0;
  /** Data bytes of the entries held in memory (not released). */
  private residentBytes = 0;

  constructor(private readonly reader: EntryDataReader | null = null) {
    // A member's first snapshot and log compaction replace `snap` and `ents`, which until then
    // were never reassigned. V8 treats a field never reassigned as constant in the code it
    // optimizes, and its first reassignment throws that code away: 14-16 functions of the Raft log
    // per member, in the middle of a load (3 members, one client, the run of 4000 puts that holds the
    // first snapshot at 10000 entries: 1080-1150 puts/s with p99 2.71-3.07 ms, against 1188-1242 and
    // 2.17-2.48 with this). Assigned twice here, before any of that code runs, they are ordinary fields.
    this.snap = emptySnapshot();
    this.ents = [dummyEntry(0, 0)];
  }

  /** Data bytes of the log's entries held in memory (for tests and diagnostics). */
  residentDataBytes(): number {
    return this.residentBytes;
  }

  initialState(): { hardState: HardState; confState: ConfState } {
    return { hardState: { ...this.hardState }, confState: cloneConfState(this.snap.metadata.confState) };
  }

  setHardState(hs: HardState): void {
    this.hardState = { ...hs };
  }

  entries(lo: number, hi: number, maxSizeBytes: number): Entry[] {
    const offset = this.ents[0]!.index;
    if (lo <= offset) throw new ErrCompacted();
    if (!(hi <= this.lastIndex() + 1)) assert.fail(`entries' hi(${hi}) is out of bound lastindex(${this.lastIndex()})`);
    if (this.ents.length === 1) throw new ErrUnavailable();
    const out = this.ents.slice(lo - offset, hi - offset);
    if (lo > this.releasedUpTo) return limitSize(out, maxSizeBytes);
    // Read back released data only as far as the size limit reaches (at least one entry).
    const reader = this.reader;
    assert(reader, 'entries released without a reader');
    let size = 0;
    let k = 0;
    for (; k < out.length; k++) {
      let e = out[k]!;
      if (e.data === RELEASED) {
        const data = reader.readEntryData(e.index, e.term);
        e = { term: e.term, index: e.index, type: e.type, data };
        out[k] = e;
      }
      size += entrySizeBytes(e);
      if (k > 0 && size > maxSizeBytes) break;
    }
    return k === out.length ? out : out.slice(0, k);
  }

  /**
   * Releases the data of entries up to `upTo` (which the caller has applied), oldest first, until at
   * most `keepBytes` of data stay in memory. Entries are replaced, not changed: one already handed
   * out keeps its data. Without a reader everything stays in memory.
   */
  release(upTo: number, keepBytes: number): void {
    if (!this.reader) return;
    const offset = this.ents[0]!.index;
    const last = Math.min(upTo, this.lastIndex());
    let i = Math.max(this.releasedUpTo + 1, offset + 1);
    for (; i <= last && this.residentBytes > keepBytes; i++) {
      const e = this.ents[i - offset]!;
      assert(e.data !== RELEASED, `entry ${i} released twice`);
      if (e.data.length === 0) continue;
      this.residentBytes -= e.data.length;
      this.ents[i - offset] = { term: e.term, index: e.index, type: e.type, data: RELEASED };
    }
    if (i - 1 > this.releasedUpTo) this.releasedUpTo = i - 1;
    assert(this.residentBytes >= 0, 'resident entry bytes went negative');
  }

  /** Data bytes held in memory of ents[from, to). */
  private residentIn(from: number, to: number): number {
    let n = 0;
    for (let k = from; k < to; k++) {
      const d = this.ents[k]!.data;
      if (d !== RELEASED) n += d.length;
    }
    return n;
  }

  term(i: number): number {
    const offset = this.ents[0]!.index;
    if (i < offset) throw new ErrCompacted();
    if (i - offset >= this.ents.length) throw new ErrUnavailable();
    return this.ents[i - offset]!.term;
  }

  lastIndex(): number {
    return this.ents[0]!.index + this.ents.length - 1;
  }

  firstIndex(): number {
    return this.ents[0]!.index + 1;
  }

  snapshot(): Snapshot {
    return this.snap;
  }

  /** Replaces the whole log by the snapshot. */
  applySnapshot(s: Snapshot): void {
    if (this.snap.metadata.index >= s.metadata.index) throw new ErrSnapOutOfDate();
    this.snap = s;
    this.ents = [dummyEntry(s.metadata.term, s.metadata.index)];
    this.releasedUpTo = s.metadata.index;
    this.residentBytes = 0;
  }

  /** Records a snapshot of the state machine as of `index` (which must be applied by the caller). */
  createSnapshot(index: number, cs: ConfState | null, data: Buffer): Snapshot {
    if (index <= this.snap.metadata.index) throw new ErrSnapOutOfDate();
    const offset = this.ents[0]!.index;
    assert(index <= this.lastIndex(), `snapshot ${index} is out of bound lastindex(${this.lastIndex()})`);
    this.snap = {
      data,
      metadata: {
        index,
        term: this.ents[index - offset]!.term,
        confState: cs ? cloneConfState(cs) : this.snap.metadata.confState,
      },
    };
    return this.snap;
  }

  /** Discards entries up to and including compactIndex (the caller must have snapshotted them). */
  compact(compactIndex: number): void {
    const offset = this.ents[0]!.index;
    if (compactIndex <= offset) throw new ErrCompacted();
    assert(compactIndex <= this.lastIndex(), `compact ${compactIndex} is out of bound lastindex(${this.lastIndex()})`);
    const i = compactIndex - offset;
    const dummy = dummyEntry(this.ents[i]!.term, this.ents[i]!.index);
    this.residentBytes -= this.residentIn(1, i + 1);
    this.ents = [dummy, ...this.ents.slice(i + 1)];
    if (this.releasedUpTo < compactIndex) this.releasedUpTo = compactIndex;
  }

  /**
   * Appends the entries that follow the snapshot in the durable log, holding none of their data:
   * it is read back through the reader when asked for. A restart replays the whole log since the
   * last snapshot, most of it already applied, so copying it all into memory would hold as much as
   * the log's size until Raft had handed every entry out once (and leave that much behind in the
   * allocator's free lists afterwards).
   */
  appendFromLog(heads: readonly EntryHead[]): void {
    if (heads.length === 0) return;
    assert(this.reader, 'entries appended from the log without a reader');
    assert.strictEqual(this.ents.length, 1, 'entries from the log go into an empty log');
    assert.strictEqual(heads[0]!.index, this.ents[0]!.index + 1, 'entries from the log must follow the snapshot');
    for (let k = 0; k < heads.length; k++) {
      const h = heads[k]!;
      if (k > 0) assert.strictEqual(h.index, heads[k - 1]!.index + 1, 'entries from the log must be contiguous');
      assert(Number.isSafeInteger(h.dataBytes) && h.dataBytes >= 0, `entry ${h.index} has a bad data size`);
      this.ents.push({ term: h.term, index: h.index, type: h.type, data: h.dataBytes === 0 ? EMPTY : RELEASED });
    }
    this.releasedUpTo = heads[heads.length - 1]!.index;
  }

  /** Appends entries, truncating any conflicting suffix; entries must be contiguous with the log. */
  append(entries: Entry[]): void {
    if (entries.length === 0) return;
    for (let k = 1; k < entries.length; k++) {
      assert.strictEqual(entries[k]!.index, entries[k - 1]!.index + 1, 'appended entries must be contiguous');
    }
    const first = this.firstIndex();
    const last = entries[0]!.index + entries.length - 1;
    if (last < first) return; // all already compacted
    if (first > entries[0]!.index) entries = entries.slice(first - entries[0]!.index);
    const offset = entries[0]!.index - this.ents[0]!.index;
    if (!(offset <= this.ents.length)) assert.fail(`missing log entry [last: ${this.lastIndex()}, append at: ${entries[0]!.index}]`);
    if (offset === this.ents.length) {
      for (const e of entries) this.ents.push(e);
    } else {
      this.residentBytes -= this.residentIn(offset, this.ents.length);
      this.ents = this.ents.slice(0, offset).concat(entries);
      if (this.releasedUpTo >= entries[0]!.index) this.releasedUpTo = entries[0]!.index - 1;
    }
    for (const e of entries) {
      assert(e.data !== RELEASED, 'appended entry has no data');
      this.residentBytes += e.data.length;
    }
  }
}

import assert from 'node:assert';
import { ErrCompacted, ErrSnapOutOfDate, ErrUnavailable } from './errors';
import {
  ConfState,
  Entry,
  HardState,
  Snapshot,
  emptySnapshot,
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
 * In-memory Storage. ents[0] is a dummy entry holding the index and term of the last compacted entry
 * (or of the snapshot), so ents[i] sits at raft index ents[0].index + i.
 */
export class MemoryStorage implements Storage {
  private hardState: HardState = { term: 0, vote: 0n, commit: 0 };
  private snap: Snapshot = emptySnapshot();
  private ents: Entry[] = [{ term: 0, index: 0, type: 0, data: Buffer.alloc(0) }];

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
    return limitSize(this.ents.slice(lo - offset, hi - offset), maxSizeBytes);
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
    this.ents = [{ term: s.metadata.term, index: s.metadata.index, type: 0, data: Buffer.alloc(0) }];
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
    const dummy: Entry = { term: this.ents[i]!.term, index: this.ents[i]!.index, type: 0, data: Buffer.alloc(0) };
    this.ents = [dummy, ...this.ents.slice(i + 1)];
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
      this.ents = this.ents.slice(0, offset).concat(entries);
    }
  }
}

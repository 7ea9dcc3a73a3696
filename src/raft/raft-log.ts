import assert from 'node:assert';
import { ErrCompacted, ErrUnavailable } from './errors';
import { Storage } from './storage';
import { Entry, NO_LIMIT, Snapshot, limitSize } from './types';
import { Unstable } from './unstable';

/**
 * The log as Raft sees it: the persisted part (Storage) followed by the unstable tail.
 * Invariants: applied <= committed <= lastIndex; entries contiguous; terms non-decreasing.
 */
export class RaftLog {
  readonly unstable: Unstable;
  committed: number;
  applied: number;

  constructor(readonly storage: Storage, readonly maxNextEntsSizeBytes: number = NO_LIMIT) {
    const firstIndex = storage.firstIndex();
    const lastIndex = storage.lastIndex();
    this.unstable = new Unstable(lastIndex + 1);
    // Everything up to the snapshot/compaction point is committed and applied by definition.
    this.committed = firstIndex - 1;
    this.applied = firstIndex - 1;
  }

  toString(): string {
    return `committed=${this.committed}, applied=${this.applied}, unstable.offset=${this.unstable.offset}, len(unstable.Entries)=${this.unstable.entries.length}`;
  }

  /** Appends ents after (index, logTerm) if that entry matches; returns the last new index or null. */
  maybeAppend(index: number, logTerm: number, committed: number, ents: Entry[]): number | null {
    if (!this.matchTerm(index, logTerm)) return null;
    const lastNewIndex = index + ents.length;
    const ci = this.findConflict(ents);
    if (ci !== 0) {
      if (!(ci > this.committed)) assert.fail(`entry ${ci} conflict with committed entry [committed(${this.committed})]`);
      this.append(ents.slice(ci - (index + 1)));
    }
    this.commitTo(Math.min(committed, lastNewIndex));
    return lastNewIndex;
  }

  append(ents: Entry[]): number {
    if (ents.length === 0) return this.lastIndex();
    const after = ents[0]!.index - 1;
    if (!(after >= this.committed)) assert.fail(`after(${after}) is out of range [committed(${this.committed})]`);
    if (!(after <= this.lastIndex())) assert.fail(`append at ${after + 1} leaves a gap after lastIndex ${this.lastIndex()}`);
    let prevTerm = this.termOrZero(after);
    for (let k = 0; k < ents.length; k++) {
      const e = ents[k]!;
      assert.strictEqual(e.index, after + 1 + k, 'appended entries must be contiguous');
      if (!(e.term >= prevTerm)) assert.fail(`log terms must not decrease: entry ${e.index} term ${e.term} < ${prevTerm}`);
      prevTerm = e.term;
    }
    this.unstable.truncateAndAppend(ents);
    return this.lastIndex();
  }

  /** First index whose term differs from ours (0 if none); an index beyond our log counts as conflict. */
  findConflict(ents: Entry[]): number {
    for (const e of ents) {
      if (!this.matchTerm(e.index, e.term)) return e.index;
    }
    return 0;
  }

  /** Largest index <= `index` whose term is <= `term` (etcd's fast log back-tracking). */
  findConflictByTerm(index: number, term: number): number {
    if (index > this.lastIndex()) return index;
    for (;;) {
      let t: number;
      try {
        t = this.term(index);
      } catch {
        break;
      }
      if (t <= term) break;
      index--;
    }
    return index;
  }

  unstableEntries(): Entry[] {
    return this.unstable.entries;
  }

  /** Committed entries not yet handed to the state machine, bounded by maxNextEntsSizeBytes. */
  nextEnts(): Entry[] {
    const off = Math.max(this.applied + 1, this.firstIndex());
    if (this.committed + 1 > off) return this.slice(off, this.committed + 1, this.maxNextEntsSizeBytes);
    return [];
  }

  hasNextEnts(): boolean {
    return this.committed + 1 > Math.max(this.applied + 1, this.firstIndex());
  }

  hasPendingSnapshot(): boolean {
    return this.unstable.snapshot !== null && this.unstable.snapshot.metadata.index !== 0;
  }

  snapshot(): Snapshot {
    return this.unstable.snapshot ?? this.storage.snapshot();
  }

  firstIndex(): number {
    return this.unstable.maybeFirstIndex() ?? this.storage.firstIndex();
  }

  lastIndex(): number {
    return this.unstable.maybeLastIndex() ?? this.storage.lastIndex();
  }

  commitTo(toCommit: number): void {
    // Commit never decreases: smaller values are ignored.
    if (this.committed < toCommit) {
      if (!(this.lastIndex() >= toCommit)) assert.fail(`tocommit(${toCommit}) is out of range [lastIndex(${this.lastIndex()})]`);
      this.committed = toCommit;
    }
  }

  appliedTo(i: number): void {
    if (i === 0) return;
    if (!(this.committed >= i && i >= this.applied)) assert.fail(`applied(${i}) is out of range [prevApplied(${this.applied}), committed(${this.committed})]`);
    this.applied = i;
  }

  stableTo(i: number, t: number): void {
    this.unstable.stableTo(i, t);
  }

  stableSnapTo(i: number): void {
    this.unstable.stableSnapTo(i);
  }

  lastTerm(): number {
    return this.term(this.lastIndex());
  }

  /** Term of entry i; 0 outside [firstIndex-1, lastIndex]; throws ErrCompacted/ErrUnavailable from storage. */
  term(i: number): number {
    const dummyIndex = this.firstIndex() - 1;
    if (i < dummyIndex || i > this.lastIndex()) return 0;
    const t = this.unstable.maybeTerm(i);
    if (t !== null) return t;
    return this.storage.term(i);
  }

  termOrZero(i: number): number {
    try {
      return this.term(i);
    } catch (e) {
      if (e instanceof ErrCompacted) return 0;
      throw e;
    }
  }

  /** Entries from i to the end, limited in size. */
  entries(i: number, maxSizeBytes: number): Entry[] {
    if (i > this.lastIndex()) return [];
    return this.slice(i, this.lastIndex() + 1, maxSizeBytes);
  }

  allEntries(): Entry[] {
    return this.entries(this.firstIndex(), NO_LIMIT);
  }

  /** Whether a log ending at (lastIndex, term) is at least as up-to-date as ours (Raft §5.4.1). */
  isUpToDate(lastIndex: number, term: number): boolean {
    const ourTerm = this.lastTerm();
    return term > ourTerm || (term === ourTerm && lastIndex >= this.lastIndex());
  }

  matchTerm(i: number, term: number): boolean {
    try {
      return this.term(i) === term;
    } catch {
      return false;
    }
  }

  /** Commits up to maxIndex only if that entry is from `term` (Raft §5.4.2). */
  maybeCommit(maxIndex: number, term: number): boolean {
    if (maxIndex > this.committed && this.termOrZero(maxIndex) === term) {
      this.commitTo(maxIndex);
      return true;
    }
    return false;
  }

  restore(s: Snapshot): void {
    this.committed = s.metadata.index;
    this.unstable.restore(s);
  }

  /** Entries [lo, hi); throws ErrCompacted if lo was compacted. */
  slice(lo: number, hi: number, maxSizeBytes: number): Entry[] {
    this.checkOutOfBounds(lo, hi);
    if (lo === hi) return [];
    let ents: Entry[] = [];
    const uOff = this.unstable.offset;
    if (lo < uOff) {
      let stored: Entry[];
      try {
        stored = this.storage.entries(lo, Math.min(hi, uOff), maxSizeBytes);
      } catch (e) {
        if (e instanceof ErrUnavailable) {
          assert.fail(`entries[${lo}:${Math.min(hi, uOff)}) is unavailable from storage`);
        }
        throw e;
      }
      // Storage cut the batch short for size: don't read further.
      if (stored.length < Math.min(hi, uOff) - lo) return stored;
      ents = stored;
    }
    if (hi > uOff) {
      const u = this.unstable.slice(Math.max(lo, uOff), hi);
      ents = ents.length > 0 ? ents.concat(u) : u;
    }
    return limitSize(ents, maxSizeBytes);
  }

  private checkOutOfBounds(lo: number, hi: number): void {
    if (!(lo <= hi)) assert.fail(`invalid slice ${lo} > ${hi}`);
    const fi = this.firstIndex();
    if (lo < fi) throw new ErrCompacted();
    const length = this.lastIndex() + 1 - fi;
    if (!(hi <= fi + length)) assert.fail(`slice[${lo},${hi}) out of bound [${fi},${this.lastIndex()}]`);
  }
}

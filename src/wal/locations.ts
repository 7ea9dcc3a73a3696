// Where each live entry's record lies in the segment files, by Raft index: what lets the Raft log
// release applied entries' data from memory and read it back for a lagging follower.
import assert from 'node:assert';

export interface EntryLocation {
  /** Segment sequence number. */
  seq: number;
  /** Byte offset of the record (its header) in the segment file. */
  at: number;
  /** Bytes of the whole record, header included. */
  recordBytes: number;
}

const INITIAL_SLOTS = 1024;

/**
 * Contiguous indexes [first, first + count), 16 bytes each in typed arrays (100k entries: 1.6 MB),
 * where the entries' data would be ~100 MB at 1 KiB each.
 */
export class EntryLocations {
  private first = 0;
  private start = 0;
  private count = 0;
  private seqs = new Int32Array(INITIAL_SLOTS);
  private ats = new Float64Array(INITIAL_SLOTS);
  private lens = new Int32Array(INITIAL_SLOTS);

  /** Forget everything; the next entry may have any index (a snapshot replaced the log). */
  reset(): void {
    this.start = 0;
    this.count = 0;
    this.first = 0;
  }

  /**
   * Records where entry `index` was written. An index at or below the last replaces the tail from
   * there on (a new leader overwrote it, as the WAL's replay reads it). After a gap only what
   * follows it is located: the Raft log refuses a gap itself, and the WAL's replay refuses one.
   */
  put(index: number, seq: number, at: number, recordBytes: number): void {
    assert(Number.isSafeInteger(index) && index > 0, `bad entry index ${index}`);
    if (this.count === 0 || index < this.first || index > this.first + this.count) {
      this.first = index;
      this.start = 0;
      this.count = 0;
    } else {
      this.count = index - this.first;
    }
    if (this.start + this.count === this.seqs.length) this.grow();
    const k = this.start + this.count;
    this.seqs[k] = seq;
    this.ats[k] = at;
    this.lens[k] = recordBytes;
    this.count++;
  }

  get(index: number): EntryLocation | null {
    if (this.count === 0 || index < this.first || index >= this.first + this.count) return null;
    const k = this.start + index - this.first;
    return { seq: this.seqs[k], at: this.ats[k], recordBytes: this.lens[k] };
  }

  /** Drops the locations of entries up to and including `index`. */
  dropUpTo(index: number): void {
    if (this.count === 0 || index < this.first) return;
    const n = Math.min(index - this.first + 1, this.count);
    this.start += n;
    this.count -= n;
    this.first += n;
  }

  /** Number of entries located. */
  size(): number {
    return this.count;
  }

  /** Moves the live slots to the front, doubling the arrays only when they are more than half full. */
  private grow(): void {
    const cap = this.count * 2 > this.seqs.length ? this.seqs.length * 2 : this.seqs.length;
    const move = <T extends Int32Array | Float64Array>(a: T, make: (n: number) => T): T => {
      const b = cap === a.length ? a : make(cap);
      // set() copies through a clone when source and target share a buffer.
      b.set(a.subarray(this.start, this.start + this.count), 0);
      return b;
    };
    this.seqs = move(this.seqs, (n) => new Int32Array(n));
    this.ats = move(this.ats, (n) => new Float64Array(n));
    this.lens = move(this.lens, (n) => new Int32Array(n));
    this.start = 0;
  }
}

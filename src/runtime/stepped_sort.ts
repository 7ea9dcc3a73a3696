// A stable sort that can stop and resume: a large range sorted by a field other than the key
// (1M keys took 8.5 s in one turn of the event loop with Array.prototype.sort on decoded keys)
// is sorted a bounded number of elements per turn, with no other request waiting for all of it.
import assert from 'node:assert';

/**
 * Bottom-up merge sort of the positions 0..count-1 by `cmp(a, b)` over them (negative: a
 * first), stable as Array.prototype.sort: equal elements keep their order. `step(moves)` does at
 * most that many element moves and says whether the sort is done; `order` is the answer then.
 * Two runs already in order are copied without comparisons, so sorted input costs one look per run.
 */
export class SteppedSort {
  private from: Uint32Array;
  private to: Uint32Array;
  private width = 1;
  /** The merge in progress: runs [lo, mid) and [mid, hi), read at i and j, written at k. */
  private lo = 0;
  private mid = 0;
  private hi = 0;
  private i = 0;
  private j = 0;
  private k = 0;
  private merging = false;
  /** The two runs of the merge in progress are in order already: copied as they are. */
  private inOrder = false;
  private finished: boolean;

  constructor(
    private readonly count: number,
    private readonly cmp: (a: number, b: number) => number,
  ) {
    assert(Number.isSafeInteger(count) && count >= 0 && count <= 0xffffffff, 'sort size');
    this.from = new Uint32Array(count);
    this.to = new Uint32Array(count);
    for (let p = 0; p < count; p++) this.from[p] = p;
    this.finished = count < 2;
  }

  /** The positions in sorted order (only once done). */
  get order(): Uint32Array {
    assert(this.finished, 'sort order read before the sort is done');
    return this.from;
  }

  /** Sorts on for at most `moves` element moves; true when done. */
  step(moves: number): boolean {
    assert(moves > 0, 'sort step without moves');
    const n = this.count;
    const cmp = this.cmp;
    let budget = moves;
    while (!this.finished && budget > 0) {
      if (!this.merging) {
        if (this.lo >= n) {
          // A pass is over: its output is the next pass's input.
          const t = this.from;
          this.from = this.to;
          this.to = t;
          this.width *= 2;
          this.lo = 0;
          if (this.width >= n) {
            this.finished = true;
            break;
          }
        }
        this.mid = Math.min(this.lo + this.width, n);
        this.hi = Math.min(this.lo + 2 * this.width, n);
        this.i = this.lo;
        this.j = this.mid;
        this.k = this.lo;
        this.merging = true;
        this.inOrder = this.mid >= this.hi || cmp(this.from[this.mid - 1], this.from[this.mid]) <= 0;
      }
      const from = this.from;
      const to = this.to;
      let { i, j, k } = this;
      const mid = this.mid;
      const hi = this.hi;
      const stopAt = Math.min(hi, k + budget);
      if (this.inOrder) {
        // Short runs element by element: a view each would be an allocation per merge.
        if (stopAt - k < 64) for (; k < stopAt; k++) to[k] = from[k];
        else to.set(from.subarray(k, stopAt), k);
        k = stopAt;
      } else {
        while (k < stopAt) {
          if (i < mid && (j >= hi || cmp(from[i], from[j]) <= 0)) to[k++] = from[i++];
          else to[k++] = from[j++];
        }
      }
      budget -= stopAt - this.k;
      this.i = i;
      this.j = j;
      this.k = k;
      if (k === hi) {
        this.merging = false;
        this.lo = hi;
      }
    }
    return this.finished;
  }
}

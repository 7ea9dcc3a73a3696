// Merged key permissions of one user: the union of its roles' [key, rangeEnd) intervals, kept
// sorted and disjoint so a check is one binary search. Follows etcd's range_perm_cache: an empty
// rangeEnd grants one key, a rangeEnd of "\0" grants every key from `key` on.
import assert from 'node:assert';

/** A half-open interval; `end === null` reaches past every key. */
export interface KeyInterval {
  start: Buffer;
  end: Buffer | null;
}

const ZERO = Buffer.from([0]);

function isFromKey(rangeEnd: Buffer): boolean {
  return rangeEnd.length === 1 && rangeEnd[0] === 0;
}

/** The interval a permission (or a request) names. */
export function intervalOf(key: Buffer, rangeEnd: Buffer): KeyInterval {
  if (rangeEnd.length === 0) return { start: key, end: Buffer.concat([key, ZERO]) };
  if (isFromKey(rangeEnd)) return { start: key, end: null };
  return { start: key, end: rangeEnd };
}

function endCmp(a: Buffer | null, b: Buffer | null): number {
  if (a === null) return b === null ? 0 : 1;
  if (b === null) return -1;
  return Buffer.compare(a, b);
}

export class IntervalSet {
  private readonly ivs: KeyInterval[];

  constructor(input: KeyInterval[]) {
    const sorted = input
      .filter((iv) => iv.end === null || Buffer.compare(iv.start, iv.end) < 0)
      .sort((a, b) => Buffer.compare(a.start, b.start));
    const out: KeyInterval[] = [];
    for (const iv of sorted) {
      const last = out[out.length - 1];
      // Touching intervals merge too: [a,b) and [b,c) cover [a,c).
      if (last && (last.end === null || Buffer.compare(iv.start, last.end) <= 0)) {
        if (endCmp(iv.end, last.end) > 0) last.end = iv.end;
      } else {
        out.push({ start: iv.start, end: iv.end });
      }
    }
    for (let i = 1; i < out.length; i++) {
      const prevEnd = out[i - 1].end;
      assert(prevEnd !== null && Buffer.compare(prevEnd, out[i].start) < 0, 'merged intervals overlap');
    }
    this.ivs = out;
  }

  /** The last merged interval starting at or before `key`, if any. */
  private floor(key: Buffer): KeyInterval | undefined {
    let lo = 0;
    let hi = this.ivs.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (Buffer.compare(this.ivs[mid].start, key) <= 0) lo = mid + 1;
      else hi = mid;
    }
    return lo === 0 ? undefined : this.ivs[lo - 1];
  }

  /** Whether the request's key or range [key, rangeEnd) lies wholly inside the set. */
  covers(key: Buffer, rangeEnd: Buffer): boolean {
    const want = intervalOf(key, rangeEnd);
    // An empty request range (end <= start) asks for nothing but etcd still needs the start key.
    const iv = this.floor(want.start);
    if (!iv) return false;
    if (iv.end !== null && Buffer.compare(want.start, iv.end) >= 0) return false;
    if (want.end !== null && Buffer.compare(want.end, want.start) <= 0) return true;
    return endCmp(want.end, iv.end) <= 0;
  }

  get size(): number {
    return this.ivs.length;
  }
}

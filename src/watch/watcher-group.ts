// The synced watchers, indexed for notify(): single-key watchers by key, range watchers by
// their exact range (many clients watch the same prefix, e.g. one per resource type), so a
// live event costs one map lookup plus one comparison per distinct range.
import assert from 'node:assert';
import type { Watcher } from './watcher';

interface RangeEntry {
  // Bounds spelled in latin1: JS compares strings by UTF-16 code unit, and latin1 maps byte b
  // to code unit b, so string order is byte order -- without a native call per comparison.
  readonly start: string;
  /** Empty: unbounded. */
  readonly end: string;
  readonly watchers: Set<Watcher>;
}

export class WatcherGroup {
  private readonly single = new Map<string, Set<Watcher>>();
  private readonly ranges = new Map<string, RangeEntry>();
  private count = 0;

  get size(): number {
    return this.count;
  }

  add(w: Watcher): void {
    if (w.endLatin1 === null) {
      const k = w.groupId;
      let set = this.single.get(k);
      if (set === undefined) {
        set = new Set();
        this.single.set(k, set);
      }
      assert(!set.has(w), 'watcher added twice');
      set.add(w);
    } else {
      const id = w.groupId;
      let entry = this.ranges.get(id);
      if (entry === undefined) {
        entry = { start: w.keyLatin1, end: w.endLatin1, watchers: new Set() };
        this.ranges.set(id, entry);
      }
      assert(!entry.watchers.has(w), 'watcher added twice');
      entry.watchers.add(w);
    }
    this.count++;
  }

  delete(w: Watcher): boolean {
    if (w.endLatin1 === null) {
      const k = w.groupId;
      const set = this.single.get(k);
      if (set === undefined || !set.delete(w)) return false;
      if (set.size === 0) this.single.delete(k);
    } else {
      const id = w.groupId;
      const entry = this.ranges.get(id);
      if (entry === undefined || !entry.watchers.delete(w)) return false;
      if (entry.watchers.size === 0) this.ranges.delete(id);
    }
    this.count--;
    return true;
  }

  /** Every watcher (live iteration: do not add or delete while iterating). */
  *all(): IterableIterator<Watcher> {
    for (const set of this.single.values()) yield* set;
    for (const entry of this.ranges.values()) yield* entry.watchers;
  }

  /** Calls fn for each watcher whose key or range contains `key`. */
  forEachMatching(key: Buffer, fn: (w: Watcher) => void): void {
    const k = key.toString('latin1');
    const set = this.single.get(k);
    if (set !== undefined) for (const w of set) fn(w);
    for (const entry of this.ranges.values()) {
      if (k < entry.start) continue;
      if (entry.end.length !== 0 && k >= entry.end) continue;
      for (const w of entry.watchers) fn(w);
    }
  }
}

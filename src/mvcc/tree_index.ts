// The in-memory ordered index of every key's history. Keys are latin1 strings: one char per
// byte, so JS string order is byte order and V8 stores them compactly.
import assert from 'node:assert';
import BTree, { simpleComparator } from 'sorted-btree';
import { KeyIndex, type IndexGet } from './key_index';
import { type RevisionSink } from './revision';

/** `end`: null = just `key`; '' = no upper bound; otherwise the exclusive upper bound. */
export type RangeEnd = string | null;

export interface IndexHit extends IndexGet {
  key: string;
}

/** Where rangeLimitedSome puts what it finds: the visible keys' hits (up to the limit), and their count. */
export interface HitSink {
  /** Keys visible at the range's revision, past the limit included. */
  total: number;
  /** Hits added so far. */
  readonly length: number;
  /** Adds `ki` as visible at atRev; false (nothing added) when it was not. */
  add(ki: KeyIndex, atRev: number): boolean;
}

/** Hits as objects with every field of the key's revision (rangeLimited). */
class HitObjects implements HitSink {
  readonly hits: IndexHit[] = [];
  total = 0;

  get length(): number {
    return this.hits.length;
  }

  add(ki: KeyIndex, atRev: number): boolean {
    const g = ki.get(atRev);
    if (!g) return false;
    this.hits.push({ key: ki.key, modMain: g.modMain, modSub: g.modSub, createdMain: g.createdMain, ver: g.ver });
    return true;
  }
}

/** Hits as their revisions only, in two arrays of numbers: no object per key (a large range's records). */
export class HitRevisions implements HitSink {
  readonly mains: number[] = [];
  readonly subs: number[] = [];
  total = 0;
  private readonly rev = { main: 0, sub: 0 };

  get length(): number {
    return this.mains.length;
  }

  add(ki: KeyIndex, atRev: number): boolean {
    const rev = this.rev;
    if (!ki.revisionAt(atRev, rev)) return false;
    this.mains.push(rev.main);
    this.subs.push(rev.sub);
    return true;
  }
}

export class TreeIndex {
  // Latin1 keys compare in byte order as plain strings. sorted-btree's default comparator first
  // tests for numbers and compares types (1M keys: inserts ~5% and lookups ~20% slower with it).
  private readonly tree = new BTree<string, KeyIndex>(undefined, simpleComparator);
  private live = 0;

  /** Live (not deleted) keys. */
  keyCount(): number {
    return this.live;
  }

  size(): number {
    return this.tree.size;
  }

  /**
   * `known`: what keyIndex(key) just returned, so a put saves the second lookup: the key's index,
   * or null when it has none (a new key: one traversal to insert it instead of two).
   */
  put(key: string, main: number, sub: number, known?: KeyIndex | null): void {
    let ki = known === undefined ? this.tree.get(key) : known;
    assert(known == null || known.key === key, 'key index of another key');
    if (!ki) {
      ki = new KeyIndex(key);
      this.tree.set(key, ki);
    }
    if (ki.put(main, sub)) this.live++;
  }

  /** False when the key does not exist now. `known`: as for put(). */
  tombstone(key: string, main: number, sub: number, known?: KeyIndex | null): boolean {
    const ki = known === undefined ? this.tree.get(key) : known;
    assert(known == null || known.key === key, 'key index of another key');
    if (!ki) return false;
    if (!ki.tombstone(main, sub)) return false;
    this.live--;
    assert(this.live >= 0);
    return true;
  }

  /** The key's index, or null when it has none (what put() takes as `known`). */
  keyIndex(key: string): KeyIndex | null {
    return this.tree.get(key) ?? null;
  }

  insert(ki: KeyIndex): void {
    if (!this.insertIfAbsent(ki)) assert.fail('key index inserted twice');
  }

  /** Inserts ki unless its key has an index already (then false, and nothing changes). */
  insertIfAbsent(ki: KeyIndex): boolean {
    // One traversal: set() without overwrite leaves an existing entry alone and says so (a
    // has() first cost a third of the B-tree's time in a 1M-key restart).
    if (!this.tree.set(ki.key, ki, false)) return false;
    if (ki.isLive()) this.live++;
    return true;
  }

  /** Inserts key indexes in ascending key order, none of whose keys the tree has (IndexRebuild). */
  insertSorted(kis: readonly KeyIndex[]): void {
    let previous: string | null = null;
    for (const ki of kis) {
      assert(previous === null || previous < ki.key, 'key indexes out of key order');
      previous = ki.key;
      this.insert(ki);
    }
  }

  get(key: string, atRev: number): IndexGet | null {
    const ki = this.tree.get(key);
    if (!ki) return null;
    return ki.get(atRev);
  }

  /** Visits key indexes in [key, end) in key order; stop by returning false. */
  visit(key: string, end: RangeEnd, fn: (ki: KeyIndex) => boolean | void): void {
    if (end === null) {
      const ki = this.tree.get(key);
      if (ki) fn(ki);
      return;
    }
    if (end !== '' && end <= key) return;
    let high = end;
    let includeHigh = false;
    if (end === '') {
      const max = this.tree.maxKey();
      if (max === undefined || max < key) return;
      high = max;
      includeHigh = true;
    }
    // forRange walks leaves directly (no iterator allocations); `break` is its way to stop.
    this.tree.forRange(key, high, includeHigh, (_k, ki) => {
      if (fn(ki) === false) return { break: true };
      return undefined;
    });
  }

  /** Keys visible at atRev in [key, end), in key order. */
  range(key: string, end: RangeEnd, atRev: number): IndexHit[] {
    return this.rangeLimited(key, end, atRev, 0).hits;
  }

  /** The first `limit` (0 = all) keys visible at atRev in [key, end), and how many there are in all. */
  rangeLimited(key: string, end: RangeEnd, atRev: number, limit: number): { hits: IndexHit[]; total: number } {
    const into = new HitObjects();
    this.rangeLimitedSome(key, end, atRev, limit, null, 0, into);
    return { hits: into.hits, total: into.total };
  }

  /**
   * rangeLimited() in parts: adds the keys of [key, end) after `afterKey` (null: from the first),
   * up to `maxKeys` of them (0: all), to `into`; returns the last key visited, to go on after, or
   * null when the range is done. Keys inserted or dropped between parts with revisions above
   * atRev change nothing it finds.
   */
  rangeLimitedSome(key: string, end: RangeEnd, atRev: number, limit: number, afterKey: string | null, maxKeys: number, into: HitSink): string | null {
    let visited = 0;
    let last: string | null = null;
    this.visit(afterKey ?? key, end, (ki) => {
      if (ki.key === afterKey) return true;
      if (maxKeys > 0 && visited >= maxKeys) return false;
      visited++;
      last = ki.key;
      if (limit > 0 && into.length >= limit) {
        // Past the limit only the count is left (etcd's count is of the whole range): no hits.
        if (ki.visibleAt(atRev)) into.total++;
        return true;
      }
      if (into.add(ki, atRev)) into.total++;
      return true;
    });
    return maxKeys > 0 && visited >= maxKeys ? last : null;
  }

  /**
   * Compacts the histories of up to `maxKeys` keys after `afterKey` (null: from the first) at
   * rev, adds the revisions their records keep to `available`, and drops the keys left empty.
   * Returns the last key compacted, to go on after, or null when there was none left. Keys
   * inserted between calls need no compaction (their revisions are all above rev).
   */
  compactSome(rev: number, afterKey: string | null, maxKeys: number, available: RevisionSink): string | null {
    const emptied: string[] = [];
    const last = this.visitSome(afterKey, maxKeys, (k, ki) => {
      ki.compact(rev, available);
      if (ki.isEmpty()) emptied.push(k);
    });
    for (const k of emptied) this.tree.delete(k);
    return last;
  }

  /**
   * Adds to `kept` the revisions a compaction at rev would keep of up to `maxKeys` keys after
   * `afterKey` (null: from the first), changing nothing (HashKV). Returns the last key visited,
   * to go on after, or null when there was none left.
   */
  keepSome(rev: number, afterKey: string | null, maxKeys: number, kept: RevisionSink): string | null {
    return this.visitSome(afterKey, maxKeys, (_k, ki) => ki.keep(rev, kept));
  }

  /** Visits up to `maxKeys` keys after `afterKey` (null: from the first); returns the last one, null if none. */
  private visitSome(afterKey: string | null, maxKeys: number, visit: (k: string, ki: KeyIndex) => void): string | null {
    assert(maxKeys >= 1);
    const low = afterKey ?? this.tree.minKey();
    const high = this.tree.maxKey();
    if (low === undefined || high === undefined) return null;
    let last: string | null = null;
    let n = 0;
    this.tree.forRange(low, high, true, (k, ki) => {
      if (k === afterKey) return undefined;
      if (n >= maxKeys) return { break: true };
      visit(k, ki);
      last = k;
      n++;
      return undefined;
    });
    return last;
  }

  /** Every live key with its current revision. */
  forEachLive(fn: (ki: KeyIndex) => void): void {
    this.tree.forEach((ki) => {
      if (ki.isLive()) fn(ki);
    });
  }
}

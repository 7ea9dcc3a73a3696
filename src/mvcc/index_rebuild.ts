// Rebuilds the key index from the stored records at start-up. Records arrive in revision order,
// which for the keys is random: inserting each key as it comes made every B-tree descent a run
// of cache misses (1M keys: 3.5 s of a 9.4 s restart). Records are gathered in chunks instead,
// each chunk sorted by key (stable, so a key's records stay in revision order) and merged into
// the tree in key order, where consecutive descents share their path.
import assert from 'node:assert';
import { KeyIndex } from './key_index';
import type { TreeIndex } from './tree_index';

/**
 * Records gathered before they are merged: bounds this rebuild's own memory (~60 B per record
 * and the keys' strings) whatever the store's size. In a micro-benchmark of 1M random keys, chunks
 * of 256k took ~1.0 s to sort and insert, one chunk of all ~0.7 s, inserts in arrival order 1.5-2 s.
 */
export const REBUILD_CHUNK_RECORDS = 1 << 18;

export class IndexRebuild {
  // One chunk's records, column by column, allocated once and reused by every chunk (JS arrays
  // growing by push were a tenth of a 1M-key restart). Plain arrays, not Float64Array: a number
  // read from a Float64Array is a double, and one double stored into a KeyIndex field makes V8
  // box that field in every KeyIndex (a 16-byte heap number each: +64 MB at 1M keys).
  private keys: string[] = [];
  private mains: number[] = [];
  private subs: number[] = [];
  private creates: number[] = [];
  private versions: number[] = [];
  private tombstones: Uint8Array = new Uint8Array(0);
  /** Record numbers of the chunk in key order (reused as well). */
  private order: number[] = [];
  /** Key indexes of the chunk's new keys, in key order (reused as well). */
  private fresh: KeyIndex[] = [];
  private count = 0;
  private lastMain = 0;
  private lastSub = -1;
  private readonly chunkRecords: number;
  private readonly initialRecords: number;

  /**
   * `expectedRecords`: how many records the store holds, so the columns are allocated once at
   * their final size, not grown and copied step by step. More records than that are taken all
   * the same (the columns then double, up to a chunk).
   */
  constructor(
    private readonly index: TreeIndex,
    expectedRecords: number,
    chunkRecords = REBUILD_CHUNK_RECORDS,
  ) {
    assert(Number.isSafeInteger(chunkRecords) && chunkRecords >= 1);
    assert(Number.isSafeInteger(expectedRecords) && expectedRecords >= 0);
    this.chunkRecords = chunkRecords;
    this.initialRecords = Math.max(1, Math.min(chunkRecords, expectedRecords));
  }

  /**
   * One stored record, in revision order: a put of `key` at (main, sub) with the key's
   * create revision and version, or its tombstone.
   */
  add(key: string, main: number, sub: number, createRevision: number, version: number, tombstone: boolean): void {
    assert(main > this.lastMain || (main === this.lastMain && sub > this.lastSub), 'records out of revision order');
    this.lastMain = main;
    this.lastSub = sub;
    const i = this.count;
    if (i === this.tombstones.length) this.grow();
    this.keys[i] = key;
    this.mains[i] = main;
    this.subs[i] = sub;
    this.creates[i] = createRevision;
    this.versions[i] = version;
    this.tombstones[i] = tombstone ? 1 : 0;
    this.count = i + 1;
    if (this.count >= this.chunkRecords) this.merge();
  }

  /** Merges what is left and lets go of the chunk's memory. */
  finish(): void {
    this.merge();
    this.keys = [];
    this.order = [];
    this.fresh = [];
  }

  private grow(): void {
    const size = this.tombstones.length === 0 ? this.initialRecords : Math.min(this.chunkRecords, this.tombstones.length * 2);
    assert(size > this.count);
    const widen = (from: number[]): number[] => {
      const to = new Array<number>(size).fill(0);
      for (let i = 0; i < from.length; i++) to[i] = from[i]!;
      return to;
    };
    this.mains = widen(this.mains);
    this.subs = widen(this.subs);
    this.creates = widen(this.creates);
    this.versions = widen(this.versions);
    const tombstones = new Uint8Array(size);
    tombstones.set(this.tombstones);
    this.tombstones = tombstones;
  }

  private merge(): void {
    const keys = this.keys;
    const n = this.count;
    if (n === 0) return;
    const order = this.order;
    order.length = n;
    for (let i = 0; i < n; i++) order[i] = i;
    // Ties fall back to arrival order (sort is stable anyway; this keeps it explicit).
    order.sort((a, b) => {
      const x = keys[a]!;
      const y = keys[b]!;
      return x < y ? -1 : x > y ? 1 : a - b;
    });
    const fresh = this.fresh;
    fresh.length = 0;
    let i = 0;
    while (i < n) {
      const key = keys[order[i]!]!;
      // A key of an earlier chunk has its index in the tree, which counts its live keys.
      const known = this.index.keyIndex(key);
      let ki = known;
      for (; i < n; i++) {
        const r = order[i]!;
        if (keys[r] !== key) break;
        ki = this.apply(ki, known !== null, key, r);
      }
      if (known === null && ki !== null) fresh.push(ki);
    }
    this.index.insertSorted(fresh);
    fresh.length = 0;
    this.count = 0;
  }

  /** Record r of `key` applied to its index (null: none yet); returns the key's index after it. */
  private apply(ki: KeyIndex | null, inTree: boolean, key: string, r: number): KeyIndex | null {
    const main = this.mains[r]!;
    const sub = this.subs[r]!;
    const tombstone = this.tombstones[r] === 1;
    if (ki === null) {
      // The key's first record here: version 1 starts its first generation; a later version
      // is the oldest record left of a key whose earlier history was compacted; a tombstone
      // alone is what a compaction left of a deleted key (nothing to index).
      if (tombstone) return null;
      const fresh = new KeyIndex(key);
      fresh.restore(this.creates[r]!, main, sub, this.versions[r]!);
      return fresh;
    }
    if (inTree) {
      if (tombstone) this.index.tombstone(key, main, sub, ki);
      else this.index.put(key, main, sub, ki);
    } else if (tombstone) {
      ki.tombstone(main, sub);
    } else {
      ki.put(main, sub);
    }
    return ki;
  }
}

// The history of one key: its generations (create .. tombstone) of revisions, as etcd's
// keyIndex. A deleted key starts a new, empty generation; the next put creates it again
// (create_revision resets, version counts from 1).
//
// Memory: the index holds one of these per key, and on Node (no pointer compression) every
// field and array header costs 8 bytes, so the shape is kept small (issue 6 measures resident
// size at 1M keys). The common key, live with a single revision (put once, or restored from
// disk after compaction), is just this object: its revision is (modMain, modSub). Only a key with
// more history gets a `History` holding the current generation's revisions as one flat array of
// (main, sub) pairs and the closed generations (deleted keys not compacted yet).
// Measured (scripts/index-memory.ts, key strings aside): ~570 B/key before, ~108 after for keys
// written once, ~244 for keys with 3 revisions.
import assert from 'node:assert';
import { type RevisionSink } from './revision';

/** A generation ended by a tombstone, kept until compaction drops it. */
interface ClosedGeneration {
  readonly createdMain: number;
  /** Version of the key after the generation's last revision (the tombstone). */
  readonly ver: number;
  /** (main, sub) pairs in increasing order; the last pair is the tombstone. */
  revs: number[];
}

/**
 * History of a key beyond one live revision. Its fields (and KeyIndex.hist) are set in the
 * constructor, not by initializers or an object literal, so that V8 takes them for ordinary
 * fields from the start: the first overwrite of a key otherwise threw away the optimized write
 * path (see H2Connection.closed).
 */
class History {
  /** Current generation's (main, sub) pairs, oldest first; null while it is empty (key deleted). */
  revs: number[] | null;
  /** Older generations, oldest first; null when there are none. */
  closed: ClosedGeneration[] | null;

  constructor(revs: number[] | null, closed: ClosedGeneration[] | null) {
    this.revs = revs;
    this.closed = closed;
  }
}

export interface IndexGet {
  modMain: number;
  modSub: number;
  createdMain: number;
  ver: number;
}

/** Position of a generation: CURRENT, or an index into `closed`. */
const CURRENT = -1;
const NONE = -2;
/** Up to this many slots (main + sub) a generation's revisions grow by exact-size copies. */
const SHORT_HISTORY_SLOTS = 64;

export class KeyIndex {
  readonly key: string;
  /** The last revision recorded for the key (a tombstone included); 0 before the first put. */
  modMain = 0;
  modSub = 0;
  /** Current generation: create revision and version after its last revision (0 when empty). */
  createdMain = 0;
  ver = 0;
  /** null: the key is live with the single revision (modMain, modSub) (or was never put). */
  hist: History | null;

  constructor(key: string) {
    this.key = key;
    this.hist = null;
  }

  isEmpty(): boolean {
    const h = this.hist;
    return h === null ? this.modMain === 0 : h.revs === null && h.closed === null;
  }

  /** True when the key currently exists (its last generation is not closed). */
  isLive(): boolean {
    const h = this.hist;
    return h === null ? this.modMain !== 0 : h.revs !== null;
  }

  /** Generations held, the current (possibly empty) one included. */
  generationCount(): number {
    const closed = this.hist?.closed;
    return 1 + (closed ? closed.length : 0);
  }

  /** The current generation's revisions as (main, sub) pairs; null when it is empty. */
  private currentRevs(): number[] | null {
    const h = this.hist;
    if (h !== null) return h.revs;
    return this.modMain === 0 ? null : [this.modMain, this.modSub];
  }

  /** Records a write; returns true when it created the key (a new generation's first revision). */
  put(main: number, sub: number): boolean {
    if (!(main > this.modMain || (main === this.modMain && sub > this.modSub))) {
      assert.fail(`put at ${main}.${sub} not after ${this.modMain}.${this.modSub} for key`);
    }
    const h = this.hist;
    let created = false;
    if (h === null) {
      if (this.modMain === 0) {
        created = true;
      } else {
        this.hist = new History([this.modMain, this.modSub, main, sub], null);
        this.ver++;
      }
    } else if (h.revs === null) {
      h.revs = [main, sub];
      created = true;
    } else {
      // Exact-size copies while the history is short (the usual case between compactions):
      // push would reserve ~1.5x + 16 slots, tripling a short history's size.
      if (h.revs.length < SHORT_HISTORY_SLOTS) h.revs = h.revs.concat(main, sub);
      else h.revs.push(main, sub);
      this.ver++;
    }
    if (created) {
      this.createdMain = main;
      this.ver = 1;
    }
    this.modMain = main;
    this.modSub = sub;
    return created;
  }

  /** Rebuilds a generation from a stored record whose older history was compacted away. */
  restore(createdMain: number, modMain: number, modSub: number, ver: number): void {
    assert(this.isEmpty(), 'restore on a non-empty key index');
    assert(ver >= 1 && modMain > 0);
    this.createdMain = createdMain;
    this.ver = ver;
    this.hist = null;
    this.modMain = modMain;
    this.modSub = modSub;
  }

  /** Deletes the key at (main, sub). False when the key does not currently exist. */
  tombstone(main: number, sub: number): boolean {
    assert(!this.isEmpty(), 'tombstone on an empty key index');
    if (!this.isLive()) return false;
    this.put(main, sub);
    // put() on a live key always leaves a History with the current generation's revisions.
    const h = this.hist as History;
    const g: ClosedGeneration = { createdMain: this.createdMain, ver: this.ver, revs: h.revs as number[] };
    if (h.closed === null) h.closed = [g];
    else h.closed.push(g);
    h.revs = null;
    this.createdMain = 0;
    this.ver = 0;
    return true;
  }

  private closedGen(gen: number): ClosedGeneration {
    return ((this.hist as History).closed as ClosedGeneration[])[gen];
  }

  /** The generation holding the revision visible at atRev (CURRENT, an index into closed, or NONE). */
  private findGeneration(atRev: number): number {
    const h = this.hist;
    if (h === null) return this.modMain !== 0 && this.modMain <= atRev ? CURRENT : NONE;
    if (h.revs !== null && h.revs[0] <= atRev) return CURRENT;
    const closed = h.closed;
    if (closed === null) return NONE;
    for (let gi = closed.length - 1; gi >= 0; gi--) {
      const r = closed[gi].revs;
      // A closed generation whose tombstone is at or before atRev: the key did not exist.
      if (r[r.length - 2] <= atRev) return NONE;
      if (r[0] <= atRev) return gi;
    }
    return NONE;
  }

  /** Whether get(atRev) finds the key, without making its result (counting a range's keys). */
  visibleAt(atRev: number): boolean {
    if (atRev >= this.modMain) return this.isLive();
    return this.get(atRev) !== null;
  }

  /**
   * get(atRev)'s revision alone, into `out`: false when the key did not exist then. No object
   * per call when reading at or after its last change (a range of 1M keys made 2M objects).
   */
  revisionAt(atRev: number, out: { main: number; sub: number }): boolean {
    if (atRev >= this.modMain) {
      if (!this.isLive()) return false;
      out.main = this.modMain;
      out.sub = this.modSub;
      return true;
    }
    const g = this.get(atRev);
    if (g === null) return false;
    out.main = g.modMain;
    out.sub = g.modSub;
    return true;
  }

  /** The revision of the key visible at atRev, or null when it did not exist then. */
  get(atRev: number): IndexGet | null {
    assert(!this.isEmpty(), 'get on an empty key index');
    if (atRev >= this.modMain) {
      // Reading at or after the last change (the common case): the key's latest state.
      if (!this.isLive()) return null;
      return { modMain: this.modMain, modSub: this.modSub, createdMain: this.createdMain, ver: this.ver };
    }
    const gen = this.findGeneration(atRev);
    if (gen === NONE) return null;
    const revs = (gen === CURRENT ? this.currentRevs() : this.closedGen(gen).revs) as number[];
    const createdMain = gen === CURRENT ? this.createdMain : this.closedGen(gen).createdMain;
    const ver = gen === CURRENT ? this.ver : this.closedGen(gen).ver;
    const pairs = revs.length >> 1;
    for (let i = pairs - 1; i >= 0; i--) {
      if (revs[2 * i] <= atRev) {
        return { modMain: revs[2 * i], modSub: revs[2 * i + 1], createdMain, ver: ver - (pairs - 1 - i) };
      }
    }
    return null;
  }

  /**
   * Finds the generation holding atRev (CURRENT or an index into closed) and the pair index of
   * the last revision <= atRev in it (-1 when none), adding that revision to `available`.
   */
  private doCompact(atRev: number, available: RevisionSink): { gen: number; revIndex: number } {
    // Skip generations that ended (tombstone) before atRev; a tombstone at atRev stays (etcd >= 3.5.16),
    // unless the key was created again in that same revision (a txn deleting from a key, "\0",
    // and putting it): then the next generation holds the revision visible at atRev, which must
    // stay. (etcd 3.6 stops at the tombstone there and deletes the live value from disk while its
    // index still points at it: etcd issue #22376.)
    let gen = CURRENT;
    const closed = this.hist === null ? null : this.hist.closed;
    if (closed !== null) {
      for (let gi = 0; gi < closed.length; gi++) {
        const r = closed[gi].revs;
        const tomb = r[r.length - 2];
        if (tomb < atRev) continue;
        if (tomb === atRev) {
          const next = gi + 1 < closed.length ? closed[gi + 1].revs : this.currentRevs();
          if (next !== null && next[0] <= atRev) continue;
        }
        gen = gi;
        break;
      }
    }
    const revs = gen === CURRENT ? this.currentRevs() : closed![gen].revs;
    let revIndex = -1;
    if (revs !== null) {
      for (let i = (revs.length >> 1) - 1; i >= 0; i--) {
        if (revs[2 * i] <= atRev) {
          available.add(revs[2 * i], revs[2 * i + 1]);
          revIndex = i;
          break;
        }
      }
    }
    return { gen, revIndex };
  }

  /** Drops history before atRev, keeping the revision visible at atRev. */
  compact(atRev: number, available: RevisionSink): void {
    assert(!this.isEmpty(), 'compact on an empty key index');
    const { gen, revIndex } = this.doCompact(atRev, available);
    const h = this.hist;
    if (h === null) return; // one live revision: nothing older to drop
    if (revIndex > 0) {
      // A fresh exact-size array: splicing would keep the old capacity of a long history.
      if (gen === CURRENT) h.revs = (h.revs as number[]).slice(2 * revIndex);
      else this.closedGen(gen).revs = this.closedGen(gen).revs.slice(2 * revIndex);
    }
    if (gen === CURRENT) h.closed = null;
    else if (gen > 0) (h.closed as ClosedGeneration[]).splice(0, gen);
    // Back to the compact form when only one live revision is left.
    if (h.closed === null && h.revs !== null && h.revs.length === 2) this.hist = null;
  }

  /** The revisions a compaction at atRev would keep, without changing anything (for HashKV). */
  keep(atRev: number, available: RevisionSink): void {
    if (this.isEmpty()) return;
    const { gen, revIndex } = this.doCompact(atRev, available);
    // A tombstone at atRev is kept on disk but left out of hashes, as etcd does, so that
    // versions deleting and keeping it hash alike.
    if (gen !== CURRENT) {
      const revs = this.closedGen(gen).revs;
      if (revIndex === (revs.length >> 1) - 1) available.delete(revs[2 * revIndex], revs[2 * revIndex + 1]);
    }
  }
}

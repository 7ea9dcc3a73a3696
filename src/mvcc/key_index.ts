// The history of one key: its generations (create .. tombstone) of revisions, as etcd's
// keyIndex. A deleted key starts a new, empty generation; the next put creates it again
// (create_revision resets, version counts from 1).
import assert from 'node:assert';
import { revId } from './revision';

export class Generation {
  /** Version of the key after the last revision of this generation. */
  ver = 0;
  createdMain = 0;
  /** Revision pairs in increasing order (main and sub kept in parallel arrays to save memory). */
  readonly mains: number[] = [];
  readonly subs: number[] = [];

  isEmpty(): boolean {
    return this.mains.length === 0;
  }
  lastMain(): number {
    return this.mains[this.mains.length - 1];
  }
}

export interface IndexGet {
  modMain: number;
  modSub: number;
  createdMain: number;
  ver: number;
}

export class KeyIndex {
  modMain = 0;
  modSub = 0;
  generations: Generation[] = [new Generation()];

  constructor(readonly key: string) {}

  isEmpty(): boolean {
    return this.generations.length === 1 && this.generations[0].isEmpty();
  }

  /** True when the key currently exists (its last generation is not closed). */
  isLive(): boolean {
    return !this.generations[this.generations.length - 1].isEmpty();
  }

  /** Records a write; returns true when it created the key (a new generation's first revision). */
  put(main: number, sub: number): boolean {
    assert(main > this.modMain || (main === this.modMain && sub > this.modSub), `put at ${main}.${sub} not after ${this.modMain}.${this.modSub} for key`);
    const g = this.generations[this.generations.length - 1];
    const created = g.isEmpty();
    if (created) g.createdMain = main;
    g.mains.push(main);
    g.subs.push(sub);
    g.ver++;
    this.modMain = main;
    this.modSub = sub;
    return created;
  }

  /** Rebuilds a generation from a stored record whose older history was compacted away. */
  restore(createdMain: number, modMain: number, modSub: number, ver: number): void {
    assert(this.isEmpty(), 'restore on a non-empty key index');
    assert(ver >= 1);
    const g = this.generations[0];
    g.createdMain = createdMain;
    g.ver = ver;
    g.mains.push(modMain);
    g.subs.push(modSub);
    this.modMain = modMain;
    this.modSub = modSub;
  }

  /** Deletes the key at (main, sub). False when the key does not currently exist. */
  tombstone(main: number, sub: number): boolean {
    assert(!this.isEmpty(), 'tombstone on an empty key index');
    if (!this.isLive()) return false;
    this.put(main, sub);
    this.generations.push(new Generation());
    return true;
  }

  private findGeneration(atRev: number): Generation | null {
    const last = this.generations.length - 1;
    for (let gi = last; gi >= 0; gi--) {
      const g = this.generations[gi];
      if (g.isEmpty()) continue;
      // A closed generation whose tombstone is at or before atRev: the key did not exist.
      if (gi !== last && g.lastMain() <= atRev) return null;
      if (g.mains[0] <= atRev) return g;
    }
    return null;
  }

  /** The revision of the key visible at atRev, or null when it did not exist then. */
  get(atRev: number): IndexGet | null {
    assert(!this.isEmpty(), 'get on an empty key index');
    if (atRev >= this.modMain) {
      // Reading at or after the last change (the common case): the key's latest state.
      const last = this.generations[this.generations.length - 1];
      if (last.isEmpty()) return null;
      return { modMain: this.modMain, modSub: this.modSub, createdMain: last.createdMain, ver: last.ver };
    }
    const g = this.findGeneration(atRev);
    if (!g) return null;
    for (let i = g.mains.length - 1; i >= 0; i--) {
      if (g.mains[i] <= atRev) {
        return { modMain: g.mains[i], modSub: g.subs[i], createdMain: g.createdMain, ver: g.ver - (g.mains.length - 1 - i) };
      }
    }
    return null;
  }

  /**
   * Finds the generation holding atRev and the index of the last revision <= atRev in it,
   * adding that revision to `available`.
   */
  private doCompact(atRev: number, available: Set<string>): { genIdx: number; revIndex: number } {
    let genIdx = 0;
    // Skip generations that ended (tombstone) before atRev; a tombstone at atRev stays (etcd >= 3.5.16).
    while (genIdx < this.generations.length - 1) {
      const g = this.generations[genIdx];
      if (g.lastMain() >= atRev) break;
      genIdx++;
    }
    const g = this.generations[genIdx];
    let revIndex = -1;
    for (let i = g.mains.length - 1; i >= 0; i--) {
      if (g.mains[i] <= atRev) {
        available.add(revId(g.mains[i], g.subs[i]));
        revIndex = i;
        break;
      }
    }
    return { genIdx, revIndex };
  }

  /** Drops history before atRev, keeping the revision visible at atRev. */
  compact(atRev: number, available: Set<string>): void {
    assert(!this.isEmpty(), 'compact on an empty key index');
    const { genIdx, revIndex } = this.doCompact(atRev, available);
    const g = this.generations[genIdx];
    if (!g.isEmpty() && revIndex > 0) {
      g.mains.splice(0, revIndex);
      g.subs.splice(0, revIndex);
    }
    if (genIdx > 0) this.generations.splice(0, genIdx);
  }

  /** The revisions a compaction at atRev would keep, without changing anything (for HashKV). */
  keep(atRev: number, available: Set<string>): void {
    if (this.isEmpty()) return;
    const { genIdx, revIndex } = this.doCompact(atRev, available);
    const g = this.generations[genIdx];
    // A tombstone at atRev is kept on disk but left out of hashes, as etcd does, so that
    // versions deleting and keeping it hash alike.
    if (!g.isEmpty() && revIndex === g.mains.length - 1 && genIdx !== this.generations.length - 1) {
      available.delete(revId(g.mains[revIndex], g.subs[revIndex]));
    }
  }
}

import assert from 'node:assert';
import { Entry, Snapshot } from './types';

/**
 * Entries (and at most one incoming snapshot) the server has not yet persisted. entries[i] sits at raft
 * index offset + i.
 */
export class Unstable {
  snapshot: Snapshot | null = null;
  entries: Entry[] = [];
  constructor(public offset: number) {}

  maybeFirstIndex(): number | null {
    return this.snapshot ? this.snapshot.metadata.index + 1 : null;
  }

  maybeLastIndex(): number | null {
    if (this.entries.length !== 0) return this.offset + this.entries.length - 1;
    if (this.snapshot) return this.snapshot.metadata.index;
    return null;
  }

  maybeTerm(i: number): number | null {
    if (i < this.offset) {
      if (this.snapshot && this.snapshot.metadata.index === i) return this.snapshot.metadata.term;
      return null;
    }
    const last = this.maybeLastIndex();
    if (last === null || i > last) return null;
    return this.entries[i - this.offset]!.term;
  }

  /** The server persisted entries up to (i, t); drop them unless they were since replaced. */
  stableTo(i: number, t: number): void {
    const gt = this.maybeTerm(i);
    if (gt === null) return;
    if (gt === t && i >= this.offset) {
      this.entries = this.entries.slice(i + 1 - this.offset);
      this.offset = i + 1;
    }
  }

  stableSnapTo(i: number): void {
    if (this.snapshot && this.snapshot.metadata.index === i) this.snapshot = null;
  }

  restore(s: Snapshot): void {
    this.offset = s.metadata.index + 1;
    this.entries = [];
    this.snapshot = s;
  }

  truncateAndAppend(ents: Entry[]): void {
    const after = ents[0]!.index;
    if (after === this.offset + this.entries.length) {
      // In place: RawNode.ready() hands out a copy, so no caller holds this array.
      for (const e of ents) this.entries.push(e);
    } else if (after <= this.offset) {
      // Replaces everything unstable; the storage part after `after` is overridden by these.
      this.offset = after;
      this.entries = ents.slice();
    } else {
      if (!(after < this.offset + this.entries.length)) assert.fail(`unstable append at ${after} leaves a gap`);
      this.entries = this.entries.slice(0, after - this.offset).concat(ents);
    }
  }

  slice(lo: number, hi: number): Entry[] {
    if (!(lo <= hi)) assert.fail(`invalid unstable.slice ${lo} > ${hi}`);
    const upper = this.offset + this.entries.length;
    if (!(lo >= this.offset && hi <= upper)) assert.fail(`unstable.slice[${lo},${hi}) out of bound [${this.offset},${upper}]`);
    return this.entries.slice(lo - this.offset, hi - this.offset);
  }
}

// The revisions a compaction keeps (one per key), which its physical part and HashKV check the
// records against. At 1M keys a RevisionSet of them was 1M strings built and 1M more looked up
// by the records' scan (3.3 s of a 4.3 s HashKV, against 0.8 s for a store never compacted).
// Here each is one double in an open-addressing table sized once from the key count (no object
// per revision, no rehash, no sort).
import assert from 'node:assert';
import { RevisionSet, type RevisionSink } from './revision';

/** (main, sub) packs into main * 2^20 + sub, exact in a double while main < 2^33 and sub < 2^20. */
const SUB_SCALE = 2 ** 20;
const MAX_PACKED_MAIN = 2 ** 33;
const MIN_SLOTS = 1024;
/** Slots written per prefault() call: 1 MiB. */
const PREFAULT_SLOTS = 131072;
const SLOTS_PER_PAGE = 512;
/** A slot holding 0 is free: revision (0, 0) is never a record's (etcd's first write is 2). */
const FREE = 0;

function packable(main: number, sub: number): boolean {
  return main < MAX_PACKED_MAIN && sub < SUB_SCALE;
}

function slotsFor(revisions: number): number {
  let slots = MIN_SLOTS;
  while (slots < revisions * 2) slots *= 2;
  return slots;
}

export class RevisionTable implements RevisionSink {
  /** Linear probing, at most half full. */
  private slots: Float64Array;
  private mask: number;
  private stored = 0;
  /** Revisions past the packing's range (a txn of over 2^20 operations; beyond 2^33 revisions). */
  private readonly overflow = new RevisionSet();
  /** Every revision added and not taken back, including those above upToMain. */
  private total = 0;
  private lastMain = -1;
  private lastSub = -1;
  /** Where the revision added last went (-1: not into the table). */
  private lastSlot = -1;
  /** Slots below this have been written once (see prefault). */
  private prefaulted = 0;

  /** Keeps only revisions with main <= `upToMain`; `expected`: how many to make room for. */
  constructor(
    private readonly upToMain: number,
    expected = 0,
  ) {
    this.slots = new Float64Array(slotsFor(expected));
    this.mask = this.slots.length - 1;
  }

  /**
   * Writes to each page of the table's next MiB, false once all of it was: the kernel maps a page
   * at its first write, ~11 µs each on these VMs, and a walk's first steps landing on a fresh
   * 16 MiB table (1M keys) faulted ~4000 pages in one turn of the event loop (33-36 ms).
   */
  prefault(): boolean {
    const end = Math.min(this.slots.length, this.prefaulted + PREFAULT_SLOTS);
    // One write per page, of what the slot holds: whatever was added stays.
    for (let i = this.prefaulted; i < end; i += SLOTS_PER_PAGE) this.slots[i] = this.slots[i]!;
    this.prefaulted = end;
    return end < this.slots.length;
  }

  private home(main: number, sub: number): number {
    return (Math.imul(main | 0, 0x9e3779b1) ^ Math.imul((main / 0x1_0000_0000) | 0, 0x85ebca77) ^ Math.imul(sub, 0xc2b2ae35)) & this.mask;
  }

  add(main: number, sub: number): void {
    assert(main >= 1 && sub >= 0, 'a revision below 1');
    this.total++;
    this.lastMain = main;
    this.lastSub = sub;
    this.lastSlot = -1;
    if (main > this.upToMain) return;
    if (!packable(main, sub)) {
      this.overflow.add(main, sub);
      return;
    }
    if ((this.stored + 1) * 2 > this.slots.length) this.grow();
    const p = main * SUB_SCALE + sub;
    let i = this.home(main, sub);
    for (;;) {
      const at = this.slots[i]!;
      if (at === FREE) break;
      assert(at !== p, 'a revision kept twice');
      i = (i + 1) & this.mask;
    }
    this.slots[i] = p;
    this.stored++;
    this.lastSlot = i;
  }

  /** Only the revision added last can be taken back: it ends its probe chain, nothing moves. */
  delete(main: number, sub: number): void {
    assert(main === this.lastMain && sub === this.lastSub, 'only the revision added last can be taken back');
    this.total--;
    this.lastMain = -1;
    this.lastSub = -1;
    if (main > this.upToMain) return;
    if (!packable(main, sub)) {
      this.overflow.delete(main, sub);
      return;
    }
    assert(this.lastSlot >= 0 && this.slots[this.lastSlot] === main * SUB_SCALE + sub);
    this.slots[this.lastSlot] = FREE;
    this.lastSlot = -1;
    this.stored--;
  }

  /** How many revisions a compaction keeps, above upToMain too (etcd hashes every record if none). */
  get size(): number {
    return this.total;
  }

  /** Whether (main, sub), main <= upToMain, is kept. */
  has(main: number, sub: number): boolean {
    assert(main <= this.upToMain);
    if (!packable(main, sub)) return this.overflow.has(main, sub);
    const p = main * SUB_SCALE + sub;
    let i = this.home(main, sub);
    for (;;) {
      const at = this.slots[i]!;
      if (at === p) return true;
      if (at === FREE) return false;
      i = (i + 1) & this.mask;
    }
  }

  /** More revisions than the table was sized for (`expected` is a hint): rehash into twice the room. */
  private grow(): void {
    const old = this.slots;
    this.slots = new Float64Array(old.length * 2);
    this.mask = this.slots.length - 1;
    for (const p of old) {
      if (p === FREE) continue;
      const main = Math.floor(p / SUB_SCALE);
      const sub = p - main * SUB_SCALE;
      let i = this.home(main, sub);
      while (this.slots[i] !== FREE) i = (i + 1) & this.mask;
      this.slots[i] = p;
    }
    this.lastSlot = -1;
  }
}

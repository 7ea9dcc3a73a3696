// A binary min-heap of lease IDs ordered by a deadline in milliseconds, with an index from ID
// to slot so a renewal moves its lease in O(log n) instead of leaving stale entries behind
// (keepalives arrive every few seconds per lease; stale entries would grow without bound).
import assert from 'node:assert';

export class ExpiryHeap {
  private readonly ids: bigint[] = [];
  private readonly deadlinesMs: number[] = [];
  private readonly slotOf = new Map<bigint, number>();

  get size(): number {
    return this.ids.length;
  }

  has(id: bigint): boolean {
    return this.slotOf.has(id);
  }

  /** Insert `id`, or move it if present. */
  upsert(id: bigint, deadlineMs: number): void {
    assert(!Number.isNaN(deadlineMs), 'deadline must be a number');
    const slot = this.slotOf.get(id);
    if (slot === undefined) {
      this.ids.push(id);
      this.deadlinesMs.push(deadlineMs);
      this.slotOf.set(id, this.ids.length - 1);
      this.up(this.ids.length - 1);
      return;
    }
    const old = this.deadlinesMs[slot];
    this.deadlinesMs[slot] = deadlineMs;
    if (deadlineMs < old) this.up(slot);
    else this.down(slot);
  }

  remove(id: bigint): boolean {
    const slot = this.slotOf.get(id);
    if (slot === undefined) return false;
    const last = this.ids.length - 1;
    if (slot !== last) this.swap(slot, last);
    this.ids.pop();
    this.deadlinesMs.pop();
    this.slotOf.delete(id);
    if (slot < this.ids.length) {
      this.down(slot);
      this.up(slot);
    }
    return true;
  }

  peek(): { id: bigint; deadlineMs: number } | undefined {
    if (this.ids.length === 0) return undefined;
    return { id: this.ids[0], deadlineMs: this.deadlinesMs[0] };
  }

  clear(): void {
    this.ids.length = 0;
    this.deadlinesMs.length = 0;
    this.slotOf.clear();
  }

  private less(a: number, b: number): boolean {
    const da = this.deadlinesMs[a];
    const db = this.deadlinesMs[b];
    if (da !== db) return da < db;
    // Equal deadlines: a stable order makes expiry deterministic in tests.
    return this.ids[a] < this.ids[b];
  }

  private swap(a: number, b: number): void {
    const ia = this.ids[a];
    const ib = this.ids[b];
    this.ids[a] = ib;
    this.ids[b] = ia;
    const d = this.deadlinesMs[a];
    this.deadlinesMs[a] = this.deadlinesMs[b];
    this.deadlinesMs[b] = d;
    this.slotOf.set(ib, a);
    this.slotOf.set(ia, b);
  }

  private up(slot: number): void {
    let i = slot;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.less(i, parent)) break;
      this.swap(i, parent);
      i = parent;
    }
  }

  private down(slot: number): void {
    let i = slot;
    const n = this.ids.length;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let smallest = i;
      if (l < n && this.less(l, smallest)) smallest = l;
      if (r < n && this.less(r, smallest)) smallest = r;
      if (smallest === i) return;
      this.swap(i, smallest);
      i = smallest;
    }
  }
}

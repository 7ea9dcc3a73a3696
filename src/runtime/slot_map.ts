// A hash map for the hot path's short-lived entries (the streams of an HTTP/2 connection, the
// proposals waiting for their apply), where a Map churns: one set and one delete per request.
//
// Why not a Map: V8's Map never reuses a deleted slot, so a table holding ~10 live entries is
// reallocated every few inserts, and V8 links each retired table to its successor (for live
// iterators). Once one table of that chain has been promoted to the old generation (any full
// collection promotes the current one), every later table, with the requests its slots still
// point to, is kept alive by that old-to-new pointer through every young collection until the
// next full one. Measured on one member at 100 clients: per young collection 1.1 MB promoted
// with the hot Maps and Sets, 0.36 MB without them; mark-compacts 7 -> 3 per 44000 puts.
//
// Here the arrays are only replaced when the table doubles or shrinks (rare, bounded), a deleted
// slot is cleared at once (linear probing with backward-shift deletion, no tombstones), and a
// retired array points at nothing that outlives it.
import assert from 'node:assert';

export type SlotKey = number | string;

const MIN_CAPACITY = 16;

/**
 * FNV-1a over a string's UTF-16 code units, or the integer's two 32-bit halves, then murmur3's
 * finalizer: the table indexes by the low bits, which a plain multiplicative hash leaves poor
 * (HTTP/2 stream IDs are all odd).
 */
function hashKey(key: SlotKey): number {
  let h: number;
  if (typeof key === 'number') {
    h = (key | 0) ^ Math.imul(Math.floor(key / 0x1_0000_0000) | 0, 0x01000193);
  } else {
    h = 0x811c9dc5;
    for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
  }
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return h ^ (h >>> 16);
}

function emptySlots<T>(n: number): (T | undefined)[] {
  return new Array<T | undefined>(n).fill(undefined);
}

export class SlotMap<K extends SlotKey, V> {
  // Set by the constructor (through clear()), not by initializers, so that V8 takes them for
  // ordinary fields from the start: clear() and resize() were their first writes otherwise, and
  // came late (a connection's close): see H2Connection.closed.
  private keys!: (K | undefined)[];
  private vals!: (V | undefined)[];
  private mask!: number;
  private count!: number;
  /** Most entries at once since the last shrink check, and deletes since then. */
  private peak!: number;
  private deletesSinceCheck!: number;

  /** maxSize bounds the table (and its arrays); set() beyond it is a caller's bug. */
  constructor(private readonly maxSize: number) {
    assert(Number.isInteger(maxSize) && maxSize > 0, 'SlotMap needs a positive bound');
    this.clear();
  }

  get size(): number {
    return this.count;
  }

  get(key: K): V | undefined {
    const i = this.find(key);
    return i < 0 ? undefined : this.vals[i];
  }

  has(key: K): boolean {
    return this.find(key) >= 0;
  }

  set(key: K, value: V): void {
    this.put(key, value, true);
  }

  /** Adds the entry unless the key is already there (then nothing changes); answers whether it did. One probe, not has() then set(). */
  add(key: K, value: V): boolean {
    return this.put(key, value, false);
  }

  /** Answers false only when the key was there and `replace` is false. */
  private put(key: K, value: V, replace: boolean): boolean {
    if (typeof key === 'number' && !Number.isSafeInteger(key)) assert.fail(`SlotMap key ${key} is not a safe integer`);
    let i = hashKey(key) & this.mask;
    for (;;) {
      const k = this.keys[i];
      if (k === undefined) break;
      if (k === key) {
        if (!replace) return false;
        this.vals[i] = value;
        return true;
      }
      i = (i + 1) & this.mask;
    }
    if (this.count >= this.maxSize) assert.fail(`SlotMap is full (${this.maxSize} entries)`);
    this.keys[i] = key;
    this.vals[i] = value;
    this.count++;
    if (this.count > this.peak) this.peak = this.count;
    // At most half full: probe runs stay short.
    if (this.count * 2 > this.mask + 1) this.resize((this.mask + 1) * 2);
    return true;
  }

  /** Removes the entry; answers whether there was one. */
  delete(key: K): boolean {
    let i = this.find(key);
    if (i < 0) return false;
    const keys = this.keys;
    const vals = this.vals;
    const mask = this.mask;
    keys[i] = undefined;
    vals[i] = undefined;
    this.count--;
    // Backward shift: move later members of the probe run into the hole when their home slot
    // does not lie (cyclically) between the hole and their own slot.
    let j = i;
    for (;;) {
      j = (j + 1) & mask;
      const k = keys[j];
      if (k === undefined) break;
      const home = hashKey(k) & mask;
      const stays = i <= j ? i < home && home <= j : i < home || home <= j;
      if (stays) continue;
      keys[i] = k;
      vals[i] = vals[j];
      keys[j] = undefined;
      vals[j] = undefined;
      i = j;
    }
    // Shrink after a burst, judged once per a table's worth of deletes by the most entries held
    // in that window: a table filled and drained by every batch (0 -> 100 -> 0 pending
    // proposals) keeps its size instead of halving and doubling four times a batch.
    const capacity = mask + 1;
    if (++this.deletesSinceCheck >= capacity) {
      let want = MIN_CAPACITY;
      while (want < this.peak * 4) want *= 2;
      this.deletesSinceCheck = 0;
      this.peak = this.count;
      if (want < capacity) this.resize(want);
    }
    return true;
  }

  /** A snapshot of the values (safe to mutate the map while walking it). */
  values(): V[] {
    const out: V[] = [];
    for (let i = 0; i <= this.mask; i++) if (this.keys[i] !== undefined) out.push(this.vals[i] as V);
    return out;
  }

  /** A snapshot of the keys. */
  keyList(): K[] {
    const out: K[] = [];
    for (let i = 0; i <= this.mask; i++) {
      const k = this.keys[i];
      if (k !== undefined) out.push(k);
    }
    return out;
  }

  clear(): void {
    this.keys = emptySlots<K>(MIN_CAPACITY);
    this.vals = emptySlots<V>(MIN_CAPACITY);
    this.mask = MIN_CAPACITY - 1;
    this.count = 0;
    this.peak = 0;
    this.deletesSinceCheck = 0;
  }

  private find(key: K): number {
    let i = hashKey(key) & this.mask;
    for (;;) {
      const k = this.keys[i];
      if (k === undefined) return -1;
      if (k === key) return i;
      i = (i + 1) & this.mask;
    }
  }

  private resize(capacity: number): void {
    const oldKeys = this.keys;
    const oldVals = this.vals;
    this.keys = emptySlots<K>(capacity);
    this.vals = emptySlots<V>(capacity);
    this.mask = capacity - 1;
    for (let i = 0; i < oldKeys.length; i++) {
      const k = oldKeys[i];
      if (k === undefined) continue;
      let j = hashKey(k) & this.mask;
      while (this.keys[j] !== undefined) j = (j + 1) & this.mask;
      this.keys[j] = k;
      this.vals[j] = oldVals[i];
    }
    // The retired arrays may already be old: empty them so they hold nothing young alive.
    oldKeys.fill(undefined);
    oldVals.fill(undefined);
  }
}

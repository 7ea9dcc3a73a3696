// The pool of large response buffers: size classes, reuse, the bound on what it keeps, and the
// invariants that guard against a buffer being in two hands at once.
import { describe, expect, it } from 'vitest';
import { BufferPool, POOLED_MAX_BYTES, POOLED_MIN_BYTES } from '../../../src/runtime/buffer_pool';

describe('BufferPool', () => {
  it('lends buffers of its size classes only', () => {
    const pool = new BufferPool();
    expect(pool.take(POOLED_MIN_BYTES - 1)).toBeNull();
    expect(pool.take(POOLED_MAX_BYTES + 1)).toBeNull();
    expect(pool.take(POOLED_MIN_BYTES)!.length).toBe(POOLED_MIN_BYTES);
    expect(pool.take(POOLED_MIN_BYTES + 1)!.length).toBe(2 * POOLED_MIN_BYTES);
    expect(pool.take(520_005)!.length).toBe(512 * 1024);
    expect(pool.take(524_289)!.length).toBe(1024 * 1024);
    expect(pool.take(POOLED_MAX_BYTES)!.length).toBe(POOLED_MAX_BYTES);
  });

  it('lends a handed-back buffer again, and a new one while it is out', () => {
    const pool = new BufferPool();
    const a = pool.take(100_000)!;
    const b = pool.take(100_000)!;
    expect(b).not.toBe(a);
    pool.giveBack(a);
    expect(pool.freeByteCount).toBe(a.length);
    expect(pool.take(120_000)).toBe(a);
    expect(pool.freeByteCount).toBe(0);
  });

  it('refuses a buffer handed back twice or never lent', () => {
    const pool = new BufferPool();
    const a = pool.take(100_000)!;
    pool.giveBack(a);
    expect(() => pool.giveBack(a)).toThrow(/handed back twice/);
    expect(() => pool.giveBack(Buffer.alloc(2 * POOLED_MIN_BYTES))).toThrow(/never lent/);
  });

  it('keeps at most its bound of free bytes and drops the rest', () => {
    const pool = new BufferPool(3 * POOLED_MIN_BYTES);
    const lent = [1, 2, 3, 4, 5].map(() => pool.take(POOLED_MIN_BYTES)!);
    for (const b of lent) pool.giveBack(b);
    expect(pool.returned).toBe(5);
    expect(pool.freeByteCount).toBe(3 * POOLED_MIN_BYTES);
    // The dropped ones are not lent again: three come back, then new ones.
    const again = [1, 2, 3, 4].map(() => pool.take(POOLED_MIN_BYTES)!);
    expect(again.filter((b) => lent.includes(b))).toHaveLength(3);
  });
});

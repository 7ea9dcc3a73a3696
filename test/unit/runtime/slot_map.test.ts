import { describe, expect, it } from 'vitest';
import { SlotMap, type SlotKey } from '../../../src/runtime/slot_map';
import { mulberry32 as rng } from '../../helpers/random';

function checkAgainst<K extends SlotKey>(m: SlotMap<K, number>, model: Map<K, number>, probe: K[]): void {
  expect(m.size).toBe(model.size);
  for (const k of probe) {
    expect(m.get(k)).toBe(model.get(k));
    expect(m.has(k)).toBe(model.has(k));
  }
  expect([...m.values()].sort((a, b) => a - b)).toEqual([...model.values()].sort((a, b) => a - b));
  expect(new Set(m.keyList())).toEqual(new Set(model.keys()));
}

describe('SlotMap', () => {
  it.each([
    ['odd stream IDs (HTTP/2)', (n: number): SlotKey => 2 * n + 1],
    ['large integers', (n: number): SlotKey => 2 ** 40 + n * 4096],
    ['decimal request IDs', (n: number): SlotKey => (7587381223478800000n + BigInt(n)).toString()],
  ])('agrees with a Map through random sets and deletes: %s', (_name, keyOf) => {
    const next = rng(42);
    const m = new SlotMap<SlotKey, number>(10_000);
    const model = new Map<SlotKey, number>();
    const universe = Array.from({ length: 600 }, (_, n) => keyOf(n));
    for (let step = 0; step < 20_000; step++) {
      const k = universe[Math.floor(next() * universe.length)]!;
      // Phases that grow the table past several doublings, then drain it (shrinks).
      const phase = Math.floor(step / 2500) % 2;
      if (next() < (phase === 0 ? 0.7 : 0.25)) {
        m.set(k, step);
        model.set(k, step);
      } else {
        expect(m.delete(k)).toBe(model.delete(k));
      }
      if (step % 500 === 0) checkAgainst(m, model, universe);
    }
    checkAgainst(m, model, universe);
  });

  it('keeps finding keys whose probe runs wrap around the table end when one is deleted', () => {
    // Dense keys in a 16-slot table: runs collide and wrap; deleting in every order must keep
    // every other key reachable (backward-shift deletion).
    for (let seed = 1; seed <= 50; seed++) {
      const next = rng(seed);
      const m = new SlotMap<number, number>(100);
      const model = new Map<number, number>();
      const keys = Array.from({ length: 7 }, () => Math.floor(next() * 1000));
      for (const k of keys) {
        m.set(k, k);
        model.set(k, k);
      }
      for (const k of [...keys].sort(() => next() - 0.5)) {
        expect(m.delete(k)).toBe(model.delete(k));
        checkAgainst(m, model, keys);
      }
      expect(m.size).toBe(0);
    }
  });

  it('refuses to grow past its bound and rejects keys it cannot hash exactly', () => {
    const m = new SlotMap<number, string>(3);
    m.set(1, 'a');
    m.set(3, 'b');
    m.set(5, 'c');
    m.set(5, 'c2'); // replacing is not growing
    expect(m.get(5)).toBe('c2');
    expect(() => m.set(7, 'd')).toThrow(/full \(3 entries\)/);
    expect(() => new SlotMap<number, string>(10).set(2 ** 60, 'x')).toThrow(/safe integer/);
    expect(() => new SlotMap<number, string>(0)).toThrow(/bound/);
  });

  it('clear() empties it and it is usable again', () => {
    const m = new SlotMap<string, number>(1000);
    for (let i = 0; i < 300; i++) m.set(`k${i}`, i);
    m.clear();
    expect(m.size).toBe(0);
    expect(m.get('k1')).toBeUndefined();
    m.set('k1', 1);
    expect(m.get('k1')).toBe(1);
    expect(m.values()).toEqual([1]);
  });
});

describe('SlotMap capacity', () => {
  /** The table's slot count, read through its private arrays (what the shrink policy decides). */
  const capacityOf = (m: SlotMap<number, number>): number => (m as unknown as { keys: unknown[] }).keys.length;

  it('keeps its size when every batch fills and drains it, and shrinks once a burst is over', () => {
    const m = new SlotMap<number, number>(100_000);
    let id = 0;
    const cycle = (n: number): void => {
      const ids: number[] = [];
      for (let i = 0; i < n; i++) {
        m.set(++id, i);
        ids.push(id);
      }
      for (const k of ids) m.delete(k);
    };
    cycle(100);
    const steady = capacityOf(m);
    expect(steady).toBe(256);
    for (let i = 0; i < 50; i++) cycle(100);
    expect(capacityOf(m)).toBe(steady);

    cycle(10_000);
    expect(capacityOf(m)).toBeGreaterThanOrEqual(16_384);
    // Quiet again (a few at a time): the next windows of deletes shrink it back down.
    for (let i = 0; i < 20_000; i++) cycle(3);
    expect(capacityOf(m)).toBeLessThanOrEqual(16);
    expect(m.size).toBe(0);
  });
});

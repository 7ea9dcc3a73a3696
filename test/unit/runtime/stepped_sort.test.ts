import { describe, expect, it } from 'vitest';
import { SteppedSort } from '../../../src/runtime/stepped_sort';

/** Array.prototype.sort's answer (stable) for the positions of `values`. */
function reference(values: number[], cmp: (a: number, b: number) => number): number[] {
  return values.map((_, p) => p).sort((a, b) => cmp(values[a], values[b]));
}

function sortInSteps(values: number[], cmp: (a: number, b: number) => number, moves: number): { order: number[]; steps: number } {
  const sort = new SteppedSort(values.length, (a, b) => cmp(values[a], values[b]));
  let steps = 1;
  while (!sort.step(moves)) steps++;
  return { order: Array.from(sort.order), steps };
}

function seeded(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

describe('SteppedSort', () => {
  const asc = (a: number, b: number): number => a - b;
  const desc = (a: number, b: number): number => b - a;

  it('gives Array.prototype.sort order, ties in input order, whatever the step size', () => {
    const rand = seeded(7);
    for (const n of [0, 1, 2, 3, 5, 16, 17, 100, 1000, 4097]) {
      // Few distinct values: many ties, whose order must be the input's.
      const values = Array.from({ length: n }, () => Math.floor(rand() * 10));
      for (const cmp of [asc, desc]) {
        const want = reference(values, cmp);
        for (const moves of [1, 7, 64, 1e9]) expect(sortInSteps(values, cmp, moves).order).toEqual(want);
      }
    }
  });

  it('sorts sorted and reversed input, and takes steps of the size asked', () => {
    const n = 10000;
    const sorted = Array.from({ length: n }, (_, p) => p);
    const reversed = sorted.slice().reverse();
    for (const values of [sorted, reversed]) {
      const { order, steps } = sortInSteps(values, asc, 1000);
      expect(order.map((p) => values[p])).toEqual(sorted);
      // 14 passes of 10000 moves each, 1000 per step.
      expect(steps).toBeGreaterThanOrEqual(140);
      expect(steps).toBeLessThanOrEqual(141);
    }
  });

  it('refuses to hand out an order before it is done', () => {
    const sort = new SteppedSort(100, (a, b) => b - a);
    expect(sort.step(10)).toBe(false);
    expect(() => sort.order).toThrow(/before the sort is done/);
  });
});

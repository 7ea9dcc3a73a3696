import { describe, expect, it } from 'vitest';
import { revId } from '../../../src/mvcc/revision';
import { RevisionTable } from '../../../src/mvcc/revision_table';

describe('RevisionTable', () => {
  it('answers as a Set does: revisions added, the last one taken back, those above its limit left out, past the packing range too, beyond its sized room', () => {
    const upTo = 2 ** 34;
    // Sized for far fewer than it gets: it must grow (rehash) several times.
    const table = new RevisionTable(upTo, 10);
    while (table.prefault());
    const set = new Set<string>();
    let total = 0;
    let seed = 11;
    const next = (n: number): number => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed % n;
    };
    const revs: Array<[number, number]> = [];
    for (let i = 0; i < 30_000; i++) {
      // Mostly ordinary revisions; some with a sub past 2^20 or a main past 2^33 (kept apart),
      // and some above the limit (counted, never found).
      const kind = next(20);
      const main = kind === 0 ? 2 ** 33 + i : kind === 1 ? upTo + 1 + i : 1 + 3 * i + next(3);
      const sub = kind === 2 ? 2 ** 20 + next(5) : next(4);
      table.add(main, sub);
      total++;
      if (main <= upTo) set.add(revId(main, sub));
      if (next(5) === 0) {
        table.delete(main, sub);
        total--;
        set.delete(revId(main, sub));
      } else if (main <= upTo) revs.push([main, sub]);
    }
    expect(table.size).toBe(total);
    expect(set.size).toBe(revs.length);
    for (const [main, sub] of revs) expect(table.has(main, sub)).toBe(true);
    // Neighbours of every revision (same main, other subs; next mains) answer as the Set.
    for (const [main, sub] of revs.slice(0, 5000)) {
      for (const [m, s] of [[main, sub + 1], [main + 1, sub], [main, sub + 2 ** 20]] as const) {
        if (m <= upTo) expect(table.has(m, s)).toBe(set.has(revId(m, s)));
      }
    }
    expect(() => table.has(upTo + 1, 0)).toThrow();
  });

  it('takes back only the revision added last, and refuses one added twice', () => {
    const table = new RevisionTable(100, 4);
    table.add(5, 0);
    table.add(6, 1);
    expect(() => table.delete(5, 0)).toThrow(/added last/);
    table.delete(6, 1);
    expect(table.has(6, 1)).toBe(false);
    expect(table.has(5, 0)).toBe(true);
    expect(() => table.add(5, 0)).toThrow(/kept twice/);
    expect(() => table.add(0, 0)).toThrow(/below 1/);
  });

  it('prefaults its room a MiB per call, changing nothing it holds', () => {
    const table = new RevisionTable(10 ** 9, 300_000); // 1M slots: 8 MiB
    table.add(7, 3);
    let calls = 0;
    while (table.prefault()) calls++;
    expect(calls).toBe(7);
    expect(table.has(7, 3)).toBe(true);
    expect(table.size).toBe(1);
  });
});

import { describe, expect, it } from 'vitest';
import { EntryLocations } from '../../../src/wal/locations';

describe('EntryLocations', () => {
  it('keeps every location through growth and drops from the front, across many compactions', () => {
    const l = new EntryLocations();
    let first = 1;
    for (let i = 1; i <= 20_000; i++) {
      l.put(i, i >> 10, i * 100, 50 + (i % 7));
      // A compaction every 3000 entries keeps the last 500, as the WAL's compact() would.
      if (i % 3000 === 0) {
        first = i - 500 + 1;
        l.dropUpTo(i - 500);
      }
    }
    expect(l.size()).toBe(20_000 - first + 1);
    expect(l.get(first - 1)).toBeNull();
    expect(l.get(20_001)).toBeNull();
    for (const i of [first, first + 1, first + 1234, 19_999, 20_000]) {
      expect(l.get(i)).toEqual({ seq: i >> 10, at: i * 100, recordBytes: 50 + (i % 7) });
    }
  });

  it('an index at or below the last replaces the tail from there; a gap or an index before the first starts over', () => {
    const l = new EntryLocations();
    for (let i = 10; i <= 20; i++) l.put(i, 0, i, 1);
    l.put(15, 1, 999, 2);
    expect(l.size()).toBe(6);
    expect(l.get(15)).toEqual({ seq: 1, at: 999, recordBytes: 2 });
    expect(l.get(16)).toBeNull();
    expect(l.get(14)).toEqual({ seq: 0, at: 14, recordBytes: 1 });
    l.put(30, 2, 3000, 3);
    expect([l.size(), l.get(14), l.get(30)]).toEqual([1, null, { seq: 2, at: 3000, recordBytes: 3 }]);
    l.put(5, 3, 500, 4);
    expect([l.size(), l.get(30), l.get(5)]).toEqual([1, null, { seq: 3, at: 500, recordBytes: 4 }]);
    l.reset();
    expect([l.size(), l.get(5)]).toEqual([0, null]);
  });
});

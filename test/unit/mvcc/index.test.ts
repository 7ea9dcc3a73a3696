import { describe, expect, it } from 'vitest';
import { KeyIndex } from '../../../src/mvcc/key_index';
import { HitRevisions, TreeIndex } from '../../../src/mvcc/tree_index';
import { RevisionSet, revId } from '../../../src/mvcc/revision';

describe('KeyIndex', () => {
  it('tracks generations: versions count from 1, a delete starts a new generation', () => {
    const ki = new KeyIndex('a');
    ki.put(2, 0);
    ki.put(3, 0);
    expect(ki.get(3)).toEqual({ modMain: 3, modSub: 0, createdMain: 2, ver: 2 });
    expect(ki.get(2)).toEqual({ modMain: 2, modSub: 0, createdMain: 2, ver: 1 });
    expect(ki.get(1)).toBeNull();
    expect(ki.tombstone(4, 0)).toBe(true);
    expect(ki.get(4)).toBeNull();
    expect(ki.get(3)?.ver).toBe(2);
    expect(ki.tombstone(5, 0)).toBe(false); // already deleted
    ki.put(6, 1);
    expect(ki.get(6)).toEqual({ modMain: 6, modSub: 1, createdMain: 6, ver: 1 });
    expect(ki.get(5)).toBeNull();
  });

  it('asserts revisions increase', () => {
    const ki = new KeyIndex('a');
    ki.put(5, 1);
    expect(() => ki.put(5, 0)).toThrow();
    expect(() => ki.put(4, 9)).toThrow();
  });

  it('compacts keeping the revision visible at the compact revision', () => {
    const ki = new KeyIndex('a');
    ki.put(2, 0);
    ki.put(4, 0);
    ki.tombstone(6, 0);
    ki.put(8, 0);
    const avail = new RevisionSet();
    ki.compact(5, avail);
    expect([...avail]).toEqual(['4_0']);
    expect(ki.get(5)?.modMain).toBe(4);
    expect(ki.get(9)?.modMain).toBe(8);
    const avail2 = new RevisionSet();
    ki.compact(7, avail2);
    // The generation that ended at 6 is gone; the current one has nothing <= 7.
    expect([...avail2]).toEqual([]);
    expect(ki.generationCount()).toBe(1);
    expect(ki.get(8)?.createdMain).toBe(8);
  });

  it('keeps a tombstone at exactly the compact revision (etcd >= 3.5.16) but not in hashes', () => {
    const ki = new KeyIndex('a');
    ki.put(2, 0);
    ki.tombstone(3, 0);
    const keep = new RevisionSet();
    ki.keep(3, keep);
    expect(keep.size).toBe(0);
    const avail = new RevisionSet();
    ki.compact(3, avail);
    expect([...avail]).toEqual(['3_0']);
    expect(ki.isEmpty()).toBe(false);
    const avail2 = new RevisionSet();
    ki.compact(4, avail2);
    expect(ki.isEmpty()).toBe(true);
  });
});

describe('KeyIndex compact form', () => {
  it('a key with one revision answers like one with history, before and after compaction', () => {
    const ki = new KeyIndex('a');
    expect(ki.isEmpty()).toBe(true);
    expect(ki.put(2, 0)).toBe(true);
    expect(ki.isLive()).toBe(true);
    expect(ki.get(1)).toBeNull();
    expect(ki.get(2)).toEqual({ modMain: 2, modSub: 0, createdMain: 2, ver: 1 });
    // Long history: grows past the exact-size copies into ordinary pushes.
    for (let r = 3; r < 103; r++) expect(ki.put(r, 1)).toBe(false);
    expect(ki.get(50)).toEqual({ modMain: 50, modSub: 1, createdMain: 2, ver: 49 });
    expect(ki.get(200)).toEqual({ modMain: 102, modSub: 1, createdMain: 2, ver: 101 });
    const avail = new RevisionSet();
    ki.compact(102, avail);
    expect([...avail]).toEqual(['102_1']);
    expect(ki.get(101)).toBeNull();
    expect(ki.get(102)).toEqual({ modMain: 102, modSub: 1, createdMain: 2, ver: 101 });
    expect(ki.put(103, 0)).toBe(false);
    expect(ki.get(103)?.ver).toBe(102);
    expect(ki.get(102)?.ver).toBe(101);
  });

  it('deletes and recreates a restored single-revision key', () => {
    const ki = new KeyIndex('a');
    ki.restore(3, 7, 2, 4);
    expect(ki.get(7)).toEqual({ modMain: 7, modSub: 2, createdMain: 3, ver: 4 });
    expect(ki.get(6)).toBeNull();
    expect(() => ki.put(7, 1)).toThrow();
    expect(ki.tombstone(8, 0)).toBe(true);
    expect(ki.isLive()).toBe(false);
    expect(ki.get(7)?.ver).toBe(4);
    expect(ki.get(8)).toBeNull();
    expect(ki.put(9, 0)).toBe(true);
    expect(ki.get(9)).toEqual({ modMain: 9, modSub: 0, createdMain: 9, ver: 1 });
    expect(ki.generationCount()).toBe(2);
    const keep = new RevisionSet();
    ki.keep(8, keep);
    expect(keep.size).toBe(0); // the tombstone at the compact revision stays out of hashes
    const avail = new RevisionSet();
    ki.compact(9, avail);
    expect([...avail]).toEqual(['9_0']);
    expect(ki.generationCount()).toBe(1);
    expect(ki.get(8)).toBeNull();
    expect(ki.get(9)?.createdMain).toBe(9);
  });
});

describe('TreeIndex', () => {
  it('ranges in byte order with binary keys, open ends and single keys', () => {
    const t = new TreeIndex();
    const keys = [Buffer.from([0x00]), Buffer.from([0x00, 0x00]), Buffer.from('a'), Buffer.from([0x61, 0xff]), Buffer.from([0xff]), Buffer.from([0xff, 0x00])];
    keys.forEach((k, i) => t.put(k.toString('latin1'), i + 2, 0));
    const all = t.range('\u0000', '', 100).map((h) => Buffer.from(h.key, 'latin1'));
    expect(all).toEqual([...keys].sort(Buffer.compare));
    expect(t.range('a', '\u00ff', 100).map((h) => h.key)).toEqual(['a', 'a\u00ff']);
    expect(t.range('a', null, 100).map((h) => h.key)).toEqual(['a']);
    expect(t.range('b', 'a', 100)).toEqual([]);
    expect(t.keyCount()).toBe(6);
    t.tombstone('a', 10, 0);
    expect(t.keyCount()).toBe(5);
    expect(t.range('a', null, 100)).toEqual([]);
    expect(t.range('a', null, 9).length).toBe(1);
  });

  it('inserts a restored key index once, counts it live, and refuses a second for the same key', () => {
    const t = new TreeIndex();
    const ki = new KeyIndex('k');
    ki.restore(3, 5, 0, 2);
    t.insert(ki);
    expect(t.keyIndex('k')).toBe(ki);
    expect(t.keyCount()).toBe(1);
    const again = new KeyIndex('k');
    again.restore(3, 6, 0, 3);
    expect(() => t.insert(again)).toThrow('key index inserted twice');
    expect(t.keyIndex('k')).toBe(ki);
    expect(t.keyCount()).toBe(1);
  });
});

describe('TreeIndex ranges in parts', () => {
  it('finds in parts of any size what rangeLimited finds in one: hits, limit and count, open ends and single keys', () => {
    const t = new TreeIndex();
    for (let i = 0; i < 200; i++) t.put(`k${String(i).padStart(3, '0')}`, i + 2, 0);
    for (let i = 0; i < 200; i += 3) t.tombstone(`k${String(i).padStart(3, '0')}`, 300 + i, 0);
    for (let i = 0; i < 200; i += 7) t.put(`k${String(i).padStart(3, '0')}`, 600 + i, 1);
    const cases: Array<[string, string | null, number, number]> = [
      ['k', 'l', 900, 0],
      ['k', 'l', 900, 25],
      ['k050', '', 450, 0],
      ['k050', '', 250, 10],
      ['\u0000', '', 900, 0],
      ['k007', null, 900, 0],
      ['k003', null, 900, 0],
      ['k100', 'k050', 900, 0],
    ];
    for (const [key, end, atRev, limit] of cases) {
      const whole = t.rangeLimited(key, end, atRev, limit);
      for (const maxKeys of [1, 2, 7, 64, 1000]) {
        // In parts, as revisions only (the stepped range's records): the same hits and count.
        const into = new HitRevisions();
        let after: string | null = null;
        let parts = 0;
        while ((after = t.rangeLimitedSome(key, end, atRev, limit, after, maxKeys, into)) !== null) parts++;
        expect({ mains: into.mains, subs: into.subs, total: into.total }, `${key}..${end} at ${atRev} limit ${limit} in parts of ${maxKeys}`).toEqual({
          mains: whole.hits.map((h) => h.modMain),
          subs: whole.hits.map((h) => h.modSub),
          total: whole.total,
        });
        if (maxKeys === 1 && end === 'l') expect(parts).toBe(200);
      }
    }
  });
});

describe('RevisionSet', () => {
  it('adds, finds, deletes, counts and lists revisions as a Set does', () => {
    const rs = new RevisionSet();
    const set = new Set<string>();
    let seed = 7;
    const next = (n: number): number => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed % n;
    };
    for (let i = 0; i < 50_000; i++) {
      const main = next(20_000);
      const sub = next(3);
      const id = revId(main, sub);
      if (next(4) === 0) expect(rs.delete(main, sub)).toBe(set.delete(id));
      else {
        rs.add(main, sub);
        set.add(id);
      }
      if (i % 997 === 0) expect(rs.has(main, sub)).toBe(set.has(id));
    }
    expect(rs.size).toBe(set.size);
    expect([...rs].sort()).toEqual([...set].sort());
    for (let m = 0; m < 20_000; m += 7) expect(rs.has(m, 1)).toBe(set.has(revId(m, 1)));
  });
});

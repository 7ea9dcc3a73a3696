import { describe, expect, it } from 'vitest';
import { Entry, ErrCompacted, ErrSnapOutOfDate, ErrUnavailable, MemoryStorage } from '../../../src/raft';

const ent = (index: number, term: number, size = 0): Entry => ({ index, term, type: 0, data: Buffer.alloc(size) });
const cs = { voters: [1n], learners: [], votersOutgoing: [], learnersNext: [], autoLeave: false };

function storageWith(...ents: Entry[]): MemoryStorage {
  const s = new MemoryStorage();
  s.append(ents);
  return s;
}

describe('MemoryStorage', () => {
  it('reports first/last index and terms, with ErrCompacted/ErrUnavailable outside', () => {
    const s = storageWith(ent(1, 1), ent(2, 1), ent(3, 2));
    expect([s.firstIndex(), s.lastIndex(), s.term(3)]).toEqual([1, 3, 2]);
    expect(s.term(0)).toBe(0);
    expect(() => s.term(4)).toThrow(ErrUnavailable);
    s.compact(2);
    expect(s.firstIndex()).toBe(3);
    expect(s.term(2)).toBe(1);
    expect(() => s.term(1)).toThrow(ErrCompacted);
    expect(() => s.entries(2, 4, 1e9)).toThrow(ErrCompacted);
  });

  it('entries are size limited but return at least one', () => {
    const s = storageWith(ent(1, 1, 100), ent(2, 1, 100), ent(3, 1, 100));
    expect(s.entries(1, 4, 1).map((e) => e.index)).toEqual([1]);
    expect(s.entries(1, 4, 220).map((e) => e.index)).toEqual([1, 2]);
    expect(s.entries(1, 4, 1e9).map((e) => e.index)).toEqual([1, 2, 3]);
  });

  it('append truncates a conflicting suffix and ignores compacted entries', () => {
    const s = storageWith(ent(1, 1), ent(2, 1), ent(3, 1));
    s.append([ent(2, 2), ent(3, 2), ent(4, 2)]);
    expect(s.entries(1, 5, 1e9).map((e) => e.term)).toEqual([1, 2, 2, 2]);
    s.compact(3);
    s.append([ent(2, 2), ent(3, 2), ent(4, 2), ent(5, 3)]);
    expect(s.lastIndex()).toBe(5);
    expect(() => s.append([ent(7, 3)])).toThrow(/missing log entry/);
  });

  it('createSnapshot/applySnapshot refuse out-of-date snapshots', () => {
    const s = storageWith(ent(1, 1), ent(2, 1), ent(3, 2));
    const snap = s.createSnapshot(2, cs, Buffer.from('d'));
    expect(snap.metadata).toEqual({ index: 2, term: 1, confState: cs });
    expect(() => s.createSnapshot(2, cs, Buffer.alloc(0))).toThrow(ErrSnapOutOfDate);
    const t = new MemoryStorage();
    t.applySnapshot({ data: Buffer.alloc(0), metadata: { index: 5, term: 3, confState: cs } });
    expect([t.firstIndex(), t.lastIndex(), t.term(5)]).toEqual([6, 5, 3]);
    expect(t.initialState().confState).toEqual(cs);
    expect(() => t.applySnapshot({ data: Buffer.alloc(0), metadata: { index: 4, term: 3, confState: cs } })).toThrow(ErrSnapOutOfDate);
  });
});

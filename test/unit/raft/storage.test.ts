import { describe, expect, it } from 'vitest';
import { Entry, ErrCompacted, ErrSnapOutOfDate, ErrUnavailable, MemoryStorage } from '../../../src/raft';

const ent = (index: number, term: number, size = 0): Entry => ({ index, term, type: 0, data: Buffer.alloc(size) });
const cs = { voters: [1n], learners: [], votersOutgoing: [], learnersNext: [], autoLeave: false };

function storageWith(...ents: Entry[]): MemoryStorage {
  const s = new MemoryStorage();
  s.append(ents);
  return s;
}

/** A storage whose released entries are read back from `durable`, recording each read in `reads`. */
function storageOverLog(): { s: MemoryStorage; reads: number[]; durable: Map<number, Entry> } {
  const reads: number[] = [];
  const durable = new Map<number, Entry>();
  const s = new MemoryStorage({
    readEntryData: (index, term) => {
      reads.push(index);
      const e = durable.get(index);
      if (!e || e.term !== term) throw new Error(`no ${index}/${term}`);
      return Buffer.from(e.data);
    },
  });
  return { s, reads, durable };
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

  it('releases applied entries down to a budget and reads them back, as far as the size limit reaches', () => {
    const { s, reads, durable } = storageOverLog();
    const ents = [1, 2, 3, 4, 5].map((i) => ({ index: i, term: 1, type: 0, data: Buffer.alloc(100, i) }));
    ents.push({ index: 6, term: 1, type: 0, data: Buffer.alloc(0) });
    for (const e of ents) durable.set(e.index, e);
    s.append(ents);
    const handedOut = s.entries(1, 2, 1e9)[0]!;
    expect(s.residentDataBytes()).toBe(500);
    s.release(4, 250); // entries up to 4 (applied), oldest first, until at most 250 bytes stay
    expect(s.residentDataBytes()).toBe(200);
    expect(handedOut.data).toEqual(Buffer.alloc(100, 1));
    expect(reads).toEqual([]);
    expect(s.entries(4, 7, 1e9).map((e) => e.data.length)).toEqual([100, 100, 0]);
    expect(reads).toEqual([]);
    // A size limit stops the reads too: the second entry passes it and is neither read on nor returned.
    expect(s.entries(1, 7, 220).map((e) => [e.index, e.data[0]])).toEqual([[1, 1], [2, 2]]);
    expect(reads).toEqual([1, 2, 3]);
    reads.length = 0;
    expect(s.entries(1, 7, 1e9).map((e) => e.data[0] ?? 0)).toEqual([1, 2, 3, 4, 5, 0]);
    expect(reads).toEqual([1, 2, 3]);
    // A new leader's overwrite from 3 on: the new entries are in memory, the old released ones gone.
    const over = [3, 4].map((i) => ({ index: i, term: 2, type: 0, data: Buffer.alloc(50, 9) }));
    for (const e of over) durable.set(e.index, e);
    s.append(over);
    expect(s.residentDataBytes()).toBe(100);
    reads.length = 0;
    expect(s.entries(1, 5, 1e9).map((e) => [e.term, e.data.length])).toEqual([[1, 100], [1, 100], [2, 50], [2, 50]]);
    expect(reads).toEqual([1, 2]);
    s.compact(3);
    expect(s.residentDataBytes()).toBe(50);
    s.release(4, 0);
    expect(s.residentDataBytes()).toBe(0);
    expect(s.entries(4, 5, 1e9)[0]!.data).toEqual(Buffer.alloc(50, 9));
  });

  it("holds a restart's log without its data and reads each entry back when asked", () => {
    const { s, reads, durable } = storageOverLog();
    s.applySnapshot({ data: Buffer.alloc(0), metadata: { index: 10, term: 2, confState: cs } });
    const ents = [11, 12, 13, 14].map((i) => ({ index: i, term: 3, type: 0, data: i === 12 ? Buffer.alloc(0) : Buffer.alloc(100, i) }));
    for (const e of ents) durable.set(e.index, e);
    s.appendFromLog(ents.map((e) => ({ index: e.index, term: e.term, type: e.type, dataBytes: e.data.length })));
    expect([s.firstIndex(), s.lastIndex(), s.term(13)]).toEqual([11, 14, 3]);
    expect(s.residentDataBytes()).toBe(0);
    expect(reads).toEqual([]);
    // The empty entry is not read back; the others are, as far as the size limit reaches.
    expect(s.entries(11, 15, 150).map((e) => [e.index, e.data.length])).toEqual([[11, 100], [12, 0]]);
    expect(reads).toEqual([11, 13]);
    reads.length = 0;
    expect(s.entries(12, 15, 1e9).map((e) => e.data[0] ?? 0)).toEqual([0, 13, 14]);
    expect(reads).toEqual([13, 14]);
    // Reading back does not bring the data into the log's memory; releasing it again is a no-op.
    expect(s.residentDataBytes()).toBe(0);
    s.release(14, 0);
    // New entries after them are held in memory, as appended ones are.
    s.append([{ index: 15, term: 3, type: 0, data: Buffer.alloc(30, 1) }]);
    expect(s.residentDataBytes()).toBe(30);
    reads.length = 0;
    expect(s.entries(15, 16, 1e9)[0]!.data).toEqual(Buffer.alloc(30, 1));
    expect(reads).toEqual([]);
    // Only into an empty log, right after its snapshot, and contiguous.
    expect(() => s.appendFromLog([{ index: 16, term: 3, type: 0, dataBytes: 1 }])).toThrow(/empty log/);
    const t = new MemoryStorage({ readEntryData: () => Buffer.alloc(0) });
    expect(() => t.appendFromLog([{ index: 2, term: 1, type: 0, dataBytes: 1 }])).toThrow(/follow the snapshot/);
    expect(() => new MemoryStorage().appendFromLog([{ index: 1, term: 1, type: 0, dataBytes: 1 }])).toThrow(/without a reader/);
  });

  it('without a reader keeps every entry in memory', () => {
    const s = storageWith(ent(1, 1, 100), ent(2, 1, 100));
    s.release(2, 0);
    expect(s.residentDataBytes()).toBe(200);
    expect(s.entries(1, 3, 1e9).map((e) => e.data.length)).toEqual([100, 100]);
  });
});

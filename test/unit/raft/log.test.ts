import { describe, expect, it } from 'vitest';
import { Entry, MemoryStorage } from '../../../src/raft';
import { RaftLog } from '../../../src/raft/raft-log';

const ent = (index: number, term: number): Entry => ({ index, term, type: 0, data: Buffer.alloc(0) });
const terms = (l: RaftLog) => l.allEntries().map((e) => e.term);

function logWith(...ts: number[]): RaftLog {
  const s = new MemoryStorage();
  s.append(ts.map((t, i) => ent(i + 1, t)));
  return new RaftLog(s);
}

describe('RaftLog', () => {
  it('maybeAppend appends only after a matching (index, term) and truncates a conflicting suffix', () => {
    const l = logWith(1, 1, 2, 2);
    expect(l.maybeAppend(4, 3, 0, [ent(5, 3)])).toBeNull();
    expect(l.maybeAppend(2, 1, 0, [ent(3, 3), ent(4, 3)])).toBe(4);
    expect(terms(l)).toEqual([1, 1, 3, 3]);
    // An already-present prefix is not rewritten, and a shorter message does not truncate.
    expect(l.maybeAppend(1, 1, 0, [ent(2, 1)])).toBe(2);
    expect(terms(l)).toEqual([1, 1, 3, 3]);
  });

  it('maybeAppend commits min(leader commit, last new index)', () => {
    const l = logWith(1, 1, 1);
    l.maybeAppend(3, 1, 10, [ent(4, 2)]);
    expect(l.committed).toBe(4);
    l.maybeAppend(1, 1, 2, []);
    expect(l.committed).toBe(4); // commit never decreases
  });

  it('refuses to truncate committed entries', () => {
    const l = logWith(1, 1, 1);
    l.commitTo(3);
    expect(() => l.maybeAppend(1, 1, 3, [ent(2, 2)])).toThrow(/conflict with committed/);
  });

  it('findConflictByTerm returns the last index at or before a term', () => {
    const l = logWith(1, 1, 2, 2, 4, 4, 4);
    expect(l.findConflictByTerm(7, 3)).toBe(4);
    expect(l.findConflictByTerm(7, 1)).toBe(2);
    expect(l.findConflictByTerm(7, 5)).toBe(7);
    expect(l.findConflictByTerm(9, 1)).toBe(9);
  });

  it('isUpToDate compares last term first, then length (§5.4.1)', () => {
    const l = logWith(1, 2, 2);
    expect(l.isUpToDate(1, 3)).toBe(true);
    expect(l.isUpToDate(10, 1)).toBe(false);
    expect(l.isUpToDate(3, 2)).toBe(true);
    expect(l.isUpToDate(2, 2)).toBe(false);
  });

  it('maybeCommit only commits entries of the given term', () => {
    const l = logWith(1, 1, 2);
    expect(l.maybeCommit(2, 2)).toBe(false);
    expect(l.maybeCommit(3, 2)).toBe(true);
    expect(l.committed).toBe(3);
  });

  it('unstable entries leave once stable, unless replaced meanwhile', () => {
    const l = logWith(1);
    l.append([ent(2, 1), ent(3, 1)]);
    expect(l.unstableEntries().map((e) => e.index)).toEqual([2, 3]);
    l.append([ent(3, 2)]);
    l.stableTo(3, 1); // stale: entry 3 now has term 2
    expect(l.unstableEntries().map((e) => e.index)).toEqual([2, 3]);
    l.stableTo(3, 2);
    expect(l.unstableEntries()).toEqual([]);
  });

  it('rejects appends that break contiguity or decrease terms', () => {
    const l = logWith(1, 2);
    expect(() => l.append([ent(4, 2)])).toThrow();
    expect(() => l.append([ent(3, 1)])).toThrow(/must not decrease/);
  });

  it('nextEnts returns committed but unapplied entries', () => {
    const l = logWith(1, 1, 1, 1);
    l.commitTo(3);
    l.appliedTo(1);
    expect(l.nextEnts().map((e) => e.index)).toEqual([2, 3]);
    expect(() => l.appliedTo(4)).toThrow();
  });
});

import { describe, expect, it } from 'vitest';
import { ProgressState } from '../../../src/raft';
import { Inflights, Progress } from '../../../src/raft/progress';
import { ProgressTracker } from '../../../src/raft/tracker';

describe('Inflights', () => {
  it('holds at most its size and frees in order', () => {
    const f = new Inflights(3);
    f.add(5);
    f.add(7);
    f.add(9);
    expect(f.full()).toBe(true);
    expect(() => f.add(10)).toThrow();
    f.freeLE(7);
    expect(f.length).toBe(1);
    f.add(11);
    f.add(12);
    expect(f.full()).toBe(true);
    f.freeFirstOne();
    expect(f.length).toBe(2);
    f.freeLE(100);
    expect(f.length).toBe(0);
  });
});

describe('Inflights with a byte bound (etcd-raft MaxInflightBytes)', () => {
  it('is full once the entry bytes in flight reach the bound, and frees them with their messages', () => {
    const f = new Inflights(10, 100);
    f.add(1, 60);
    expect(f.full()).toBe(false);
    f.add(2, 50);
    expect([f.full(), f.inflightBytes]).toEqual([true, 110]);
    expect(() => f.add(3, 1)).toThrow(/full inflights/);
    f.freeLE(1);
    expect([f.full(), f.inflightBytes, f.length]).toEqual([false, 50, 1]);
    f.add(3, 10);
    f.freeFirstOne();
    expect([f.inflightBytes, f.length]).toEqual([10, 1]);
    f.reset();
    expect([f.inflightBytes, f.length]).toEqual([0, 0]);
    // 0: the message count is the only bound.
    const g = new Inflights(2, 0);
    g.add(1, 1e9);
    expect(g.full()).toBe(false);
  });
});

describe('Progress', () => {
  it('probe: one message in flight until acknowledged', () => {
    const p = new Progress(5, 4, false);
    expect(p.isPaused()).toBe(false);
    p.probeSent = true;
    expect(p.isPaused()).toBe(true);
    expect(p.maybeUpdate(6)).toBe(true);
    expect(p.isPaused()).toBe(false);
    expect([p.match, p.next]).toEqual([6, 7]);
  });

  it('maybeDecrTo ignores stale rejections and uses the hint in probe state', () => {
    const p = new Progress(10, 4, false);
    expect(p.maybeDecrTo(5, 3)).toBe(false); // not the index we probed (next-1 = 9)
    expect(p.maybeDecrTo(9, 3)).toBe(true);
    expect(p.next).toBe(4);
    p.match = 3;
    p.becomeReplicate();
    expect(p.maybeDecrTo(2, 0)).toBe(false); // below match: stale
    p.next = 8;
    expect(p.maybeDecrTo(7, 0)).toBe(true);
    expect(p.next).toBe(4);
  });

  it('snapshot state pauses until the snapshot is acknowledged or reported', () => {
    const p = new Progress(10, 4, false);
    p.becomeSnapshot(20);
    expect(p.isPaused()).toBe(true);
    p.becomeProbe();
    expect(p.state).toBe(ProgressState.Probe);
    expect(p.next).toBe(21);
  });
});

describe('ProgressTracker quorum', () => {
  function tracker(matches: Record<string, number>): ProgressTracker {
    const t = new ProgressTracker(4);
    for (const [id, m] of Object.entries(matches)) {
      const pr = new Progress(m + 1, 4, false);
      pr.match = m;
      t.voters.add(BigInt(id));
      t.progress.set(BigInt(id), pr);
    }
    return t;
  }

  it('commits the index a majority has matched', () => {
    expect(tracker({ 1: 5, 2: 3, 3: 1 }).committed()).toBe(3);
    expect(tracker({ 1: 5, 2: 5, 3: 1, 4: 1 }).committed()).toBe(1);
    expect(tracker({ 1: 5, 2: 5, 3: 4, 4: 1, 5: 0 }).committed()).toBe(4);
    expect(tracker({ 1: 7 }).committed()).toBe(7);
  });

  it('learners do not count toward the commit index', () => {
    const t = tracker({ 1: 5, 2: 1, 3: 1 });
    const l = new Progress(6, 4, true);
    l.match = 5;
    t.learners.add(4n);
    t.progress.set(4n, l);
    expect(t.committed()).toBe(1);
  });

  it('vote tallies: won with a majority, lost when a majority refused', () => {
    const t = tracker({ 1: 0, 2: 0, 3: 0 });
    t.recordVote(1n, true);
    expect(t.tallyVotes().result).toBe(0);
    t.recordVote(2n, false);
    t.recordVote(3n, false);
    expect(t.tallyVotes().result).toBe(1);
    t.resetVotes();
    t.recordVote(1n, true);
    t.recordVote(3n, true);
    expect(t.tallyVotes().result).toBe(2);
  });
});

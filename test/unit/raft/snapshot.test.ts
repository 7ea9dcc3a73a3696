import { describe, expect, it } from 'vitest';
import { MemoryStorage, MessageType, ProgressState, RawNode } from '../../../src/raft';
import { Cluster, config } from './helpers';

describe('snapshots', () => {
  it('a follower that needs compacted entries receives a MsgSnap and catches up from it', () => {
    const c = new Cluster([1n, 2n, 3n]);
    c.stabilize();
    c.elect(1n);
    c.isolate(3n);
    for (let i = 0; i < 10; i++) c.get(1n).node.propose(Buffer.from(`v${i}`));
    c.stabilize();
    const snapIndex = c.compact(1n);
    c.get(1n).node.propose(Buffer.from('after'));
    c.stabilize();
    c.heal();
    const before = c.sent.length;
    c.tickAll(3);
    const snaps = c.sent.slice(before).filter((m) => m.type === MessageType.MsgSnap && m.to === 3n);
    expect(snaps).toHaveLength(1);
    expect(snaps[0]!.snapshot!.metadata.index).toBe(snapIndex);
    expect(c.get(3n).storage.firstIndex()).toBe(snapIndex + 1);
    expect(c.appliedData(3n)).toEqual([...Array.from({ length: 10 }, (_, i) => `v${i}`), 'after']);
    expect(c.get(1n).node.status().progress!.get(3n)).toMatchObject({ state: ProgressState.Replicate });
  });

  it('after reportSnapshot(failed) the leader probes again and resends', () => {
    const c = new Cluster([1n, 2n, 3n]);
    c.stabilize();
    c.elect(1n);
    c.isolate(3n);
    c.get(1n).node.propose(Buffer.from('v'));
    c.stabilize();
    c.compact(1n);
    // Snapshots to 3 are lost; the transport reports each failure.
    c.heal();
    c.drop = (m) => m.to === 3n && m.type === MessageType.MsgSnap;
    const before = c.sent.length;
    c.tickAll(3);
    expect(c.sent.slice(before).filter((m) => m.type === MessageType.MsgSnap).length).toBeGreaterThanOrEqual(1);
    const pr = c.get(1n).node.raft.prs.progress.get(3n)!;
    expect(pr.state).toBe(ProgressState.Probe);
    expect(pr.pendingSnapshot).toBe(0);
    c.heal();
    c.tickAll(3);
    expect(c.appliedData(3n)).toEqual(['v']);
  });

  it('a follower ignores a snapshot older than its commit index', () => {
    const c = new Cluster([1n, 2n, 3n]);
    c.stabilize();
    c.elect(1n);
    const n2 = c.get(2n).node;
    const commit = n2.status().commit;
    n2.step({
      type: MessageType.MsgSnap, to: 2n, from: 1n, term: 2, logTerm: 0, index: 0, entries: [], commit: 0,
      reject: false, rejectHint: 0, context: null,
      snapshot: { data: Buffer.from('[]'), metadata: { index: 2, term: 1, confState: { voters: [1n, 2n, 3n], learners: [], votersOutgoing: [], learnersNext: [], autoLeave: false } } },
    });
    const rd = n2.ready();
    expect(rd.snapshot).toBeNull();
    expect(rd.messages[0]).toMatchObject({ type: MessageType.MsgAppResp, index: commit });
  });

  it('a node restarted from a snapshot starts with its ConfState and applied index', () => {
    const storage = new MemoryStorage();
    storage.applySnapshot({
      data: Buffer.from('[]'),
      metadata: { index: 10, term: 3, confState: { voters: [1n, 2n, 3n], learners: [], votersOutgoing: [], learnersNext: [], autoLeave: false } },
    });
    storage.setHardState({ term: 3, vote: 1n, commit: 10 });
    const n = new RawNode(config(2n, storage, { applied: 10 }));
    expect(n.status()).toMatchObject({ term: 3, vote: 1n, commit: 10, applied: 10 });
    expect(n.raft.prs.voterIds()).toEqual([1n, 2n, 3n]);
    expect(n.hasReady()).toBe(false);
  });
});

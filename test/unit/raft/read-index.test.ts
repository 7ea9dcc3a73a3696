import { describe, expect, it } from 'vitest';
import { MessageType, ReadState } from '../../../src/raft';
import { Cluster, handleReady } from './helpers';

/** Runs `f` (which drives the cluster) and returns the read states node `id` produced meanwhile. */
function collectReadStates(c: Cluster, id: bigint, f: () => void): ReadState[] {
  const out: ReadState[] = [];
  const n = c.get(id);
  const orig = n.node.ready.bind(n.node);
  n.node.ready = () => {
    const rd = orig();
    out.push(...rd.readStates);
    return rd;
  };
  try {
    f();
  } finally {
    n.node.ready = orig;
  }
  return out;
}

function takeReadStates(c: Cluster, id: bigint): ReadState[] {
  return collectReadStates(c, id, () => c.stabilize());
}

describe('ReadIndex (ReadOnlySafe)', () => {
  it('a leader answers with its commit index after a heartbeat quorum confirms leadership', () => {
    const c = new Cluster([1n, 2n, 3n]);
    c.stabilize();
    c.elect(1n);
    const before = c.sent.length;
    c.get(1n).node.readIndex(Buffer.from('r1'));
    const rs = takeReadStates(c, 1n);
    expect(rs).toEqual([{ index: 4, requestCtx: Buffer.from('r1') }]);
    const hbs = c.sent.slice(before).filter((m) => m.type === MessageType.MsgHeartbeat);
    expect(hbs.every((m) => m.context?.toString() === 'r1')).toBe(true);
  });

  it('a leader cut off from the quorum does not answer', () => {
    const c = new Cluster([1n, 2n, 3n]);
    c.stabilize();
    c.elect(1n);
    c.isolate(1n);
    c.get(1n).node.readIndex(Buffer.from('r1'));
    expect(takeReadStates(c, 1n)).toEqual([]);
  });

  it('a follower forwards the request and receives the leader\'s read index', () => {
    const c = new Cluster([1n, 2n, 3n]);
    c.stabilize();
    c.elect(1n);
    c.get(1n).node.propose(Buffer.from('x'));
    c.stabilize();
    c.get(3n).node.readIndex(Buffer.from('f1'));
    expect(takeReadStates(c, 3n)).toEqual([{ index: 5, requestCtx: Buffer.from('f1') }]);
  });

  it('a new leader holds reads until it has committed an entry of its term', () => {
    const c = new Cluster([1n, 2n, 3n]);
    c.stabilize();
    // 1 becomes leader but its empty entry is not acknowledged yet.
    c.drop = (m) => m.type === MessageType.MsgAppResp;
    c.elect(1n);
    const n1 = c.get(1n);
    n1.node.readIndex(Buffer.from('early'));
    const early: ReadState[] = [];
    while (n1.node.hasReady()) {
      const rd = n1.node.ready();
      early.push(...rd.readStates);
      handleReady(n1, rd);
    }
    expect(early).toEqual([]);
    c.heal();
    // Once the term's entry commits, the read is confirmed by heartbeats and answered.
    const rs = collectReadStates(c, 1n, () => c.tickAll(2));
    expect(rs.map((r) => r.requestCtx.toString())).toEqual(['early']);
    expect(rs[0]!.index).toBe(4);
  });

  it('a follower without a leader drops the request', () => {
    const c = new Cluster([1n, 2n, 3n]);
    c.stabilize();
    c.get(2n).node.readIndex(Buffer.from('x'));
    expect(c.get(2n).node.hasReady()).toBe(false);
  });
});

describe('singletonLeaderReadIndex (the read point the only voter would answer at once)', () => {
  it('equals what a ReadIndex request gets from a lone leader, including entries not yet applied', () => {
    const c = new Cluster([1n]);
    c.stabilize();
    c.elect(1n);
    const n = c.get(1n).node;
    n.propose(Buffer.from('x'));
    const direct = n.singletonLeaderReadIndex();
    n.readIndex(Buffer.from('r'));
    expect(takeReadStates(c, 1n)).toEqual([{ index: direct, requestCtx: Buffer.from('r') }]);
    expect(direct).toBe(n.raft.raftLog.committed);
  });

  it('is null for a follower, a candidate, and a leader with other voters', () => {
    const lone = new Cluster([1n]);
    expect(lone.get(1n).node.singletonLeaderReadIndex()).toBeNull();
    const c = new Cluster([1n, 2n, 3n]);
    c.stabilize();
    c.elect(1n);
    expect(c.get(1n).node.singletonLeaderReadIndex()).toBeNull();
    expect(c.get(2n).node.singletonLeaderReadIndex()).toBeNull();
  });
});

import { describe, expect, it } from 'vitest';
import { MessageType, StateType } from '../../../src/raft';
import { Cluster } from './helpers';

describe('check-quorum', () => {
  it('a leader that does not hear from a quorum for an election timeout steps down', () => {
    const c = new Cluster([1n, 2n, 3n], { checkQuorum: true });
    c.stabilize();
    c.elect(1n);
    c.isolate(1n);
    // Followers may elect someone else meanwhile; we only look at node 1.
    for (let i = 0; i < 25; i++) {
      c.get(1n).node.tick();
      c.stabilize();
    }
    expect(c.get(1n).node.status().raftState).toBe(StateType.Follower);
  });

  it('a leader with an active quorum stays leader', () => {
    const c = new Cluster([1n, 2n, 3n], { checkQuorum: true });
    c.stabilize();
    c.elect(1n);
    c.isolate(3n);
    c.tickAll(100);
    expect(c.get(1n).node.status()).toMatchObject({ raftState: StateType.Leader, term: 2 });
  });

  it('followers in lease ignore a vote request from a disruptive candidate', () => {
    const c = new Cluster([1n, 2n, 3n], { checkQuorum: true });
    c.stabilize();
    c.elect(1n);
    // 3 campaigns without having timed out (e.g. it was partitioned): 2 still hears from 1.
    c.get(3n).node.campaign();
    c.stabilize();
    expect(c.get(1n).node.status().raftState).toBe(StateType.Leader);
    expect(c.get(2n).node.status().lead).toBe(1n);
  });
});

describe('pre-vote', () => {
  it('a partitioned node does not increase its term while isolated', () => {
    const c = new Cluster([1n, 2n, 3n], { preVote: true, checkQuorum: true });
    c.stabilize();
    c.elect(1n);
    c.isolate(3n);
    c.tickAll(100);
    expect(c.get(3n).node.status()).toMatchObject({ term: 2, raftState: StateType.PreCandidate });
  });

  it('a partitioned node rejoining does not disrupt the leader or bump the term', () => {
    const c = new Cluster([1n, 2n, 3n], { preVote: true, checkQuorum: true });
    c.stabilize();
    c.elect(1n);
    c.isolate(3n);
    c.tickAll(100);
    c.get(1n).node.propose(Buffer.from('during-partition'));
    c.stabilize();
    c.heal();
    c.tickAll(30);
    for (const id of [1n, 2n, 3n]) expect(c.get(id).node.status()).toMatchObject({ term: 2, lead: 1n });
    expect(c.appliedData(3n)).toEqual(['during-partition']);
  });

  it('without pre-vote and check-quorum a rejoining node forces a new term', () => {
    const c = new Cluster([1n, 2n, 3n]);
    c.stabilize();
    c.elect(1n);
    c.isolate(3n);
    c.tickAll(50);
    expect(c.get(3n).node.status().term).toBeGreaterThan(2);
    c.heal();
    c.tickAll(40);
    expect(c.leaders()).toHaveLength(1);
    expect(c.get(1n).node.status().term).toBeGreaterThan(2);
  });

  it('a pre-candidate wins the pre-vote, then runs a real election at term+1', () => {
    const c = new Cluster([1n, 2n, 3n], { preVote: true });
    c.stabilize();
    const before = c.sent.length;
    c.elect(2n);
    const types = c.sent.slice(before).map((m) => m.type);
    expect(types.indexOf(MessageType.MsgPreVote)).toBeLessThan(types.indexOf(MessageType.MsgVote));
    const pv = c.sent.slice(before).find((m) => m.type === MessageType.MsgPreVote)!;
    expect(pv.term).toBe(2);
    expect(c.get(2n).node.status().term).toBe(2);
  });

  it('a pre-vote is refused to a candidate with a stale log', () => {
    const c = new Cluster([1n, 2n, 3n], { preVote: true });
    c.stabilize();
    c.elect(1n);
    c.isolate(3n);
    c.get(1n).node.propose(Buffer.from('x'));
    c.stabilize();
    c.heal();
    c.get(3n).node.campaign();
    c.stabilize();
    expect(c.get(3n).node.status()).toMatchObject({ raftState: StateType.Follower, term: 2 });
    expect(c.get(1n).node.status()).toMatchObject({ raftState: StateType.Leader, term: 2 });
  });
});

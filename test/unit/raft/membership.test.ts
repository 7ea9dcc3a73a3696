import { describe, expect, it } from 'vitest';
import { ConfChangeType, EntryType, MessageType, StateType, decodeConfChange } from '../../../src/raft';
import { Cluster, cc } from './helpers';

function started(ids: bigint[]): Cluster {
  const c = new Cluster(ids);
  c.stabilize();
  c.elect(1n);
  return c;
}

describe('membership changes (ConfChange v1)', () => {
  it('AddNode: a new empty node joins, catches up from the log and becomes a voter everywhere', () => {
    const c = started([1n, 2n, 3n]);
    c.get(1n).node.propose(Buffer.from('before'));
    c.stabilize();
    c.add(4n, {}, null);
    c.get(1n).node.proposeConfChange(cc(ConfChangeType.AddNode, 4n));
    c.stabilize();
    c.tickAll(3);
    for (const id of [1n, 2n, 3n, 4n]) {
      expect(c.get(id).node.raft.prs.voterIds()).toEqual([1n, 2n, 3n, 4n]);
    }
    expect(c.appliedData(4n)).toEqual(['before']);
    // The quorum is now 3 of 4: two nodes down stop commits.
    c.drop = (m) => [3n, 4n].includes(m.to) || [3n, 4n].includes(m.from);
    c.get(1n).node.propose(Buffer.from('needs-3'));
    c.stabilize();
    expect(c.appliedData(1n)).toEqual(['before']);
  });

  it('RemoveNode: the quorum shrinks and the removed node no longer counts', () => {
    const c = started([1n, 2n, 3n]);
    c.get(1n).node.proposeConfChange(cc(ConfChangeType.RemoveNode, 3n));
    c.stabilize();
    expect(c.get(1n).node.raft.prs.voterIds()).toEqual([1n, 2n]);
    // With voters {1,2}, a commit needs both; 3's answers are ignored.
    c.isolate(2n);
    c.get(1n).node.propose(Buffer.from('x'));
    c.stabilize();
    expect(c.appliedData(1n)).toEqual([]);
    c.heal();
    c.tickAll(2);
    expect(c.appliedData(1n)).toEqual(['x']);
    expect(() =>
      c.get(1n).node.step({
        type: MessageType.MsgAppResp, to: 1n, from: 3n, term: 2, logTerm: 0, index: 6, entries: [], commit: 0,
        snapshot: null, reject: false, rejectHint: 0, context: null,
      }),
    ).toThrow('raft: cannot step as peer not found');
  });

  it('removing the last voter is refused', () => {
    const c = new Cluster([1n]);
    c.stabilize();
    expect(() => c.get(1n).node.applyConfChange(cc(ConfChangeType.RemoveNode, 1n))).toThrow('removed all voters');
    expect(c.get(1n).node.raft.prs.voterIds()).toEqual([1n]);
  });

  it('AddLearnerNode: a learner receives the log but neither votes nor counts toward commit', () => {
    const c = started([1n, 2n, 3n]);
    c.add(4n, {}, null);
    c.get(1n).node.proposeConfChange(cc(ConfChangeType.AddLearnerNode, 4n));
    c.stabilize();
    c.tickAll(2);
    expect(c.get(1n).node.raft.prs.voterIds()).toEqual([1n, 2n, 3n]);
    expect(c.get(1n).node.raft.prs.confState().learners).toEqual([4n]);
    c.get(1n).node.propose(Buffer.from('x'));
    c.stabilize();
    expect(c.appliedData(4n)).toEqual(['x']);
    // 1 + learner 4 is no majority.
    c.drop = (m) => [2n, 3n].includes(m.to) || [2n, 3n].includes(m.from);
    c.get(1n).node.propose(Buffer.from('y'));
    c.stabilize();
    expect(c.appliedData(1n)).toEqual(['x']);
    // A learner never campaigns.
    c.heal();
    c.drop = (m) => m.from === 1n;
    for (let i = 0; i < 50; i++) {
      c.get(4n).node.tick();
      c.stabilize();
    }
    expect(c.get(4n).node.status().raftState).toBe(StateType.Follower);
    expect(c.get(4n).node.status().term).toBe(2);
  });

  it('AddNode on a learner promotes it to voter', () => {
    const c = started([1n, 2n, 3n]);
    c.add(4n, {}, null);
    c.get(1n).node.proposeConfChange(cc(ConfChangeType.AddLearnerNode, 4n));
    c.stabilize();
    c.get(1n).node.proposeConfChange(cc(ConfChangeType.AddNode, 4n));
    c.stabilize();
    for (const id of [1n, 4n]) {
      expect(c.get(id).node.raft.prs.confState()).toMatchObject({ voters: [1n, 2n, 3n, 4n], learners: [] });
    }
    expect(c.get(4n).node.raft.promotable()).toBe(true);
  });

  it('UpdateNode leaves the configuration as it is', () => {
    const c = started([1n, 2n, 3n]);
    const cs = c.get(1n).node.applyConfChange(cc(ConfChangeType.UpdateNode, 2n));
    expect(cs.voters).toEqual([1n, 2n, 3n]);
  });

  it('a second conf change proposed before the first is applied becomes an empty normal entry', () => {
    const c = started([1n, 2n, 3n]);
    // Nothing is acknowledged, so the first change stays unapplied.
    c.drop = (m) => m.type === MessageType.MsgAppResp;
    c.get(1n).node.proposeConfChange(cc(ConfChangeType.AddLearnerNode, 4n));
    c.get(1n).node.proposeConfChange(cc(ConfChangeType.AddLearnerNode, 5n));
    c.stabilize();
    const ents = c.get(1n).storage.entries(5, c.get(1n).storage.lastIndex() + 1, 1e9);
    expect(ents.map((e) => e.type)).toEqual([EntryType.ConfChange, EntryType.Normal]);
    expect(decodeConfChange(ents[0]!.data).nodeId).toBe(4n);
    expect(ents[1]!.data.length).toBe(0);
    c.heal();
    c.tickAll(2);
    // Once the first is applied, another may be proposed.
    c.get(1n).node.proposeConfChange(cc(ConfChangeType.AddLearnerNode, 5n));
    c.stabilize();
    expect(c.get(1n).node.raft.prs.confState().learners).toEqual([4n, 5n]);
  });

  it('a node does not campaign while a committed conf change is not yet applied', () => {
    const c = started([1n, 2n, 3n]);
    const r = c.get(2n).node.raft;
    c.get(1n).node.proposeConfChange(cc(ConfChangeType.UpdateNode, 3n));
    // Deliver to 2 without letting it apply: step the messages manually.
    c.drop = (m) => m.to === 2n;
    c.stabilize();
    const apps = c.sent.filter((m) => m.to === 2n && m.type === MessageType.MsgApp && m.entries.length > 0);
    for (const m of apps) c.get(2n).node.step(m);
    c.get(2n).node.step({ ...apps[apps.length - 1]!, entries: [], index: r.raftLog.lastIndex(), logTerm: r.raftLog.lastTerm(), commit: r.raftLog.lastIndex() });
    expect(r.raftLog.committed).toBeGreaterThan(r.raftLog.applied);
    c.get(2n).node.campaign();
    expect(r.state).toBe(StateType.Follower);
  });
});

describe('leader transfer', () => {
  it('transferLeader to an up-to-date follower makes it leader via MsgTimeoutNow', () => {
    const c = started([1n, 2n, 3n]);
    c.get(1n).node.transferLeader(3n);
    c.stabilize();
    expect(c.sent.some((m) => m.type === MessageType.MsgTimeoutNow && m.to === 3n)).toBe(true);
    expect(c.leaders()).toEqual([3n]);
    expect(c.get(3n).node.status().term).toBe(3);
  });

  it('a lagging transferee is caught up first, then takes over', () => {
    const c = started([1n, 2n, 3n]);
    c.isolate(3n);
    c.get(1n).node.propose(Buffer.from('x'));
    c.stabilize();
    c.heal();
    c.get(1n).node.transferLeader(3n);
    c.stabilize();
    c.tickAll(2);
    expect(c.leaders()).toEqual([3n]);
    expect(c.appliedData(3n)).toEqual(['x']);
  });

  it('proposals are dropped while a transfer is in progress', () => {
    const c = started([1n, 2n, 3n]);
    c.isolate(3n);
    c.get(1n).node.transferLeader(3n);
    c.stabilize();
    expect(() => c.get(1n).node.propose(Buffer.from('x'))).toThrow('raft proposal dropped');
  });

  it('a transfer that does not complete within an election timeout is aborted', () => {
    const c = started([1n, 2n, 3n]);
    c.isolate(3n);
    c.get(1n).node.transferLeader(3n);
    c.stabilize();
    for (let i = 0; i < 10; i++) {
      c.get(1n).node.tick();
      c.stabilize();
    }
    expect(c.get(1n).node.status().leadTransferee).toBe(0n);
    c.get(1n).node.propose(Buffer.from('ok'));
  });

  it('transfer skips pre-vote and overrides followers\' leader lease', () => {
    const c = new Cluster([1n, 2n, 3n], { preVote: true, checkQuorum: true });
    c.stabilize();
    c.elect(1n);
    c.get(1n).node.transferLeader(2n);
    c.stabilize();
    expect(c.leaders()).toEqual([2n]);
  });
});

describe('removing the leader', () => {
  it('the removed leader steps down once it applies its removal and the rest elect a new leader', () => {
    const c = new Cluster([1n, 2n, 3n]);
    c.stabilize();
    c.elect(1n);
    c.get(1n).node.proposeConfChange(cc(ConfChangeType.RemoveNode, 1n));
    c.stabilize();
    expect(c.get(1n).node.status().raftState).toBe(StateType.Follower);
    expect(c.get(1n).node.raft.promotable()).toBe(false);
    // The server stops a removed member; the others elect among themselves.
    c.drop = (m) => m.from === 1n || m.to === 1n;
    c.tickAll(30);
    const leaders = c.leaders();
    expect(leaders).toHaveLength(1);
    expect([2n, 3n]).toContain(leaders[0]);
    c.get(leaders[0]!).node.propose(Buffer.from('after'));
    c.stabilize();
    expect(c.appliedData(2n)).toEqual(['after']);
    expect(c.appliedData(3n)).toEqual(['after']);
  });
});

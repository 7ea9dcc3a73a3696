import { describe, expect, it } from 'vitest';
import { MessageType, StateType, newMessage } from '../../../src/raft';
import { Cluster } from './helpers';

// Claims of the Raft paper, §5.2 (leader election) and §5.4.1 (election restriction).
describe('leader election (Raft §5.2)', () => {
  it('a follower that hears nothing for an election timeout becomes candidate and wins with a majority', () => {
    const c = new Cluster([1n, 2n, 3n]);
    c.stabilize();
    c.tickAll(25);
    const leaders = c.leaders();
    expect(leaders).toHaveLength(1);
    const lead = leaders[0]!;
    for (const n of c.nodes.values()) expect(n.node.status().lead).toBe(lead);
  });

  it('a candidate increments its term and votes for itself', () => {
    const c = new Cluster([1n, 2n, 3n]);
    c.stabilize();
    c.drop = () => true;
    c.get(1n).node.campaign();
    c.stabilize();
    expect(c.get(1n).node.status()).toMatchObject({ raftState: StateType.Candidate, term: 2, vote: 1n });
  });

  it('each server votes for at most one candidate per term (first come, first served)', () => {
    const c = new Cluster([1n, 2n, 3n]);
    c.stabilize();
    const n3 = c.get(3n).node;
    const vote = (from: bigint) =>
      newMessage({ type: MessageType.MsgVote, from, to: 3n, term: 2, index: 3, logTerm: 1 });
    n3.step(vote(1n));
    n3.step(vote(2n));
    const msgs = n3.ready().messages;
    expect(msgs.map((m) => [m.to, m.type, m.reject])).toEqual([
      [1n, MessageType.MsgVoteResp, false],
      [2n, MessageType.MsgVoteResp, true],
    ]);
  });

  it('a voter denies its vote to a candidate whose log is less up-to-date (§5.4.1)', () => {
    const c = new Cluster([1n, 2n, 3n]);
    c.stabilize();
    c.elect(1n);
    c.get(1n).node.propose(Buffer.from('x'));
    c.stabilize();
    // 3 has index 3 at term 2; a candidate with an older last term is refused.
    const n3 = c.get(3n).node;
    n3.step(newMessage({ type: MessageType.MsgVote, from: 2n, to: 3n, term: 5, index: 10, logTerm: 1 }));
    const resp = n3.ready().messages.find((m) => m.type === MessageType.MsgVoteResp)!;
    expect(resp.reject).toBe(true);
    expect(resp.term).toBe(5);
  });

  it('a candidate that learns of a leader with an equal or higher term steps down', () => {
    const c = new Cluster([1n, 2n, 3n]);
    c.stabilize();
    c.drop = () => true;
    c.get(2n).node.campaign();
    c.stabilize();
    expect(c.get(2n).node.status().raftState).toBe(StateType.Candidate);
    c.heal();
    c.get(1n).node.campaign();
    c.stabilize();
    // 1's term (3) exceeds 2's, so 2 returns to follower and accepts 1.
    expect(c.get(2n).node.status()).toMatchObject({ raftState: StateType.Follower, lead: 1n });
  });

  it('a split vote times out and a new election with randomized timeouts elects one leader', () => {
    const c = new Cluster([1n, 2n, 3n, 4n]);
    c.stabilize();
    // 1 and 2 each get one other vote: nobody reaches a majority of 4.
    c.drop = (m) => (m.type === MessageType.MsgVote && ((m.from === 1n && m.to !== 3n) || (m.from === 2n && m.to !== 4n)));
    c.get(1n).node.campaign();
    c.get(2n).node.campaign();
    c.stabilize();
    expect(c.leaders()).toEqual([]);
    c.heal();
    c.tickAll(40);
    expect(c.leaders()).toHaveLength(1);
  });

  it('randomized election timeouts lie in [electionTick, 2*electionTick)', () => {
    const c = new Cluster([1n, 2n, 3n]);
    const seen = new Set<number>();
    for (let i = 0; i < 200; i++) {
      const r = c.get(1n).node.raft;
      r.becomeFollower(r.term + 1, 0n);
      seen.add(r.randomizedElectionTimeout);
    }
    expect(Math.min(...seen)).toBeGreaterThanOrEqual(10);
    expect(Math.max(...seen)).toBeLessThan(20);
    expect(seen.size).toBeGreaterThan(5);
  });

  it('a new leader appends an empty entry of its term and commits it with a majority', () => {
    const c = new Cluster([1n, 2n, 3n]);
    c.stabilize();
    c.elect(2n);
    for (const n of c.nodes.values()) {
      const last = n.storage.lastIndex();
      expect(last).toBe(4);
      expect(n.storage.term(4)).toBe(2);
      expect(n.node.status().commit).toBe(4);
    }
  });

  it('a leader sends heartbeats every heartbeatTick and followers do not start elections', () => {
    const c = new Cluster([1n, 2n, 3n], { heartbeatTick: 2 });
    c.stabilize();
    c.elect(1n);
    const before = c.sent.length;
    c.tickAll(50);
    const hbs = c.sent.slice(before).filter((m) => m.type === MessageType.MsgHeartbeat);
    expect(hbs.length).toBe(50); // 25 rounds x 2 followers
    expect(c.get(1n).node.status()).toMatchObject({ raftState: StateType.Leader, term: 2 });
  });

  it('a leader only counts replicas for entries of its own term (§5.4.2)', () => {
    const c = new Cluster([1n, 2n, 3n]);
    c.stabilize();
    c.elect(1n);
    // 1 appends an entry at term 2 that only 1 stores.
    c.drop = (m) => m.type === MessageType.MsgApp;
    c.get(1n).node.propose(Buffer.from('old'));
    c.stabilize();
    c.heal();
    // 2 becomes leader at term 3 (its log is as up-to-date as 3's), 1 returns with the term-2 entry.
    c.isolate(1n);
    c.elect(2n);
    c.heal();
    c.stabilize();
    // The old entry of 1 was overwritten by 2's log: never applied anywhere.
    for (const id of [1n, 2n, 3n]) expect(c.appliedData(id)).toEqual([]);
  });

  it('Figure 8: an entry of an earlier term stored on a majority is not committed by counting replicas', () => {
    // One entry per MsgApp so the old-term entry can reach a majority without the new-term one.
    const c = new Cluster([1n, 2n, 3n, 4n, 5n], { maxSizePerMsgBytes: 0 });
    c.stabilize();
    c.elect(1n); // term 2, empty entry at 6
    // (a) 1 writes 'x' at index 7 (term 2) and replicates it to 2 only.
    c.drop = (m) => m.type === MessageType.MsgApp && m.from === 1n && m.to !== 2n;
    c.get(1n).node.propose(Buffer.from('x'));
    c.stabilize();
    // (b) 1 is down; 5 wins term 3 with 3 and 4 and appends its own entry at 7 that nobody receives.
    c.drop = (m) => m.from === 1n || m.to === 1n || (m.from === 5n && m.type === MessageType.MsgApp);
    c.elect(5n);
    // (c) 5 is down; 1 restarts and wins term 4 and replicates 'x' (term 2) to 3, but not its term-4 entry.
    // (Followers lacking index 7 still see, and reject, the term-4 probes, so 1 backs up and sends 'x'.)
    const holdsX = (id: bigint) => c.get(id).storage.lastIndex() >= 7;
    c.drop = (m) =>
      m.from === 5n ||
      m.to === 5n ||
      (m.from === 1n && m.type === MessageType.MsgApp && m.entries.some((e) => e.term === 4) && holdsX(m.to));
    c.restart(1n);
    c.stabilize();
    c.get(1n).node.campaign(); // term 3: 3 and 4 already voted for 5
    c.stabilize();
    c.elect(1n);
    expect(c.get(1n).node.status().term).toBe(4);
    const n1 = c.get(1n).node;
    expect(n1.status().progress!.get(3n)!.match).toBe(7);
    expect(n1.status().commit).toBe(6); // 'x' is on 1, 2, 3 but is not committed
    // (d) 1 is down; 5 restarts and can win again (its last term 3 beats their term 2), overwriting 7.
    c.drop = (m) => m.from === 1n || m.to === 1n;
    c.restart(5n);
    c.stabilize();
    c.get(5n).node.campaign(); // term 4: the others voted for 1
    c.stabilize();
    c.elect(5n);
    c.get(5n).node.propose(Buffer.from('y'));
    c.stabilize();
    for (const id of [2n, 3n, 4n, 5n]) expect(c.appliedData(id)).toEqual(['y']);
    c.heal();
    c.tickAll(3);
    expect(c.appliedData(1n)).toEqual(['y']);
  });
});

describe('logging', () => {
  it('logs state changes and votes in etcd-raft\'s wording, with hex IDs', () => {
    const lines: string[] = [];
    const logger = { info: (msg: string) => lines.push(msg), warn: (msg: string) => lines.push(msg) };
    const c = new Cluster([1n, 2n, 0xan], { logger });
    c.stabilize();
    c.elect(0xan);
    expect(lines).toContain('a is starting a new election at term 1');
    expect(lines).toContain('a became candidate at term 2');
    expect(lines).toContain('a became leader at term 2');
    expect(lines).toContain('1 [logterm: 1, index: 3, vote: 0] cast MsgVote for a [logterm: 1, index: 3] at term 2');
    expect(lines.some((l) => l.startsWith('newRaft a [peers: [], term: 0'))).toBe(true);
  });
});

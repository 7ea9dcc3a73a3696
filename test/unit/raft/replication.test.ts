import { describe, expect, it } from 'vitest';
import { Entry, MemoryStorage, MessageType, ProgressState, RawNode, StateType, newMessage } from '../../../src/raft';
import { Cluster, config, handleReady } from './helpers';

// Claims of the Raft paper, §5.3 (log replication), and etcd's flow control.
describe('log replication (Raft §5.3)', () => {
  it('a proposal is replicated to all followers, committed and applied everywhere in order', () => {
    const c = new Cluster([1n, 2n, 3n]);
    c.stabilize();
    c.elect(1n);
    for (const d of ['a', 'b', 'c']) c.get(1n).node.propose(Buffer.from(d));
    c.stabilize();
    for (const id of [1n, 2n, 3n]) expect(c.appliedData(id)).toEqual(['a', 'b', 'c']);
  });

  it('a batch of proposals is one append and one MsgApp per follower, applied in order everywhere', () => {
    const c = new Cluster([1n, 2n, 3n]);
    c.stabilize();
    c.elect(1n);
    c.get(1n).node.proposeMany(['a', 'b', 'c', 'd'].map((d) => Buffer.from(d)));
    const rd = c.get(1n).node.ready();
    expect(rd.entries.map((e) => e.data.toString())).toEqual(['a', 'b', 'c', 'd']);
    const apps = rd.messages.filter((m) => m.type === MessageType.MsgApp);
    expect(apps.map((m) => [m.to, m.entries.length])).toEqual([
      [2n, 4],
      [3n, 4],
    ]);
    for (const m of handleReady(c.get(1n), rd)) c.get(m.to).node.step(m);
    c.stabilize();
    for (const id of [1n, 2n, 3n]) expect(c.appliedData(id)).toEqual(['a', 'b', 'c', 'd']);
  });

  it('a batch proposed on a follower is forwarded whole, and a batch without a leader is refused whole', () => {
    const c = new Cluster([1n, 2n, 3n]);
    c.stabilize();
    expect(() => c.get(2n).node.proposeMany([Buffer.from('x'), Buffer.from('y')])).toThrow();
    c.elect(1n);
    c.get(3n).node.proposeMany([Buffer.from('x'), Buffer.from('y')]);
    c.stabilize();
    for (const id of [1n, 2n, 3n]) expect(c.appliedData(id)).toEqual(['x', 'y']);
  });

  it('a follower forwards proposals to the leader', () => {
    const c = new Cluster([1n, 2n, 3n]);
    c.stabilize();
    c.elect(1n);
    c.get(3n).node.propose(Buffer.from('via-follower'));
    c.stabilize();
    for (const id of [1n, 2n, 3n]) expect(c.appliedData(id)).toEqual(['via-follower']);
  });

  it('an entry is committed once a majority stores it, even if one follower is down', () => {
    const c = new Cluster([1n, 2n, 3n]);
    c.stabilize();
    c.elect(1n);
    c.isolate(3n);
    c.get(1n).node.propose(Buffer.from('x'));
    c.stabilize();
    expect(c.appliedData(1n)).toEqual(['x']);
    expect(c.appliedData(2n)).toEqual(['x']);
    expect(c.appliedData(3n)).toEqual([]);
  });

  it('an entry stored by a minority is not committed', () => {
    const c = new Cluster([1n, 2n, 3n]);
    c.stabilize();
    c.elect(1n);
    c.drop = (m) => m.from === 1n && m.type === MessageType.MsgApp;
    c.get(1n).node.propose(Buffer.from('x'));
    c.stabilize();
    expect(c.appliedData(1n)).toEqual([]);
  });

  it('followers learn the commit index from later MsgApps and heartbeats', () => {
    const c = new Cluster([1n, 2n, 3n]);
    c.stabilize();
    c.elect(1n);
    c.drop = (m) => m.type === MessageType.MsgAppResp && m.from === 3n;
    c.get(1n).node.propose(Buffer.from('x'));
    c.stabilize();
    expect(c.appliedData(3n)).toEqual(['x']);
  });

  it('a follower rejects a MsgApp whose previous entry does not match (consistency check)', () => {
    const c = new Cluster([1n, 2n, 3n]);
    c.stabilize();
    const n2 = c.get(2n).node;
    n2.step(newMessage({ type: MessageType.MsgApp, from: 1n, to: 2n, term: 2, index: 7, logTerm: 2, commit: 3 }));
    const resp = n2.ready().messages.find((m) => m.type === MessageType.MsgAppResp)!;
    expect(resp).toMatchObject({ reject: true, index: 7, rejectHint: 3, logTerm: 1 });
  });

  it('a divergent follower log is overwritten by the leader (fast back-off skips whole terms)', () => {
    const c = new Cluster([1n, 2n, 3n]);
    c.stabilize();
    c.elect(1n);
    // 1 writes 20 entries at term 2 that nobody else receives.
    c.isolate(1n);
    for (let i = 0; i < 20; i++) c.get(1n).node.propose(Buffer.from(`lost${i}`));
    c.stabilize();
    // 2 leads term 3 with 3 and writes its own entries.
    c.elect(2n);
    for (let i = 0; i < 5; i++) c.get(2n).node.propose(Buffer.from(`kept${i}`));
    c.stabilize();
    const before = c.sent.length;
    c.heal();
    c.tickAll(3);
    const rejections = c.sent.slice(before).filter((m) => m.type === MessageType.MsgAppResp && m.reject && m.from === 1n);
    expect(rejections.length).toBeLessThanOrEqual(2);
    const expected = [0, 1, 2, 3, 4].map((i) => `kept${i}`);
    for (const id of [1n, 2n, 3n]) expect(c.appliedData(id)).toEqual(expected);
    expect(c.get(1n).storage.lastIndex()).toBe(c.get(2n).storage.lastIndex());
  });

  it('the leader pipelines at most maxInflightMsgs MsgApps to a follower that does not answer', () => {
    const c = new Cluster([1n, 2n, 3n], { maxInflightMsgs: 3 });
    c.stabilize();
    c.elect(1n);
    c.drop = (m) => m.to === 3n || m.from === 3n;
    const before = c.sent.length;
    for (let i = 0; i < 10; i++) {
      c.get(1n).node.propose(Buffer.from(`p${i}`));
      c.stabilize();
    }
    // Entry-less MsgApps (commit updates) are not flow-controlled; those with entries are.
    const apps = c.sent.slice(before).filter((m) => m.type === MessageType.MsgApp && m.to === 3n && m.entries.length > 0);
    expect(apps.length).toBe(3);
    const pr = c.get(1n).node.status().progress!.get(3n)!;
    expect(pr.state).toBe(ProgressState.Replicate);
  });

  it('the leader stops pipelining to a follower once maxInflightBytes of entries are in flight', () => {
    const c = new Cluster([1n, 2n, 3n], { maxInflightMsgs: 100, maxInflightBytes: 250 });
    c.stabilize();
    c.elect(1n);
    c.drop = (m) => m.to === 3n || m.from === 3n;
    const before = c.sent.length;
    for (let i = 0; i < 10; i++) {
      c.get(1n).node.propose(Buffer.alloc(100, 97 + i));
      c.stabilize();
    }
    // 100 + 100 + 100 bytes: the third message reaches the bound, the rest wait.
    const apps = c.sent.slice(before).filter((m) => m.type === MessageType.MsgApp && m.to === 3n && m.entries.length > 0);
    expect(apps.length).toBe(3);
    expect(c.get(1n).node.status().progress!.get(3n)!.state).toBe(ProgressState.Replicate);
    c.drop = () => false;
    c.tickAll(3);
    expect(c.appliedData(3n)).toEqual(c.appliedData(1n));
    expect(c.appliedData(3n).length).toBe(10);
  });

  it('a probing follower gets one MsgApp per heartbeat until it answers', () => {
    const c = new Cluster([1n, 2n, 3n]);
    c.stabilize();
    c.isolate(3n);
    c.elect(1n);
    expect(c.get(1n).node.status().progress!.get(3n)!.state).toBe(ProgressState.Probe);
    const before = c.sent.length;
    for (let i = 0; i < 5; i++) c.get(1n).node.propose(Buffer.from(`p${i}`));
    c.stabilize();
    const apps = c.sent.slice(before).filter((m) => m.type === MessageType.MsgApp && m.to === 3n);
    expect(apps.length).toBe(0); // already probed once at election; paused until an answer
    c.heal();
    c.tickAll(2);
    expect(c.appliedData(3n)).toEqual(['p0', 'p1', 'p2', 'p3', 'p4']);
  });

  it('MsgApps carry at most maxSizePerMsgBytes of entries (at least one entry)', () => {
    const c = new Cluster([1n, 2n, 3n], { maxSizePerMsgBytes: 250 });
    c.stabilize();
    c.isolate(3n);
    c.elect(1n);
    for (let i = 0; i < 10; i++) c.get(1n).node.propose(Buffer.alloc(100, i));
    c.stabilize();
    const before = c.sent.length;
    c.heal();
    c.tickAll(2);
    const apps = c.sent.slice(before).filter((m) => m.type === MessageType.MsgApp && m.to === 3n && m.entries.length > 0);
    expect(apps.length).toBeGreaterThanOrEqual(5);
    for (const m of apps) expect(m.entries.reduce((n, e) => n + e.data.length, 0)).toBeLessThanOrEqual(250);
    expect(c.get(3n).applied.length).toBe(c.get(1n).applied.length);
  });

  it('a leader refuses proposals beyond maxUncommittedEntriesSizeBytes', () => {
    const c = new Cluster([1n, 2n, 3n], { maxUncommittedEntriesSizeBytes: 1000 });
    c.stabilize();
    c.elect(1n);
    c.drop = (m) => m.type === MessageType.MsgAppResp;
    const n = c.get(1n).node;
    n.propose(Buffer.alloc(600));
    expect(() => n.propose(Buffer.alloc(600))).toThrow('raft proposal dropped');
    c.heal();
    c.tickAll(2);
    n.propose(Buffer.alloc(600));
  });

  it('MsgUnreachable moves a replicating follower back to probe', () => {
    const c = new Cluster([1n, 2n, 3n]);
    c.stabilize();
    c.elect(1n);
    expect(c.get(1n).node.status().progress!.get(2n)!.state).toBe(ProgressState.Replicate);
    c.get(1n).node.reportUnreachable(2n);
    expect(c.get(1n).node.status().progress!.get(2n)!.state).toBe(ProgressState.Probe);
  });

  it('committed entries per Ready are bounded by maxCommittedSizePerReadyBytes', () => {
    const storage = new MemoryStorage();
    const node = new RawNode(config(1n, storage, { maxCommittedSizePerReadyBytes: 300 }));
    node.bootstrap([1n]);
    const applied: Entry[] = [];
    const drain = () => {
      for (let i = 0; i < 100 && node.hasReady(); i++) {
        const rd = node.ready();
        storage.append(rd.entries);
        if (rd.hardState) storage.setHardState(rd.hardState);
        expect(rd.committedEntries.length).toBeLessThanOrEqual(2);
        applied.push(...rd.committedEntries);
        node.advance(rd);
      }
    };
    drain();
    node.campaign();
    for (let i = 0; i < 10; i++) node.propose(Buffer.alloc(200, i));
    drain();
    expect(node.status().raftState).toBe(StateType.Leader);
    expect(applied.map((e) => e.index)).toEqual(Array.from({ length: 12 }, (_, i) => i + 1));
  });
});

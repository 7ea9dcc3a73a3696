import { describe, expect, it } from 'vitest';
import { EntryType, MemoryStorage, RawNode, StateType, decodeConfChange, ConfChangeType } from '../../../src/raft';
import { config, handleReady, TestNode } from './helpers';

function singleNode(): TestNode {
  const storage = new MemoryStorage();
  const node = new RawNode(config(1n, storage));
  node.bootstrap([1n]);
  return { id: 1n, node, storage, applied: [] };
}

describe('single voter', () => {
  it('bootstrap yields a committed AddNode entry at term 1 to persist and apply', () => {
    const n = singleNode();
    expect(n.node.hasReady()).toBe(true);
    const rd = n.node.ready();
    expect(rd.entries).toHaveLength(1);
    expect(rd.entries[0]).toMatchObject({ term: 1, index: 1, type: EntryType.ConfChange });
    expect(decodeConfChange(rd.entries[0]!.data)).toMatchObject({ type: ConfChangeType.AddNode, nodeId: 1n });
    expect(rd.committedEntries.map((e) => e.index)).toEqual([1]);
    expect(rd.hardState).toEqual({ term: 1, vote: 0n, commit: 1 });
    expect(rd.mustSync).toBe(true);
    handleReady(n, rd);
    expect(n.node.hasReady()).toBe(false);
  });

  it('bootstrap entries carry the peers\' contexts when given', () => {
    const storage = new MemoryStorage();
    const node = new RawNode(config(1n, storage));
    node.bootstrap([1n, 2n], new Map([[2n, Buffer.from('{"name":"b"}')]]));
    const rd = node.ready();
    expect(rd.entries.map((e) => decodeConfChange(e.data).context?.toString() ?? null)).toEqual([null, '{"name":"b"}']);
    expect(() => new RawNode(config(1n, (storage.append(rd.entries), storage))).bootstrap([1n])).toThrow(/nonempty Storage/);
  });

  it('campaign makes it leader at once and its empty entry commits without messages', () => {
    const n = singleNode();
    handleReady(n, n.node.ready());
    n.node.campaign();
    const rd = n.node.ready();
    expect(rd.softState).toEqual({ lead: 1n, raftState: StateType.Leader });
    expect(rd.messages).toEqual([]);
    expect(rd.entries).toEqual([{ term: 2, index: 2, type: EntryType.Normal, data: Buffer.alloc(0) }]);
    expect(rd.committedEntries.map((e) => e.index)).toEqual([2]);
    expect(rd.hardState).toEqual({ term: 2, vote: 1n, commit: 2 });
    handleReady(n, rd);
  });

  it('a proposal is committed and handed to apply in the same Ready as its entry', () => {
    const n = singleNode();
    handleReady(n, n.node.ready());
    n.node.campaign();
    handleReady(n, n.node.ready());
    n.node.propose(Buffer.from('hello'));
    const rd = n.node.ready();
    expect(rd.entries.map((e) => e.data.toString())).toEqual(['hello']);
    expect(rd.committedEntries.map((e) => e.data.toString())).toEqual(['hello']);
    expect(rd.messages).toEqual([]);
    handleReady(n, rd);
    expect(n.node.status()).toMatchObject({ commit: 3, applied: 3, term: 2 });
  });

  it('elects itself after an election timeout without an explicit campaign', () => {
    const n = singleNode();
    handleReady(n, n.node.ready());
    for (let i = 0; i < 20 && n.node.status().raftState !== StateType.Leader; i++) n.node.tick();
    expect(n.node.status().raftState).toBe(StateType.Leader);
  });

  it('drops a proposal when there is no leader', () => {
    const n = singleNode();
    handleReady(n, n.node.ready());
    expect(() => n.node.propose(Buffer.from('x'))).toThrow('raft proposal dropped');
  });

  it('answers a read index at once with the commit index', () => {
    const n = singleNode();
    handleReady(n, n.node.ready());
    n.node.campaign();
    handleReady(n, n.node.ready());
    n.node.readIndex(Buffer.from('ctx1'));
    const rd = n.node.ready();
    expect(rd.readStates).toEqual([{ index: 2, requestCtx: Buffer.from('ctx1') }]);
    handleReady(n, rd);
  });

  it('restarts from persisted state with its term, vote, log and applied index', () => {
    const n = singleNode();
    handleReady(n, n.node.ready());
    n.node.campaign();
    handleReady(n, n.node.ready());
    n.node.propose(Buffer.from('a'));
    handleReady(n, n.node.ready());
    // The snapshot-less MemoryStorage holds no ConfState: the restarted node learns membership by
    // re-applying the log, so restart with applied=0 and re-apply.
    const restarted = new RawNode(config(1n, n.storage, { applied: 0 }));
    const tn: TestNode = { id: 1n, node: restarted, storage: n.storage, applied: [] };
    const rd = restarted.ready();
    expect(rd.committedEntries.map((e) => e.index)).toEqual([1, 2, 3]);
    handleReady(tn, rd);
    expect(restarted.status()).toMatchObject({ term: 2, vote: 1n, commit: 3, applied: 3 });
    for (let i = 0; i < 20 && restarted.status().raftState !== StateType.Leader; i++) restarted.tick();
    expect(restarted.status()).toMatchObject({ raftState: StateType.Leader, term: 3 });
  });
});

describe('Ready / advance contract', () => {
  it('no second Ready before advance; proposals made meanwhile come in the next Ready', () => {
    const n = singleNode();
    handleReady(n, n.node.ready());
    n.node.campaign();
    handleReady(n, n.node.ready());
    n.node.propose(Buffer.from('a'));
    const rd1 = n.node.ready();
    // While rd1 is being persisted, another proposal arrives.
    n.node.propose(Buffer.from('b'));
    expect(n.node.hasReady()).toBe(false);
    expect(() => n.node.ready()).toThrow(/before advance/);
    expect(rd1.entries.map((e) => e.data.toString())).toEqual(['a']);
    handleReady(n, rd1);
    const rd2 = n.node.ready();
    expect(rd2.entries.map((e) => e.data.toString())).toEqual(['b']);
    expect(rd2.committedEntries.map((e) => e.data.toString())).toEqual(['b']);
    handleReady(n, rd2);
    expect(n.node.hasReady()).toBe(false);
  });

  it('mustSync is false when only the commit index changed', () => {
    const n = singleNode();
    handleReady(n, n.node.ready());
    n.node.campaign();
    const rd = n.node.ready();
    expect(rd.mustSync).toBe(true);
    handleReady(n, rd);
    n.node.readIndex(Buffer.from('x'));
    const rd2 = n.node.ready();
    expect(rd2.hardState).toBeNull();
    expect(rd2.mustSync).toBe(false);
    handleReady(n, rd2);
  });
});

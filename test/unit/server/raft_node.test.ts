// The node loop (src/server/raft_node.ts): what it applies while a WAL write is still in flight.
import { afterEach, describe, expect, it } from 'vitest';
import { EntryType, MemoryStorage, MessageType, RawNode, decodeConfChange, newMessage, type Entry, type Message } from '../../../src/raft';
import { nopLogger } from '../../../src/log';
import { RESIDENT_LOG_BYTES, RaftNode, residentLogBytes } from '../../../src/server/raft_node';
import type { Wal } from '../../../src/wal/wal';
import { config } from '../raft/helpers';

/** A WAL whose saves complete when the test says so (or at once, in auto mode). */
class ControlledWal {
  auto = true;
  readonly pending: Array<{ entries: Entry[]; resolve: () => void }> = [];
  /** Every save of entries: how many, whether it had to be durable, whether it synced inline. */
  readonly saves: Array<{ entries: number; mustSync: boolean; inline: boolean }> = [];
  /** The data of every entry saved, by index: what MemoryStorage reads back once it released it. */
  readonly written = new Map<number, Buffer>();
  readEntryData(index: number): Buffer {
    const d = this.written.get(index);
    if (d === undefined) throw new Error(`entry ${index} was never written`);
    return d;
  }
  save(_hs: unknown, entries: Entry[], _snap: unknown, mustSync = true, inline = false): Promise<number> {
    if (entries.length > 0) this.saves.push({ entries: entries.length, mustSync, inline });
    for (const e of entries) this.written.set(e.index, e.data);
    if (this.auto) return Promise.resolve(0);
    return new Promise((resolve) => this.pending.push({ entries, resolve: () => resolve(0) }));
  }
}

async function until(pred: () => boolean, what: string, timeoutMs = 2000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!pred()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 1));
  }
}

let node: RaftNode | null = null;
afterEach(async () => {
  await node?.stop();
  node = null;
});

function leaderOfThree(): Started {
  return startNode([1n, 2n, 3n], () => 0);
}

interface Started {
  node: RaftNode;
  wal: ControlledWal;
  applied: Entry[];
  sent: Message[];
  raw: RawNode;
  storage: MemoryStorage;
}

function startNode(members: bigint[], proposalsWaiting: () => number): Started {
  const wal = new ControlledWal();
  // Reads back through the WAL, as the server's storage does: applied entries' data can be released.
  const storage = new MemoryStorage(wal);
  const raw = new RawNode(config(1n, storage));
  raw.bootstrap(members);
  const applied: Entry[] = [];
  const sent: Message[] = [];
  const n = new RaftNode(raw, storage, wal as unknown as Wal, {
    onSoftState: () => undefined,
    onReadStates: () => undefined,
    applyEntries: (ents) => {
      for (const e of ents) {
        applied.push(e);
        if (e.type === EntryType.ConfChange) raw.applyConfChange(decodeConfChange(e.data));
      }
    },
    send: (msgs) => sent.push(...msgs),
    afterAdvance: async () => undefined,
    saveSnapshot: async () => undefined,
    installSnapshot: async () => undefined,
    fatal: (e) => {
      throw e;
    },
    proposalsWaiting,
  }, { tickMs: 1_000_000, maxInbox: 1000, log: nopLogger() });
  node = n;
  return { node: n, wal, applied, sent, raw, storage };
}

/** Starts leaderOfThree's node and elects it with member 2's vote; returns the term. */
async function elect(l: ReturnType<typeof leaderOfThree>): Promise<number> {
  const { node: n, applied, sent, raw } = l;
  n.start();
  // Raft will not campaign before the bootstrap membership entries are applied.
  await until(() => applied.filter((e) => e.type === EntryType.ConfChange).length === 3, 'bootstrap entries');
  n.enqueue((r) => r.campaign());
  await until(() => sent.some((m) => m.type === MessageType.MsgVote), 'vote requests');
  const term = raw.raft.term;
  n.step(newMessage({ type: MessageType.MsgVoteResp, from: 2n, to: 1n, term }));
  await until(() => sent.some((m) => m.type === MessageType.MsgApp && m.to === 2n), 'first append');
  return term;
}

/** Starts a lone member's node and elects it; resolves once its empty entry is applied. */
async function leadAlone({ node: n, applied }: Started): Promise<void> {
  n.start();
  await until(() => applied.some((e) => e.type === EntryType.ConfChange), 'bootstrap entry');
  n.enqueue((r) => r.campaign());
  await until(() => applied.some((e) => e.type === EntryType.Normal && e.data.length === 0), "the leader's empty entry to apply");
}

describe('node loop', () => {
  it('applies what followers acknowledged while its own next write is still being fsynced', async () => {
    const l = leaderOfThree();
    const { node: n, wal, applied, raw } = l;
    const term = await elect(l);
    const ackAll = (): void => {
      const last = raw.raft.raftLog.lastIndex();
      n.step(newMessage({ type: MessageType.MsgAppResp, from: 2n, to: 1n, term, index: last }));
    };
    ackAll();
    await until(() => applied.some((e) => e.data.length === 0 && e.term === term), "the leader's empty entry to apply");

    // x is written (fsync held), then released: durable on the leader, not yet acknowledged.
    wal.auto = false;
    n.propose(Buffer.from('x'), (e) => {
      throw e;
    });
    await until(() => wal.pending.length === 1, 'the write of x');
    const xIndex = wal.pending[0].entries[0].index;
    wal.pending.shift()!.resolve();
    // y's write is held; meanwhile follower 2 acknowledges x, which commits it.
    n.propose(Buffer.from('y'), (e) => {
      throw e;
    });
    n.step(newMessage({ type: MessageType.MsgAppResp, from: 2n, to: 1n, term, index: xIndex }));
    await until(() => wal.pending.length === 1, 'the write of y');
    await until(() => applied.some((e) => e.index === xIndex), 'x to apply while y is being written');
    expect(wal.pending.length).toBe(1);
    expect(applied.find((e) => e.index === xIndex)!.data.toString()).toBe('x');
    // y is not applied before it is durable here, whatever the followers say.
    expect(applied.some((e) => e.data.toString() === 'y')).toBe(false);
    wal.auto = true;
    wal.pending.shift()!.resolve();
  });

  it('syncs inline only after a run of one-entry saves on a fast disk, when that entry is the only write waiting', async () => {
    let waiting = 1;
    const lone = startNode([1n], () => waiting);
    const { node: n, wal, applied } = lone;
    await leadAlone(lone);
    let seq = 0;
    const propose = async (count: number): Promise<{ entries: number; mustSync: boolean; inline: boolean }> => {
      const before = wal.saves.length;
      const datas = Array.from({ length: count }, () => `w${seq++}`);
      for (const d of datas) {
        n.propose(Buffer.from(d), (e) => {
          throw e;
        });
      }
      await until(() => applied.some((e) => e.data.toString() === datas[datas.length - 1]), `${datas.join(',')} to apply`);
      expect(wal.saves.length).toBe(before + 1);
      return wal.saves[before];
    };
    const pooled = (entries: number) => ({ entries, mustSync: true, inline: false });
    const inline = { entries: 1, mustSync: true, inline: true };
    // A batch of several writes is load: the fsync goes to the thread pool.
    expect(await propose(3)).toEqual(pooled(3));
    // One writer at a time: after a run of single saves, the disk wait blocks no one.
    const run: boolean[] = [];
    for (let i = 0; i < 10; i++) run.push((await propose(1)).inline);
    expect(run).toEqual([false, false, false, false, false, false, false, false, true, true]);
    // Others waiting for the loop (to be parsed, batched, answered): back to the pool.
    waiting = 5;
    expect(await propose(1)).toEqual(pooled(1));
    waiting = 1;
    expect(await propose(1)).toEqual(inline);
    // A slow disk would block everyone for its whole wait: the save after a slow one is pooled.
    wal.auto = false;
    const slow = propose(1);
    await until(() => wal.pending.length === 1, 'the held save');
    await new Promise((r) => setTimeout(r, 10));
    wal.auto = true;
    wal.pending.shift()!.resolve();
    expect(await slow).toEqual(inline);
    expect(await propose(1)).toEqual(pooled(1));
    expect(await propose(1)).toEqual(inline);
    // A batch ends the run.
    expect(await propose(2)).toEqual(pooled(2));
    expect(await propose(1)).toEqual(pooled(1));
  });

  it('never syncs inline on a leader whose appends to followers went out first', async () => {
    const l = leaderOfThree();
    const { node: n, wal, applied, raw } = l;
    const term = await elect(l);
    const ackAll = (): void => {
      n.step(newMessage({ type: MessageType.MsgAppResp, from: 2n, to: 1n, term, index: raw.raft.raftLog.lastIndex() }));
    };
    ackAll();
    await until(() => applied.some((e) => e.data.length === 0 && e.term === term), "the leader's empty entry to apply");
    const before = wal.saves.length;
    // One writer at a time, as in the single-member case: twelve writes, each committed before the next.
    for (let i = 0; i < 12; i++) {
      const d = `v${i}`;
      n.propose(Buffer.from(d), (e) => {
        throw e;
      });
      await until(() => wal.saves.length === before + i + 1, `the save of ${d}`);
      ackAll();
      await until(() => applied.some((e) => e.data.toString() === d), `${d} to apply`);
    }
    const saves = wal.saves.slice(before);
    expect(saves.map((s) => s.entries)).toEqual(Array(12).fill(1));
    expect(saves.some((s) => s.inline)).toBe(false);
  });
});

describe('resident Raft log bytes', () => {
  /** Twenty writes of 1 KiB each, told apart by their first bytes. */
  const writes = Array.from({ length: 20 }, (_, i) => Buffer.concat([Buffer.from(`put-${i}`), Buffer.alloc(1024 - `put-${i}`.length, 0x61)]));
  const proposeWrites = (n: RaftNode): void => {
    for (const d of writes) {
      n.propose(d, (e) => {
        throw e;
      });
    }
  };
  const writesApplied = (applied: Entry[]): Promise<void> =>
    until(() => applied.filter((e) => e.data.length === 1024).length === writes.length, 'the 20 writes to apply');

  it('a lone member keeps no applied entry in memory, and reads any of them back from the WAL', async () => {
    const lone = startNode([1n], () => 0);
    const { node: n, applied, storage } = lone;
    await leadAlone(lone);
    proposeWrites(n);
    await writesApplied(applied);
    await n.stop();
    expect(storage.residentDataBytes()).toBe(0);
    const first = applied.find((e) => e.data.length === 1024)!.index;
    expect(storage.entries(first, first + 20, Infinity).map((e) => e.data)).toEqual(writes);
  });

  it('a leader of three keeps the last entries it may have to send, up to the budget', async () => {
    const l = leaderOfThree();
    const { node: n, applied, raw, storage } = l;
    const term = await elect(l);
    proposeWrites(n);
    await until(() => raw.raft.raftLog.lastIndex() >= 3 + 1 + 20, 'the 20 writes to be appended');
    n.step(newMessage({ type: MessageType.MsgAppResp, from: 2n, to: 1n, term, index: raw.raft.raftLog.lastIndex() }));
    await writesApplied(applied);
    await n.stop();
    // All 20 (4 MiB is the budget); the membership entries applied before it led may be gone.
    expect(storage.residentDataBytes()).toBeGreaterThanOrEqual(20 * 1024);
    expect(storage.residentDataBytes()).toBeLessThan(21 * 1024);
  });

  it('a follower keeps no applied entry in memory', async () => {
    const { node: n, applied, storage } = startNode([1n, 2n, 3n], () => 0);
    n.start();
    await until(() => applied.filter((e) => e.type === EntryType.ConfChange).length === 3, 'bootstrap entries');
    const entries = writes.map((data, i) => ({ term: 2, index: 4 + i, type: EntryType.Normal, data }));
    n.step(newMessage({ type: MessageType.MsgApp, from: 2n, to: 1n, term: 2, logTerm: 1, index: 3, entries, commit: 23 }));
    await writesApplied(applied);
    await n.stop();
    expect(storage.residentDataBytes()).toBe(0);
    expect(storage.entries(4, 24, Infinity).map((e) => e.data)).toEqual(writes);
  });

  it('is 4 MiB unless ETCDTS_RAFT_LOG_RESIDENT_BYTES says otherwise, and refuses a bad value', () => {
    expect(residentLogBytes({})).toBe(RESIDENT_LOG_BYTES);
    expect(RESIDENT_LOG_BYTES).toBe(4 * 1024 * 1024);
    expect(residentLogBytes({ ETCDTS_RAFT_LOG_RESIDENT_BYTES: '0' })).toBe(0);
    expect(residentLogBytes({ ETCDTS_RAFT_LOG_RESIDENT_BYTES: '1048576' })).toBe(1048576);
    for (const bad of ['-1', '1.5', 'abc', String(2 * 1024 * 1024 * 1024)]) {
      expect(() => residentLogBytes({ ETCDTS_RAFT_LOG_RESIDENT_BYTES: bad })).toThrow(/must be an integer from 0 to 1073741824/);
    }
  });
});

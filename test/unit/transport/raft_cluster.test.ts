// Three Raft cores talking only through PeerTransport on 127.0.0.1: election, replication,
// and a new leader after the old one goes away.
import { afterEach, describe, expect, it } from 'vitest';
import { EntryType, MemoryStorage, RawNode, StateType, type Entry, type Message } from '../../../src/raft';
import { waitFor } from '../../helpers/wait';
import { config } from '../raft/helpers';
import { connectAll, startNode, stopNode, type Node } from './helpers';

const TICK_MS = 10;

interface Member {
  net: Node;
  raft: RawNode;
  storage: MemoryStorage;
  applied: Entry[];
  timer: NodeJS.Timeout;
  inbox: Message[];
  unreachable: bigint[];
}

const members: Member[] = [];

afterEach(async () => {
  for (const m of members.splice(0)) {
    clearInterval(m.timer);
    await stopNode(m.net);
  }
});

function drive(m: Member): void {
  for (const msg of m.inbox.splice(0)) m.raft.step(msg);
  // Like etcd's ReportUnreachable: the leader probes that follower instead of streaming to it.
  for (const id of m.unreachable.splice(0)) m.raft.reportUnreachable(id);
  m.raft.tick();
  while (m.raft.hasReady()) {
    const rd = m.raft.ready();
    m.storage.append(rd.entries);
    if (rd.hardState) m.storage.setHardState(rd.hardState);
    m.net.transport.send(rd.messages);
    for (const e of rd.committedEntries) if (e.type === EntryType.Normal && e.data.length > 0) m.applied.push(e);
    m.raft.advance(rd);
  }
}

async function startCluster(ids: bigint[]): Promise<Member[]> {
  const out: Member[] = [];
  for (const id of ids) {
    const inbox: Message[] = [];
    const unreachable: bigint[] = [];
    const net = await startNode(id, {
      onMessage: (msg) => inbox.push(msg),
      onPeerUnreachable: (peer) => {
        if (unreachable.length < 64) unreachable.push(peer);
      },
    });
    const storage = new MemoryStorage();
    const raft = new RawNode(config(id, storage, { checkQuorum: true, preVote: true }));
    raft.bootstrap(ids);
    const m: Member = { net, raft, storage, applied: [], inbox, unreachable, timer: setInterval(() => drive(m), TICK_MS) };
    out.push(m);
    members.push(m);
  }
  connectAll(out.map((m) => m.net));
  return out;
}

function leaderOf(ms: Member[]): Member | undefined {
  const leaders = ms.filter((m) => m.raft.status().raftState === StateType.Leader);
  return leaders.length === 1 ? leaders[0] : undefined;
}

describe('raft over PeerTransport', () => {
  it('elects a leader, replicates, and fails over', async () => {
    const ms = await startCluster([0x8e9e05c52164694dn, 0x91bc3c398fb3c146n, 0xfd422379fda50e48n]);
    const leader = await waitFor('a leader', () => leaderOf(ms), { timeoutMs: 15_000 });
    for (let i = 0; i < 20; i++) leader.raft.propose(Buffer.from(`v${i}`));
    await waitFor('all members to apply 20 entries', () => ms.every((m) => m.applied.length === 20), { timeoutMs: 15_000 });
    for (const m of ms) expect(m.applied.map((e) => e.data.toString())).toEqual(Array.from({ length: 20 }, (_, i) => `v${i}`));

    // The leader disappears: the other two elect one of themselves and keep committing.
    clearInterval(leader.timer);
    await stopNode(leader.net);
    members.splice(members.indexOf(leader), 1);
    const rest = ms.filter((m) => m !== leader);
    const next = await waitFor('a new leader', () => leaderOf(rest), { timeoutMs: 15_000 });
    expect(next.raft.status().term).toBeGreaterThan(leader.raft.status().term);
    next.raft.propose(Buffer.from('after'));
    await waitFor('both to apply the new entry', () => rest.every((m) => m.applied.at(-1)?.data.toString() === 'after'), {
      timeoutMs: 15_000,
    });
  });
});

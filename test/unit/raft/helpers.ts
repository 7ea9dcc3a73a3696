import assert from 'node:assert';
import {
  ConfChange,
  Entry,
  EntryType,
  Message,
  MessageType,
  MemoryStorage,
  RaftConfig,
  RawNode,
  Ready,
  StateType,
  decodeConfChange,
} from '../../../src/raft';
import { mulberry32 } from '../../helpers/random';

/** Small deterministic PRNG (mulberry32) so tests never depend on Math.random. */
export const seededRandom = mulberry32;

export function config(id: bigint, storage: MemoryStorage, over: Partial<RaftConfig> = {}): RaftConfig {
  return {
    id,
    electionTick: 10,
    heartbeatTick: 1,
    storage,
    applied: 0,
    maxSizePerMsgBytes: 1024 * 1024,
    maxInflightMsgs: 256,
    maxUncommittedEntriesSizeBytes: 0,
    checkQuorum: false,
    preVote: false,
    random: seededRandom(Number(id)),
    ...over,
  };
}

export interface TestNode {
  id: bigint;
  node: RawNode;
  storage: MemoryStorage;
  /** Every committed entry handed to the application, in order. */
  applied: Entry[];
}

/** Persist, apply, advance: what the server's node loop does with one Ready. Returns its messages. */
export function handleReady(n: TestNode, rd: Ready): Message[] {
  if (rd.snapshot) {
    n.storage.applySnapshot(rd.snapshot);
    // The application state is replaced by the snapshot's (a JSON list of applied payloads here).
    const idx = rd.snapshot.metadata.index;
    const payloads = JSON.parse(rd.snapshot.data.toString()) as string[];
    n.applied = payloads.map((d) => ({ term: 0, index: idx, type: EntryType.Normal, data: Buffer.from(d) }));
  }
  n.storage.append(rd.entries);
  if (rd.hardState) n.storage.setHardState(rd.hardState);
  for (const e of rd.committedEntries) {
    n.applied.push(e);
    if (e.type === EntryType.ConfChange) n.node.applyConfChange(decodeConfChange(e.data));
  }
  n.node.advance(rd);
  return rd.messages;
}

export type Filter = (m: Message) => boolean;

/** A set of nodes connected by an in-memory network; `drop` decides which messages are lost. */
export class Cluster {
  readonly nodes = new Map<bigint, TestNode>();
  readonly sent: Message[] = [];
  drop: Filter = () => false;
  private readonly over: Partial<RaftConfig>;

  constructor(ids: bigint[], over: Partial<RaftConfig> = {}, bootstrapIds: bigint[] = ids) {
    this.over = over;
    for (const id of ids) this.add(id, over, bootstrapIds);
  }

  /** Crash and restart: a new RawNode over what `id` persisted; the log is re-applied from the start. */
  restart(id: bigint): void {
    const n = this.get(id);
    n.node = new RawNode(config(id, n.storage, this.over));
    n.applied = [];
  }

  add(id: bigint, over: Partial<RaftConfig> = {}, bootstrapIds: bigint[] | null = null): TestNode {
    const storage = new MemoryStorage();
    const node = new RawNode(config(id, storage, over));
    if (bootstrapIds) node.bootstrap(bootstrapIds);
    const tn: TestNode = { id, node, storage, applied: [] };
    this.nodes.set(id, tn);
    return tn;
  }

  get(id: bigint): TestNode {
    const n = this.nodes.get(id);
    assert(n, `no node ${id}`);
    return n;
  }

  /** Processes Readys and delivers messages until the system is quiet (bounded). */
  stabilize(maxRounds = 10_000): void {
    const queue: Message[] = [];
    for (let round = 0; round < maxRounds; round++) {
      let progress = false;
      for (const n of this.nodes.values()) {
        if (n.node.hasReady()) {
          progress = true;
          for (const m of handleReady(n, n.node.ready())) queue.push(m);
        }
      }
      while (queue.length > 0) {
        progress = true;
        const m = queue.shift()!;
        this.sent.push(m);
        if (this.drop(m)) {
          if (m.type === MessageType.MsgSnap) this.nodes.get(m.from)?.node.reportSnapshot(m.to, true);
          continue;
        }
        const to = this.nodes.get(m.to);
        if (!to) continue;
        if (m.type === MessageType.MsgSnap) {
          // The transport reports the outcome of a snapshot send, as etcd's rafthttp does.
          this.nodes.get(m.from)?.node.reportSnapshot(m.to, false);
        }
        try {
          to.node.step(m);
        } catch (e) {
          if (!(e instanceof Error) || !/peer not found|proposal dropped/.test(e.message)) throw e;
        }
      }
      if (!progress) return;
    }
    throw new Error('cluster did not stabilize');
  }

  tickAll(ticks: number): void {
    for (let i = 0; i < ticks; i++) {
      for (const n of this.nodes.values()) n.node.tick();
      this.stabilize();
    }
  }

  leaders(): bigint[] {
    return [...this.nodes.values()].filter((n) => n.node.status().raftState === StateType.Leader).map((n) => n.id);
  }

  /** Elects `id` by campaign and returns the cluster for chaining. */
  elect(id: bigint): this {
    this.get(id).node.campaign();
    this.stabilize();
    assert.strictEqual(this.get(id).node.status().raftState, StateType.Leader, `${id} did not become leader`);
    return this;
  }

  /** Snapshots node `id`'s applied state at its applied index and compacts its log up to there. */
  compact(id: bigint): number {
    const n = this.get(id);
    const index = n.node.status().applied;
    const data = Buffer.from(JSON.stringify(this.appliedData(id)));
    n.storage.createSnapshot(index, n.node.raft.prs.confState(), data);
    n.storage.compact(index);
    return index;
  }

  isolate(id: bigint): void {
    this.drop = (m) => m.from === id || m.to === id;
  }

  heal(): void {
    this.drop = () => false;
  }

  /** Data of applied normal entries with a payload. */
  appliedData(id: bigint): string[] {
    return this.get(id)
      .applied.filter((e) => e.type === EntryType.Normal && e.data.length > 0)
      .map((e) => e.data.toString());
  }
}

export function cc(type: number, nodeId: bigint): ConfChange {
  return { type, nodeId, context: null };
}

// Drives the pure Raft core: ticks it on a timer, feeds it proposals and messages, and runs
// its Ready cycle (persist to the WAL -> send -> apply -> advance). Calls into the core are
// queued in a bounded inbox and fed between Ready cycles, so proposals that arrive while a WAL
// write is in flight are batched into the next one (one fsync for many writes).
import assert from 'node:assert';
import type { Logger } from '../log';
import { StateType } from '../raft';
import type { ConfChange, Entry, Message, RawNode, ReadState, SoftState, Ready, MemoryStorage, Snapshot } from '../raft';
import type { Wal } from '../wal/wal';
import { failpoint, failpointsArmed } from '../runtime/failpoints';

export interface RaftNodeHooks {
  onSoftState(ss: SoftState): void;
  onReadStates(rs: ReadState[]): void;
  /** Apply committed entries (synchronously, in order). */
  applyEntries(entries: Entry[]): void;
  send(msgs: Message[]): void;
  /** After each Ready cycle: a chance to snapshot/compact the log. */
  afterAdvance(): Promise<void>;
  /** A snapshot from the leader: its database saved durably, before the WAL records the snapshot. */
  saveSnapshot(snap: Snapshot): Promise<void>;
  /** Then, once the WAL holds the snapshot, its database replaces the applied state. */
  installSnapshot(snap: Snapshot): Promise<void>;
  /** After each save: bytes written, seconds for the whole save, whether it synced, seconds of its write() alone. */
  onWalSaved?(bytes: number, seconds: number, synced: boolean, writeSeconds: number): void;
  /** Client writes this member is waiting on (answered once applied). */
  proposalsWaiting(): number;
  /** An unrecoverable error in the loop (I/O or broken invariant): the member must stop. */
  fatal(e: unknown): void;
}

type InboxItem = (raw: RawNode) => void;

/** A normal-entry proposal waiting in the inbox; consecutive ones are stepped as one MsgProp. */
interface Proposal {
  data: Buffer;
  onDropped: (e: Error) => void;
}

/** Bounds one batched MsgProp (entries and bytes), far below Raft's message size limits. */
const MAX_BATCH_ENTRIES = 512;
const MAX_BATCH_BYTES = 1024 * 1024;
/**
 * One writer at a time looks like this: a run of saves of one entry each, and the entry being saved
 * is the only write the member waits on (a leader with followers never inlines: see inlineSync).
 * Then the save's fdatasync runs inline (Wal.save), since no other request needs the loop
 * meanwhile. Puts from one client, medians of 6 alternating runs: p50 1.45 -> 0.95 ms, 612 -> 876
 * puts/s. The run is what tells it from load: with 10 clients, many saves also carry one entry with
 * nothing else proposed yet, and inlining those cost 10-17% of their rate (the other clients'
 * requests waited unparsed behind the disk).
 */
const INLINE_SYNC_AFTER_SINGLE_SAVES = 8;
/**
 * An inline fdatasync blocks every other client (reads, watches, keepalives) for as long as the
 * disk takes. Only a disk whose last durable save took at most this long is trusted with it: on
 * a slow disk the hand-off saved is a small part of the wait anyway.
 */
const INLINE_SYNC_MAX_LAST_SAVE_MS = 2;
/**
 * Data of applied Raft log entries kept in memory; older entries' data is released and read back
 * from the WAL when a lagging follower needs it (MemoryStorage.release). etcd keeps every entry
 * since its last snapshot in memory: up to snapshot-count (100000) entries, which was 27 MiB of
 * kube-mix's ~45 MB of live buffers (session 26). A follower that keeps up is sent entries from the
 * unstable log or from these last few MiB. Only a leader with other members keeps them: a lone
 * member or a follower sends no entries, and its tail was pure cost. The buffers of the last few
 * MiB of entries sat among the freed ones in glibc's heap, so that the free memory below them could
 * not be given back: loading 100k keys into one member left 158-160 MiB resident, 141-145 without
 * them (session 32).
 */
export const RESIDENT_LOG_BYTES = 4 * 1024 * 1024;
const MAX_RESIDENT_LOG_BYTES = 1024 * 1024 * 1024;

/**
 * RESIDENT_LOG_BYTES, or ETCDTS_RAFT_LOG_RESIDENT_BYTES (0..1 GiB): 0 releases every applied entry,
 * so that every catch-up reads the WAL (the soak and tests use it); more trades memory for
 * fewer reads of the WAL by slow followers.
 */
export function residentLogBytes(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env.ETCDTS_RAFT_LOG_RESIDENT_BYTES;
  if (raw === undefined || raw === '') return RESIDENT_LOG_BYTES;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0 || n > MAX_RESIDENT_LOG_BYTES) {
    throw new Error(`ETCDTS_RAFT_LOG_RESIDENT_BYTES must be an integer from 0 to ${MAX_RESIDENT_LOG_BYTES}, got ${JSON.stringify(raw)}`);
  }
  return n;
}

export class RaftNode {
  private readonly inbox: Array<InboxItem | Proposal> = [];
  private running = false;
  private stopped = false;
  private ticker: NodeJS.Timeout | null = null;
  /** stop() waiting for the running cycle to end (at most one per stop() call). */
  private readonly idleWaiters: Array<() => void> = [];
  /** Made once: kick() runs per Ready cycle, several per client write in a cluster. */
  private readonly runSoon = (): void => {
    this.run().catch((e) => this.hooks.fatal(e));
  };

  constructor(
    readonly raw: RawNode,
    private readonly storage: MemoryStorage,
    private readonly wal: Wal,
    private readonly hooks: RaftNodeHooks,
    private readonly opts: { tickMs: number; maxInbox: number; log: Logger; residentLogBytes?: number },
  ) {}

  start(): void {
    this.ticker = setInterval(() => this.enqueue((r) => r.tick(), true), this.opts.tickMs);
    this.kick();
  }

  /** Queue a call into the core. Returns false when the inbox is full. */
  enqueue(item: InboxItem | Proposal, force = false): boolean {
    if (this.stopped) return false;
    if (!force && this.inbox.length >= this.opts.maxInbox) return false;
    this.inbox.push(item);
    this.kick();
    return true;
  }

  propose(data: Buffer, onDropped: (e: Error) => void): boolean {
    return this.enqueue({ data, onDropped });
  }

  proposeConfChange(cc: ConfChange, onDropped: (e: Error) => void): boolean {
    return this.enqueue((r) => {
      try {
        r.proposeConfChange(cc);
      } catch (e) {
        onDropped(e as Error);
      }
    });
  }

  step(m: Message): boolean {
    return this.enqueue((r) => {
      try {
        r.step(m);
      } catch (e) {
        this.opts.log.debug('raft step dropped a message', { error: String(e) });
      }
    });
  }

  readIndex(ctx: Buffer): boolean {
    return this.enqueue((r) => r.readIndex(ctx));
  }

  private kick(): void {
    if (this.running || this.stopped) return;
    this.running = true;
    setImmediate(this.runSoon);
  }

  private drainInbox(): void {
    // Items queued while draining run in the next cycle; the bound keeps one turn short.
    const items = this.inbox.splice(0, this.inbox.length);
    let batch: Proposal[] = [];
    let batchBytes = 0;
    for (const item of items) {
      if (typeof item === 'function') {
        // Order matters (a read index or conf change after a write): flush the writes first.
        this.proposeBatch(batch);
        batch = [];
        batchBytes = 0;
        item(this.raw);
        continue;
      }
      if (batch.length >= MAX_BATCH_ENTRIES || (batch.length > 0 && batchBytes + item.data.length > MAX_BATCH_BYTES)) {
        this.proposeBatch(batch);
        batch = [];
        batchBytes = 0;
      }
      batch.push(item);
      batchBytes += item.data.length;
    }
    this.proposeBatch(batch);
  }

  /** One MsgProp for many writes; if Raft refuses the lot, each is tried alone so only the refused fail. */
  private proposeBatch(batch: Proposal[]): void {
    if (batch.length === 0) return;
    if (batch.length > 1) {
      try {
        this.raw.proposeMany(batch.map((p) => p.data));
        return;
      } catch {
        // Fall through: e.g. the uncommitted-size limit refuses the batch but not all of it.
      }
    }
    for (const p of batch) {
      try {
        this.raw.propose(p.data);
      } catch (e) {
        p.onDropped(e as Error);
      }
    }
  }

  private async run(): Promise<void> {
    try {
      for (;;) {
        if (this.stopped) return;
        this.drainInbox();
        if (!this.raw.hasReady()) {
          if (this.inbox.length === 0) return;
          continue;
        }
        const rd = this.raw.ready();
        await this.handleReady(rd);
      }
    } finally {
      this.running = false;
      for (const resolve of this.idleWaiters.splice(0)) resolve();
      if (!this.stopped && this.inbox.length > 0) this.kick();
    }
  }

  /** Whether the core led at the last soft-state change (a leader may send before persisting). */
  private leading = false;
  /**
   * Every log entry up to this index is in the WAL as the log holds it now (saved by an earlier
   * Ready). Starts at what storage holds, which was read from the WAL.
   */
  private durableIndex = -1;
  /** Saves in a row (up to INLINE_SYNC_AFTER_SINGLE_SAVES) that carried exactly one entry. */
  private singleSaves = 0;
  /** How long the last save that had to be durable took, fdatasync included. */
  private lastSyncedSaveMs = Infinity;

  private async handleReady(rd: Ready): Promise<void> {
    if (rd.softState) {
      this.leading = rd.softState.raftState === StateType.Leader;
      this.hooks.onSoftState(rd.softState);
    }
    // Raft thesis 10.2.1: a leader may send its appends while it writes them itself; the
    // followers' answers (which count toward commit) only come after their own fsync. Other
    // members' messages (votes, acks) must wait for our write.
    const sendFirst = this.leading && rd.messages.length > 0;
    if (sendFirst) this.hooks.send(rd.messages);
    // Read states depend on nothing we persist (etcd hands them out before saving too).
    if (rd.readStates.length > 0) this.hooks.onReadStates(rd.readStates);
    if (this.durableIndex < 0) this.durableIndex = this.storage.lastIndex();
    // Committed entries this member already holds durably are applied while this Ready's own
    // entries are written, as etcd's apply runs beside its WAL write: in a cluster, what the
    // followers just acknowledged need not wait for the leader's next fsync. Entries this Ready
    // rewrites (a new leader replacing our tail) do not count as held.
    let early = 0;
    if (!rd.snapshot) {
      const heldUpTo = rd.entries.length > 0 ? Math.min(this.durableIndex, rd.entries[0].index - 1) : this.durableIndex;
      while (early < rd.committedEntries.length && rd.committedEntries[early].index <= heldUpTo) early++;
      if (early > 0) this.hooks.applyEntries(early === rd.committedEntries.length ? rd.committedEntries : rd.committedEntries.slice(0, early));
    }
    // Order matters for crash safety (etcd's): the snapshot's database is saved beside the backend,
    // then the WAL records the snapshot (dropping the log before it), then the database replaces
    // the backend. A crash between the last two leaves the saved file for start-up to install.
    const installing = rd.snapshot !== null && rd.snapshot.metadata.index > 0;
    if (installing) {
      await this.hooks.saveSnapshot(rd.snapshot!);
      if (failpointsArmed) await failpoint('raftBeforeSaveSnap');
    }
    if (rd.hardState || rd.entries.length > 0 || rd.snapshot) {
      if (failpointsArmed) await failpoint('raftBeforeSave');
      const t0 = process.hrtime.bigint();
      const mustSync = rd.mustSync || rd.snapshot !== null;
      const inline = this.inlineSync(rd, mustSync, sendFirst);
      const bytes = await this.wal.save(rd.hardState, rd.entries, rd.snapshot, mustSync, inline);
      const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
      if (mustSync) this.lastSyncedSaveMs = seconds * 1000;
      this.hooks.onWalSaved?.(bytes, seconds, mustSync, this.wal.lastWriteSeconds);
      if (failpointsArmed) await failpoint(installing ? 'raftAfterSaveSnap' : 'raftAfterSave');
      if (this.stopped) return;
    }
    if (rd.snapshot) {
      if (installing) await this.hooks.installSnapshot(rd.snapshot);
      this.storage.applySnapshot(rd.snapshot);
      this.durableIndex = rd.snapshot.metadata.index;
    }
    if (rd.hardState) this.storage.setHardState(rd.hardState);
    if (rd.entries.length > 0) {
      this.storage.append(rd.entries);
      this.durableIndex = rd.entries[rd.entries.length - 1].index;
    }
    if (!sendFirst && rd.messages.length > 0) this.hooks.send(rd.messages);
    if (early < rd.committedEntries.length) this.hooks.applyEntries(early === 0 ? rd.committedEntries : rd.committedEntries.slice(early));
    this.raw.advance(rd);
    if (rd.committedEntries.length > 0) {
      // Only a leader sends entries, and only when it has someone to send them to; anywhere else a
      // resident tail would only pin its buffers among freed ones in glibc's heap (see RESIDENT_LOG_BYTES).
      const keepBytes = this.raw.leadsOthers() ? (this.opts.residentLogBytes ?? RESIDENT_LOG_BYTES) : 0;
      this.storage.release(rd.committedEntries[rd.committedEntries.length - 1].index, keepBytes);
    }
    await this.hooks.afterAdvance();
  }

  /**
   * Whether this save's fdatasync should run inline (see INLINE_SYNC_AFTER_SINGLE_SAVES); every
   * save counts into the run of one-entry saves. Never after sending first: over TLS those appends
   * sit in grpc-js's HTTP/2 queue until the loop's next turn, so blocking it would hold the
   * followers' writes back behind ours; and even with plain peer URLs, whose appends are already on
   * the wire (raw_client.ts), a leader's inline fdatasync was slower (3 members, one client, 4
   * alternating pairs: 692-809 vs 715-985 puts/s): the followers' answers waited behind it.
   */
  private inlineSync(rd: Ready, mustSync: boolean, sentFirst: boolean): boolean {
    const n = rd.entries.length;
    const inline =
      mustSync &&
      !sentFirst &&
      !rd.snapshot &&
      n === 1 &&
      this.singleSaves >= INLINE_SYNC_AFTER_SINGLE_SAVES &&
      this.lastSyncedSaveMs <= INLINE_SYNC_MAX_LAST_SAVE_MS &&
      this.hooks.proposalsWaiting() <= 1;
    if (n > 1) this.singleSaves = 0;
    else if (n === 1) this.singleSaves = Math.min(this.singleSaves + 1, INLINE_SYNC_AFTER_SINGLE_SAVES);
    return inline;
  }

  /** Stop ticking and feeding the core; resolves when the current Ready cycle is done. */
  async stop(): Promise<void> {
    if (this.ticker) clearInterval(this.ticker);
    this.ticker = null;
    this.stopped = true;
    this.inbox.length = 0;
    if (this.running) await new Promise<void>((resolve) => this.idleWaiters.push(resolve));
  }
}

import assert from 'node:assert';
import { encodeConfChange } from './confchange';
import { ErrStepLocalMsg, ErrStepPeerNotFound } from './errors';
import { Raft } from './raft';
import {
  ConfChange,
  ConfChangeType,
  ConfState,
  Entry,
  EntryType,
  HardState,
  Message,
  MessageType,
  NONE,
  ProgressStatus,
  RaftConfig,
  RaftStatus,
  Ready,
  SoftState,
  StateType,
  hardStateEqual,
  isEmptyHardState,
  isEmptySnapshot,
  isLocalMsg,
  isResponseMsg,
  newMessage,
} from './types';

/**
 * The server-facing handle of the Raft core (etcd-raft's RawNode): feed it ticks, proposals and peer
 * messages; take a Ready, persist it, send its messages, apply its committed entries, then advance().
 */
export class RawNode {
  readonly raft: Raft;
  private prevSoftState: SoftState;
  private prevHardState: HardState;
  /** A Ready was handed out and not yet advanced: no new one until then (its entries would repeat). */
  private readyOutstanding = false;

  constructor(cfg: RaftConfig) {
    this.raft = new Raft(cfg);
    this.prevSoftState = this.raft.softState();
    this.prevHardState = this.raft.hardState();
  }

  /**
   * Starts a brand-new cluster: writes one committed AddNode entry per initial voter at term 1, as
   * etcd-raft's Bootstrap does, so every member of the new cluster begins with the same log.
   * `contexts` optionally gives each peer's ConfChange context (etcd puts the member's JSON there).
   */
  bootstrap(peers: bigint[], contexts?: ReadonlyMap<bigint, Buffer>): void {
    assert(peers.length > 0, 'must provide at least one peer to Bootstrap');
    const lastIndex = this.raft.raftLog.storage.lastIndex();
    assert(lastIndex === 0, "can't bootstrap a nonempty Storage");
    // Make the first Ready report the (empty) initial hard state as changed, so it gets persisted.
    this.prevHardState = { term: 0, vote: NONE, commit: 0 };
    this.raft.becomeFollower(1, NONE);
    const ents: Entry[] = peers.map((id, i) => ({
      term: 1,
      index: i + 1,
      type: EntryType.ConfChange,
      data: encodeConfChange({ type: ConfChangeType.AddNode, nodeId: id, context: contexts?.get(id) ?? null }),
    }));
    this.raft.raftLog.append(ents);
    // Committed by fiat: every initial member writes the same entries.
    this.raft.raftLog.committed = ents.length;
    for (const id of peers) this.raft.applyConfChange({ type: ConfChangeType.AddNode, nodeId: id, context: null });
  }

  tick(): void {
    this.raft.tick();
  }

  campaign(): void {
    this.raft.step(newMessage({ type: MessageType.MsgHup }));
  }

  /** Throws ErrProposalDropped when it cannot be proposed (no leader, transfer in progress, size limit). */
  propose(data: Buffer): void {
    this.raft.step(
      newMessage({ type: MessageType.MsgProp, from: this.raft.id, entries: [{ term: 0, index: 0, type: EntryType.Normal, data }] }),
    );
  }

  /**
   * Proposes several normal entries as one MsgProp: one append and one round of MsgApp to the
   * followers instead of one per entry. All or none: throws ErrProposalDropped for the lot.
   */
  proposeMany(datas: readonly Buffer[]): void {
    if (datas.length === 0) return;
    const entries = datas.map((data) => ({ term: 0, index: 0, type: EntryType.Normal, data }));
    this.raft.step(newMessage({ type: MessageType.MsgProp, from: this.raft.id, entries }));
  }

  proposeConfChange(cc: ConfChange): void {
    this.raft.step(
      newMessage({
        type: MessageType.MsgProp,
        from: this.raft.id,
        entries: [{ term: 0, index: 0, type: EntryType.ConfChange, data: encodeConfChange(cc) }],
      }),
    );
  }

  /** Applies a committed conf change to the membership; call it when applying the entry. */
  applyConfChange(cc: ConfChange): ConfState {
    return this.raft.applyConfChange(cc);
  }

  /** Steps a message from a peer. Throws ErrStepLocalMsg / ErrStepPeerNotFound like etcd. */
  step(m: Message): void {
    if (isLocalMsg(m.type)) throw new ErrStepLocalMsg();
    if (this.raft.prs.progress.has(m.from) || !isResponseMsg(m.type)) {
      this.raft.step(m);
      return;
    }
    throw new ErrStepPeerNotFound();
  }

  /** Requests a linearizable read point; the answer arrives as a ReadState carrying ctx. */
  readIndex(ctx: Buffer): void {
    this.raft.step(
      newMessage({ type: MessageType.MsgReadIndex, from: this.raft.id, entries: [{ term: 0, index: 0, type: EntryType.Normal, data: ctx }] }),
    );
  }

  /**
   * The read point a ReadIndex request would get right now when this member leads as the only
   * voter (raft answers it at once with the commit index, no round trip); null otherwise. Lets
   * the server skip the request's trip through the Ready loop.
   */
  singletonLeaderReadIndex(): number | null {
    if (this.raft.state !== StateType.Leader || !this.raft.prs.isSingleton()) return null;
    return this.raft.raftLog.committed;
  }

  /**
   * Whether this member leads and has other members (voters or learners) to send entries to: the
   * only time the data of entries already applied may be asked for again soon.
   */
  leadsOthers(): boolean {
    return this.raft.state === StateType.Leader && this.raft.prs.progress.size > 1;
  }

  transferLeader(to: bigint): void {
    this.raft.step(newMessage({ type: MessageType.MsgTransferLeader, from: to }));
  }

  reportUnreachable(id: bigint): void {
    this.raft.step(newMessage({ type: MessageType.MsgUnreachable, from: id }));
  }

  reportSnapshot(id: bigint, failed: boolean): void {
    this.raft.step(newMessage({ type: MessageType.MsgSnapStatus, from: id, reject: failed }));
  }

  /** False while a Ready is outstanding (between ready() and advance()). */
  hasReady(): boolean {
    if (this.readyOutstanding) return false;
    const r = this.raft;
    const ss = r.softState();
    if (ss.lead !== this.prevSoftState.lead || ss.raftState !== this.prevSoftState.raftState) return true;
    const hs = r.hardState();
    if (!isEmptyHardState(hs) && !hardStateEqual(hs, this.prevHardState)) return true;
    if (r.raftLog.hasPendingSnapshot()) return true;
    if (r.msgs.length > 0 || r.raftLog.unstableEntries().length > 0 || r.raftLog.hasNextEnts()) return true;
    return r.readStates.length !== 0;
  }

  /**
   * Takes the pending output. The caller persists hardState/entries/snapshot (durably if mustSync),
   * then sends messages and applies committedEntries, then calls advance(rd). tick/step/propose may be
   * called meanwhile (e.g. while the persist is in flight); ready() may not.
   */
  ready(): Ready {
    assert(!this.readyOutstanding, 'ready() called again before advance()');
    this.readyOutstanding = true;
    const r = this.raft;
    const ss = r.softState();
    const hs = r.hardState();
    const softChanged = ss.lead !== this.prevSoftState.lead || ss.raftState !== this.prevSoftState.raftState;
    const hardChanged = !isEmptyHardState(hs) && !hardStateEqual(hs, this.prevHardState);
    // A copy: the unstable tail grows in place while the server persists this Ready.
    const entries = r.raftLog.unstableEntries().slice();
    const rd: Ready = {
      softState: softChanged ? ss : null,
      hardState: hardChanged ? hs : null,
      readStates: r.readStates,
      entries,
      snapshot: r.raftLog.hasPendingSnapshot() ? r.raftLog.unstable.snapshot : null,
      committedEntries: r.raftLog.nextEnts(),
      messages: r.msgs,
      // Term and vote must be durable before any vote/ack leaves; commit alone may be lost (it is re-learned).
      mustSync: entries.length !== 0 || hs.vote !== this.prevHardState.vote || hs.term !== this.prevHardState.term,
    };
    if (rd.softState) this.prevSoftState = rd.softState;
    r.readStates = [];
    r.msgs = [];
    return rd;
  }

  advance(rd: Ready): void {
    assert(this.readyOutstanding, 'advance() without a Ready');
    this.readyOutstanding = false;
    const r = this.raft;
    if (rd.hardState) this.prevHardState = rd.hardState;
    let appliedCursor = 0;
    if (rd.committedEntries.length > 0) appliedCursor = rd.committedEntries[rd.committedEntries.length - 1]!.index;
    else if (rd.snapshot && !isEmptySnapshot(rd.snapshot)) appliedCursor = rd.snapshot.metadata.index;
    if (appliedCursor > 0) r.raftLog.appliedTo(appliedCursor);
    r.reduceUncommittedSize(rd.committedEntries);
    if (rd.entries.length > 0) {
      const e = rd.entries[rd.entries.length - 1]!;
      r.raftLog.stableTo(e.index, e.term);
    }
    if (rd.snapshot && !isEmptySnapshot(rd.snapshot)) r.raftLog.stableSnapTo(rd.snapshot.metadata.index);
    assert(r.raftLog.applied <= r.raftLog.committed, 'applied must not exceed committed');
  }

  status(): RaftStatus {
    const r = this.raft;
    let progress: Map<bigint, ProgressStatus> | null = null;
    if (r.state === StateType.Leader) {
      progress = new Map();
      for (const [id, pr] of r.prs.progress) {
        progress.set(id, { match: pr.match, next: pr.next, state: pr.state, recentActive: pr.recentActive, isLearner: pr.isLearner });
      }
    }
    return {
      id: r.id,
      term: r.term,
      vote: r.vote,
      commit: r.raftLog.committed,
      lead: r.lead,
      raftState: r.state,
      applied: r.raftLog.applied,
      progress,
      leadTransferee: r.leadTransferee,
    };
  }
}

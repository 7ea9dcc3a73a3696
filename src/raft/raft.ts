import assert from 'node:assert';
import { applySimpleChange, restoreTracker } from './confchange';
import { ErrProposalDropped, ErrSnapshotTemporarilyUnavailable } from './errors';
import { ProgressState } from './progress';
import { RaftLog } from './raft-log';
import { ReadOnly } from './read-only';
import { ProgressTracker, VoteResult } from './tracker';
import {
  ConfChange,
  ConfState,
  Entry,
  EntryType,
  HardState,
  Message,
  MessageType,
  MessageTypeName,
  NONE,
  NO_LIMIT,
  RaftConfig,
  RaftLogger,
  ReadState,
  SoftState,
  Snapshot,
  StateType,
  StateTypeName,
  isEmptyHardState,
  isEmptySnapshot,
  newMessage,
  payloadSizeBytes,
} from './types';

const CAMPAIGN_TRANSFER = Buffer.from('CampaignTransfer');
const CampaignKind = { PreElection: 0, Election: 1, Transfer: 2 } as const;
/** Bound on read requests a new leader holds until it commits an entry of its term. */
export const MAX_PENDING_READ_INDEX_MESSAGES = 4096;
/** Bound on ReadIndex requests awaiting heartbeat quorum. */
export const MAX_PENDING_READ_INDEX_REQUESTS = 65536;
/** Bound on readStates waiting for the server to take a Ready. */
export const MAX_READ_STATES = 65536;

const noopLogger: RaftLogger = { info() {}, warn() {} };

/** IDs print as etcd prints them (%x). */
function hex(id: bigint): string {
  return id.toString(16);
}

function voteRespType(t: number): number {
  if (t === MessageType.MsgVote) return MessageType.MsgVoteResp;
  if (t === MessageType.MsgPreVote) return MessageType.MsgPreVoteResp;
  assert.fail(`not a vote message: ${t}`);
}

function validateConfig(c: RaftConfig): void {
  assert(c.id !== NONE, 'cannot use none as id');
  assert(Number.isSafeInteger(c.heartbeatTick) && c.heartbeatTick > 0, 'heartbeat tick must be greater than 0');
  assert(c.electionTick > c.heartbeatTick, 'election tick must be greater than heartbeat tick');
  assert(c.maxInflightMsgs > 0, 'max inflight messages must be greater than 0');
  assert(c.maxSizePerMsgBytes >= 0 && c.maxUncommittedEntriesSizeBytes >= 0);
  assert(Number.isSafeInteger(c.applied) && c.applied >= 0);
}

/**
 * The Raft state machine (etcd-raft's `raft` struct). Pure: no I/O, no clock; output accumulates in
 * `msgs` and `readStates` and is drained through RawNode.ready().
 */
export class Raft {
  readonly id: bigint;
  term = 0;
  vote: bigint = NONE;
  readStates: ReadState[] = [];
  readonly raftLog: RaftLog;
  readonly maxMsgSizeBytes: number;
  readonly maxUncommittedSizeBytes: number;
  prs: ProgressTracker;
  state: number = StateType.Follower;
  isLearner = false;
  msgs: Message[] = [];
  lead: bigint = NONE;
  leadTransferee: bigint = NONE;
  /** Index of the newest conf change in the log; a new one is refused until it is applied. */
  pendingConfIndex = 0;
  uncommittedSizeBytes = 0;
  readOnly: ReadOnly;
  /** Reads that arrived before this leader committed an entry of its term. */
  pendingReadIndexMessages: Message[] = [];
  electionElapsed = 0;
  heartbeatElapsed = 0;
  readonly checkQuorum: boolean;
  readonly preVote: boolean;
  readonly stepDownOnRemoval: boolean;
  readonly heartbeatTimeout: number;
  readonly electionTimeout: number;
  randomizedElectionTimeout = 0;
  private readonly random: () => number;
  readonly logger: RaftLogger;
  private readonly hexId: string;

  constructor(c: RaftConfig) {
    validateConfig(c);
    this.id = c.id;
    this.hexId = hex(c.id);
    this.logger = c.logger ?? noopLogger;
    this.random = c.random;
    this.raftLog = new RaftLog(c.storage, c.maxCommittedSizePerReadyBytes ?? c.maxSizePerMsgBytes);
    this.maxMsgSizeBytes = c.maxSizePerMsgBytes;
    this.maxUncommittedSizeBytes = c.maxUncommittedEntriesSizeBytes === 0 ? NO_LIMIT : c.maxUncommittedEntriesSizeBytes;
    this.checkQuorum = c.checkQuorum;
    this.preVote = c.preVote;
    this.stepDownOnRemoval = c.stepDownOnRemoval ?? true;
    this.heartbeatTimeout = c.heartbeatTick;
    this.electionTimeout = c.electionTick;
    this.readOnly = new ReadOnly(MAX_PENDING_READ_INDEX_REQUESTS);

    const { hardState, confState } = c.storage.initialState();
    this.prs = restoreTracker(c.maxInflightMsgs, confState, this.raftLog.lastIndex(), c.maxInflightBytes ?? 0);
    const pr = this.prs.progress.get(this.id);
    this.isLearner = pr !== undefined && pr.isLearner;
    if (!isEmptyHardState(hardState)) this.loadState(hardState);
    if (c.applied > 0) this.raftLog.appliedTo(c.applied);
    this.becomeFollower(this.term, NONE);
    this.logger.info(
      `newRaft ${this.hexId} [peers: [${this.prs.voterIds().map(hex).join(',')}], term: ${this.term}, ` +
        `commit: ${this.raftLog.committed}, applied: ${this.raftLog.applied}, lastindex: ${this.raftLog.lastIndex()}, ` +
        `lastterm: ${this.raftLog.lastTerm()}]`,
    );
  }

  softState(): SoftState {
    return { lead: this.lead, raftState: this.state };
  }

  hardState(): HardState {
    return { term: this.term, vote: this.vote, commit: this.raftLog.committed };
  }

  private loadState(hs: HardState): void {
    assert(
      hs.commit >= this.raftLog.committed && hs.commit <= this.raftLog.lastIndex(),
      `${this.id} state.commit ${hs.commit} is out of range [${this.raftLog.committed}, ${this.raftLog.lastIndex()}]`,
    );
    this.raftLog.committed = hs.commit;
    this.term = hs.term;
    this.vote = hs.vote;
  }

  // ---- sending

  private send(m: Message): void {
    m.from = this.id;
    const t = m.type;
    if (t === MessageType.MsgVote || t === MessageType.MsgVoteResp || t === MessageType.MsgPreVote || t === MessageType.MsgPreVoteResp) {
      // Vote messages carry the term of the election (our term + 1 for pre-votes), never 0.
      if (!(m.term !== 0)) assert.fail(`term should be set when sending ${MessageTypeName[t]}`);
    } else {
      if (!(m.term === 0)) assert.fail(`term should not be set when sending ${MessageTypeName[t]} (was ${m.term})`);
      // Proposals and read requests forwarded to the leader stay term-less: they are local to it.
      if (t !== MessageType.MsgProp && t !== MessageType.MsgReadIndex) m.term = this.term;
    }
    this.msgs.push(m);
  }

  /** Sends a MsgApp (or MsgSnap) to `to` if its progress allows; returns whether a message was sent. */
  maybeSendAppend(to: bigint, sendIfEmpty: boolean): boolean {
    const pr = this.prs.progress.get(to);
    if (!(pr)) assert.fail(`no progress for ${to}`);
    if (pr.isPaused()) return false;
    let prevTerm = 0;
    let ents: Entry[] = [];
    let needSnapshot = false;
    try {
      prevTerm = this.raftLog.term(pr.next - 1);
      ents = this.raftLog.entries(pr.next, this.maxMsgSizeBytes);
    } catch {
      needSnapshot = true;
    }
    if (!needSnapshot && ents.length === 0 && !sendIfEmpty) return false;

    if (needSnapshot) {
      if (!pr.recentActive) return false;
      let snapshot: Snapshot;
      try {
        snapshot = this.raftLog.snapshot();
      } catch (e) {
        if (e instanceof ErrSnapshotTemporarilyUnavailable) return false;
        throw e;
      }
      assert(!isEmptySnapshot(snapshot), 'need non-empty snapshot');
      pr.becomeSnapshot(snapshot.metadata.index);
      this.logger.info(
        `${this.hexId} [firstindex: ${this.raftLog.firstIndex()}, commit: ${this.raftLog.committed}] sent snapshot[index: ${snapshot.metadata.index}, term: ${snapshot.metadata.term}] to ${hex(to)} [${pr}]`,
      );
      this.send(newMessage({ type: MessageType.MsgSnap, to, snapshot }));
      return true;
    }

    const m = newMessage({
      type: MessageType.MsgApp,
      to,
      index: pr.next - 1,
      logTerm: prevTerm,
      entries: ents,
      commit: this.raftLog.committed,
    });
    if (ents.length !== 0) {
      if (pr.state === ProgressState.Replicate) {
        const last = ents[ents.length - 1]!.index;
        pr.optimisticUpdate(last);
        pr.inflights.add(last, payloadSizeBytes(ents));
      } else if (pr.state === ProgressState.Probe) {
        pr.probeSent = true;
      } else {
        assert.fail(`${this.id} is sending append in unhandled state ${pr.state}`);
      }
    }
    this.send(m);
    return true;
  }

  sendAppend(to: bigint): void {
    this.maybeSendAppend(to, true);
  }

  private sendHeartbeat(to: bigint, ctx: Buffer | null): void {
    // Never advance a follower's commit past what it is known to hold: it might not have those entries.
    const pr = this.prs.progress.get(to)!;
    const commit = Math.min(pr.match, this.raftLog.committed);
    this.send(newMessage({ type: MessageType.MsgHeartbeat, to, commit, context: ctx }));
  }

  bcastAppend(): void {
    this.prs.visit((id) => {
      if (id !== this.id) this.sendAppend(id);
    });
  }

  private bcastHeartbeat(): void {
    this.bcastHeartbeatWithCtx(this.readOnly.lastPendingRequestCtx());
  }

  private bcastHeartbeatWithCtx(ctx: Buffer | null): void {
    this.prs.visit((id) => {
      if (id !== this.id) this.sendHeartbeat(id, ctx);
    });
  }

  private sendTimeoutNow(to: bigint): void {
    this.send(newMessage({ type: MessageType.MsgTimeoutNow, to }));
  }

  // ---- commit / append

  maybeCommit(): boolean {
    const before = this.raftLog.committed;
    const ok = this.raftLog.maybeCommit(this.prs.committed(), this.term);
    assert(this.raftLog.committed >= before, 'commit index decreased');
    return ok;
  }

  private appendEntry(es: Entry[]): boolean {
    const li = this.raftLog.lastIndex();
    const stamped = es.map((e, i) => ({ term: this.term, index: li + 1 + i, type: e.type, data: e.data }));
    if (!this.increaseUncommittedSize(stamped)) {
      this.logger.warn(`${this.hexId} appending new entries to log would exceed uncommitted entry size limit; dropping proposal`);
      return false;
    }
    const newLast = this.raftLog.append(stamped);
    this.prs.progress.get(this.id)!.maybeUpdate(newLast);
    // A single voter commits here, without any message exchange.
    this.maybeCommit();
    return true;
  }

  private increaseUncommittedSize(ents: Entry[]): boolean {
    const s = payloadSizeBytes(ents);
    // An empty payload (leader's entry of a new term) or an empty tail is always accepted, so the
    // cluster can't wedge on one large proposal.
    if (this.uncommittedSizeBytes > 0 && s > 0 && this.uncommittedSizeBytes + s > this.maxUncommittedSizeBytes) return false;
    this.uncommittedSizeBytes += s;
    return true;
  }

  reduceUncommittedSize(ents: readonly Entry[]): void {
    if (this.uncommittedSizeBytes === 0) return;
    const s = payloadSizeBytes(ents);
    this.uncommittedSizeBytes = s > this.uncommittedSizeBytes ? 0 : this.uncommittedSizeBytes - s;
  }

  // ---- ticks

  tick(): void {
    if (this.state === StateType.Leader) this.tickHeartbeat();
    else this.tickElection();
  }

  private tickElection(): void {
    this.electionElapsed++;
    if (this.promotable() && this.pastElectionTimeout()) {
      this.electionElapsed = 0;
      this.step(newMessage({ type: MessageType.MsgHup, from: this.id }));
    }
  }

  private tickHeartbeat(): void {
    this.heartbeatElapsed++;
    this.electionElapsed++;
    if (this.electionElapsed >= this.electionTimeout) {
      this.electionElapsed = 0;
      if (this.checkQuorum) this.step(newMessage({ type: MessageType.MsgCheckQuorum, from: this.id }));
      // A transfer that did not finish within an election timeout is given up.
      if (this.state === StateType.Leader && this.leadTransferee !== NONE) this.abortLeaderTransfer();
    }
    if (this.state !== StateType.Leader) return;
    if (this.heartbeatElapsed >= this.heartbeatTimeout) {
      this.heartbeatElapsed = 0;
      this.step(newMessage({ type: MessageType.MsgBeat, from: this.id }));
    }
  }

  pastElectionTimeout(): boolean {
    return this.electionElapsed >= this.randomizedElectionTimeout;
  }

  private resetRandomizedElectionTimeout(): void {
    const r = this.random();
    assert(r >= 0 && r < 1, `random() must be in [0, 1), got ${r}`);
    this.randomizedElectionTimeout = this.electionTimeout + Math.floor(r * this.electionTimeout);
  }

  promotable(): boolean {
    const pr = this.prs.progress.get(this.id);
    return pr !== undefined && !pr.isLearner;
  }

  // ---- state transitions

  private reset(term: number): void {
    if (this.term !== term) {
      if (!(term > this.term)) assert.fail(`term must not decrease (${this.term} -> ${term})`);
      this.term = term;
      this.vote = NONE;
    }
    this.lead = NONE;
    this.electionElapsed = 0;
    this.heartbeatElapsed = 0;
    this.resetRandomizedElectionTimeout();
    this.abortLeaderTransfer();
    this.prs.resetVotes();
    const lastIndex = this.raftLog.lastIndex();
    this.prs.visit((id, pr) => {
      pr.match = 0;
      pr.next = lastIndex + 1;
      pr.state = ProgressState.Probe;
      pr.probeSent = false;
      pr.pendingSnapshot = 0;
      pr.recentActive = false;
      pr.inflights.reset();
      if (id === this.id) pr.match = lastIndex;
    });
    this.pendingConfIndex = 0;
    this.uncommittedSizeBytes = 0;
    this.readOnly = new ReadOnly(MAX_PENDING_READ_INDEX_REQUESTS);
    this.pendingReadIndexMessages = [];
  }

  becomeFollower(term: number, lead: bigint): void {
    this.reset(term);
    this.lead = lead;
    this.state = StateType.Follower;
    this.logger.info(`${this.hexId} became follower at term ${this.term}`);
  }

  becomeCandidate(): void {
    assert(this.state !== StateType.Leader, 'invalid transition [leader -> candidate]');
    this.reset(this.term + 1);
    this.vote = this.id;
    this.state = StateType.Candidate;
    this.logger.info(`${this.hexId} became candidate at term ${this.term}`);
  }

  becomePreCandidate(): void {
    assert(this.state !== StateType.Leader, 'invalid transition [leader -> pre-candidate]');
    // Pre-candidates change neither term nor vote: a failed pre-vote leaves no trace on the cluster.
    this.prs.resetVotes();
    this.lead = NONE;
    this.state = StateType.PreCandidate;
    this.logger.info(`${this.hexId} became pre-candidate at term ${this.term}`);
  }

  becomeLeader(): void {
    assert(this.state !== StateType.Follower, 'invalid transition [follower -> leader]');
    this.reset(this.term);
    this.lead = this.id;
    this.state = StateType.Leader;
    this.prs.progress.get(this.id)!.becomeReplicate();
    // Conservatively treat every entry of the log as a possibly pending conf change.
    this.pendingConfIndex = this.raftLog.lastIndex();
    // The empty entry of the new term lets the leader commit earlier entries (Raft §5.4.2, §8).
    const ok = this.appendEntry([{ term: 0, index: 0, type: EntryType.Normal, data: Buffer.alloc(0) }]);
    assert(ok, 'empty entry was dropped');
    this.logger.info(`${this.hexId} became leader at term ${this.term}`);
  }

  private hup(kind: number): void {
    if (this.state === StateType.Leader) return;
    if (!this.promotable()) {
      this.logger.warn(`${this.hexId} is unpromotable and can not campaign`);
      return;
    }
    // An unapplied conf change might remove us or change the quorum: wait until it is applied.
    if (this.raftLog.committed > this.raftLog.applied) {
      // Entries below firstIndex are inside a snapshot the server has not yet applied: none to scan.
      const lo = Math.max(this.raftLog.applied + 1, this.raftLog.firstIndex());
      const ents = lo <= this.raftLog.committed ? this.raftLog.slice(lo, this.raftLog.committed + 1, NO_LIMIT) : [];
      if (ents.some((e) => e.type === EntryType.ConfChange || e.type === EntryType.ConfChangeV2)) {
        this.logger.warn(`${this.hexId} cannot campaign at term ${this.term}: pending configuration changes to apply`);
        return;
      }
    }
    this.logger.info(`${this.hexId} is starting a new election at term ${this.term}`);
    this.campaign(kind);
  }

  campaign(kind: number): void {
    if (!this.promotable()) return;
    let term: number;
    let voteMsg: number;
    if (kind === CampaignKind.PreElection) {
      this.becomePreCandidate();
      voteMsg = MessageType.MsgPreVote;
      term = this.term + 1;
    } else {
      this.becomeCandidate();
      voteMsg = MessageType.MsgVote;
      term = this.term;
    }
    if (this.poll(this.id, voteRespType(voteMsg), true) === VoteResult.Won) {
      // Single voter: we won by our own vote.
      if (kind === CampaignKind.PreElection) this.campaign(CampaignKind.Election);
      else this.becomeLeader();
      return;
    }
    for (const id of this.prs.voterIds()) {
      if (id === this.id) continue;
      this.logger.info(
        `${this.hexId} [logterm: ${this.raftLog.lastTerm()}, index: ${this.raftLog.lastIndex()}] sent ${MessageTypeName[voteMsg]} request to ${hex(id)} at term ${this.term}`,
      );
      this.send(
        newMessage({
          type: voteMsg,
          to: id,
          term,
          index: this.raftLog.lastIndex(),
          logTerm: this.raftLog.lastTerm(),
          context: kind === CampaignKind.Transfer ? CAMPAIGN_TRANSFER : null,
        }),
      );
    }
  }

  private poll(id: bigint, t: number, granted: boolean): number {
    if (granted) this.logger.info(`${this.hexId} received ${MessageTypeName[t]} from ${hex(id)} at term ${this.term}`);
    else this.logger.info(`${this.hexId} received ${MessageTypeName[t]} rejection from ${hex(id)} at term ${this.term}`);
    this.prs.recordVote(id, granted);
    return this.prs.tallyVotes().result;
  }

  // ---- step

  step(m: Message): void {
    if (m.term === 0) {
      // local message
    } else if (m.term > this.term) {
      if (m.type === MessageType.MsgVote || m.type === MessageType.MsgPreVote) {
        const force = m.context !== null && m.context.equals(CAMPAIGN_TRANSFER);
        const inLease = this.checkQuorum && this.lead !== NONE && this.electionElapsed < this.electionTimeout;
        if (!force && inLease) {
          // We heard from a live leader within the minimum election timeout: a disruptive
          // (e.g. partitioned and rejoining) candidate must not depose it (Raft thesis §4.2.3).
          this.logger.info(`${this.hexId} ignored ${MessageTypeName[m.type]} from ${hex(m.from)}: lease is not expired`);
          return;
        }
      }
      if (m.type !== MessageType.MsgPreVote && !(m.type === MessageType.MsgPreVoteResp && !m.reject)) {
        this.logger.info(
          `${this.hexId} [term: ${this.term}] received a ${MessageTypeName[m.type]} message with higher term from ${hex(m.from)} [term: ${m.term}]`,
        );
      }
      if (m.type === MessageType.MsgPreVote) {
        // Never change our term in response to a PreVote.
      } else if (m.type === MessageType.MsgPreVoteResp && !m.reject) {
        // Pre-vote grants carry the future term; the term moves only when the real election starts.
      } else if (m.type === MessageType.MsgApp || m.type === MessageType.MsgHeartbeat || m.type === MessageType.MsgSnap) {
        this.becomeFollower(m.term, m.from);
      } else {
        this.becomeFollower(m.term, NONE);
      }
    } else if (m.term < this.term) {
      if ((this.checkQuorum || this.preVote) && (m.type === MessageType.MsgHeartbeat || m.type === MessageType.MsgApp)) {
        // A stale leader (e.g. after a partition) would otherwise never learn the new term when
        // check-quorum/pre-vote keep us from disrupting it; this response makes it step down.
        this.send(newMessage({ type: MessageType.MsgAppResp, to: m.from }));
      } else if (m.type === MessageType.MsgPreVote) {
        this.send(newMessage({ type: MessageType.MsgPreVoteResp, to: m.from, term: this.term, reject: true }));
      }
      return;
    }

    switch (m.type) {
      case MessageType.MsgHup:
        this.hup(this.preVote ? CampaignKind.PreElection : CampaignKind.Election);
        return;
      case MessageType.MsgVote:
      case MessageType.MsgPreVote: {
        const canVote =
          this.vote === m.from ||
          (this.vote === NONE && this.lead === NONE) ||
          (m.type === MessageType.MsgPreVote && m.term > this.term);
        const voteLog = () =>
          `${this.hexId} [logterm: ${this.raftLog.lastTerm()}, index: ${this.raftLog.lastIndex()}, vote: ${hex(this.vote)}]`;
        const candLog = () => `${hex(m.from)} [logterm: ${m.logTerm}, index: ${m.index}] at term ${this.term}`;
        if (canVote && this.raftLog.isUpToDate(m.index, m.logTerm)) {
          this.logger.info(`${voteLog()} cast ${MessageTypeName[m.type]} for ${candLog()}`);
          // Reply with the message's term: for pre-votes that is the future term the candidate asked about.
          this.send(newMessage({ type: voteRespType(m.type), to: m.from, term: m.term }));
          if (m.type === MessageType.MsgVote) {
            this.electionElapsed = 0;
            this.vote = m.from;
          }
        } else {
          this.logger.info(`${voteLog()} rejected ${MessageTypeName[m.type]} from ${candLog()}`);
          this.send(newMessage({ type: voteRespType(m.type), to: m.from, term: this.term, reject: true }));
        }
        return;
      }
      default:
        if (this.state === StateType.Leader) this.stepLeader(m);
        else if (this.state === StateType.Follower) this.stepFollower(m);
        else this.stepCandidate(m);
    }
  }

  private stepLeader(m: Message): void {
    switch (m.type) {
      case MessageType.MsgBeat:
        this.bcastHeartbeat();
        return;
      case MessageType.MsgCheckQuorum: {
        const self = this.prs.progress.get(this.id);
        if (self) self.recentActive = true;
        if (!this.prs.quorumActive()) {
          this.logger.warn(`${this.hexId} stepped down to follower since quorum is not active`);
          this.becomeFollower(this.term, NONE);
        }
        this.prs.visit((id, pr) => {
          if (id !== this.id) pr.recentActive = false;
        });
        return;
      }
      case MessageType.MsgProp: {
        if (!(m.entries.length > 0)) assert.fail(`${this.id} stepped empty MsgProp`);
        if (!this.prs.progress.has(this.id)) throw new ErrProposalDropped(); // removed from the config
        if (this.leadTransferee !== NONE) throw new ErrProposalDropped();
        const ents = m.entries.slice();
        for (let i = 0; i < ents.length; i++) {
          const e = ents[i]!;
          if (e.type !== EntryType.ConfChange && e.type !== EntryType.ConfChangeV2) continue;
          if (this.pendingConfIndex > this.raftLog.applied) {
            // One change at a time: a second one is turned into an empty normal entry, as etcd does,
            // so the proposer's wait ends when that entry applies.
            this.logger.info(`${this.hexId} ignoring conf change: possible unapplied conf change at index ${this.pendingConfIndex} (applied to ${this.raftLog.applied})`);
            ents[i] = { term: 0, index: 0, type: EntryType.Normal, data: Buffer.alloc(0) };
          } else {
            this.pendingConfIndex = this.raftLog.lastIndex() + i + 1;
          }
        }
        if (!this.appendEntry(ents)) throw new ErrProposalDropped();
        this.bcastAppend();
        return;
      }
      case MessageType.MsgReadIndex:
        if (this.prs.isSingleton()) {
          this.respondToReadIndex(m, this.raftLog.committed);
          return;
        }
        // A new leader does not know the commit index of its term until it commits an entry of it.
        if (!this.committedEntryInCurrentTerm()) {
          if (this.pendingReadIndexMessages.length < MAX_PENDING_READ_INDEX_MESSAGES) this.pendingReadIndexMessages.push(m);
          return;
        }
        this.sendReadIndexConfirmation(m);
        return;
      default:
        break;
    }

    const pr = this.prs.progress.get(m.from);
    if (!pr) return;
    switch (m.type) {
      case MessageType.MsgAppResp: {
        pr.recentActive = true;
        if (m.reject) {
          let nextProbeIdx = m.rejectHint;
          if (m.logTerm > 0) {
            // The follower told us the term at rejectHint: skip every entry of ours with a larger term.
            nextProbeIdx = this.raftLog.findConflictByTerm(m.rejectHint, m.logTerm);
          }
          if (pr.maybeDecrTo(m.index, nextProbeIdx)) {
            if (pr.state === ProgressState.Replicate) pr.becomeProbe();
            this.sendAppend(m.from);
          }
          return;
        }
        const oldPaused = pr.isPaused();
        if (!pr.maybeUpdate(m.index)) return;
        if (pr.state === ProgressState.Probe) {
          pr.becomeReplicate();
        } else if (pr.state === ProgressState.Snapshot && pr.match >= pr.pendingSnapshot) {
          pr.becomeProbe();
          pr.becomeReplicate();
        } else if (pr.state === ProgressState.Replicate) {
          pr.inflights.freeLE(m.index);
        }
        if (this.maybeCommit()) {
          this.releasePendingReadIndexMessages();
          this.bcastAppend();
        } else if (oldPaused) {
          this.sendAppend(m.from);
        }
        // Flow control may now allow several size-limited messages at once.
        while (this.maybeSendAppend(m.from, false)) {
          // keep sending
        }
        if (m.from === this.leadTransferee && pr.match === this.raftLog.lastIndex()) {
          this.logger.info(`${this.hexId} sent MsgTimeoutNow to ${hex(m.from)} after received MsgAppResp`);
          this.sendTimeoutNow(m.from);
        }
        return;
      }
      case MessageType.MsgHeartbeatResp: {
        pr.recentActive = true;
        pr.probeSent = false;
        // Free one slot so a stalled pipeline makes progress.
        if (pr.state === ProgressState.Replicate && pr.inflights.full()) pr.inflights.freeFirstOne();
        if (pr.match < this.raftLog.lastIndex()) this.sendAppend(m.from);
        if (m.context === null || m.context.length === 0) return;
        const acks = this.readOnly.recvAck(m.from, m.context);
        if (acks === null) return;
        const selfAcked = (id: bigint): boolean | undefined => (acks.has(id) ? true : undefined);
        if (this.voteResultOf(selfAcked) !== VoteResult.Won) return;
        for (const rs of this.readOnly.advance(m.context)) this.respondToReadIndex(rs.req, rs.index);
        return;
      }
      case MessageType.MsgSnapStatus:
        if (pr.state !== ProgressState.Snapshot) return;
        if (m.reject) pr.pendingSnapshot = 0;
        pr.becomeProbe();
        // Wait for a MsgAppResp (or a heartbeat response) before probing again.
        pr.probeSent = true;
        return;
      case MessageType.MsgUnreachable:
        // The follower may have dropped MsgApps: stop pipelining and probe.
        if (pr.state === ProgressState.Replicate) pr.becomeProbe();
        return;
      case MessageType.MsgTransferLeader: {
        if (pr.isLearner) return;
        const transferee = m.from;
        if (this.leadTransferee !== NONE) {
          if (this.leadTransferee === transferee) return;
          this.abortLeaderTransfer();
        }
        if (transferee === this.id) return;
        // The transfer must finish within one election timeout.
        this.electionElapsed = 0;
        this.leadTransferee = transferee;
        if (pr.match === this.raftLog.lastIndex()) this.sendTimeoutNow(transferee);
        else this.sendAppend(transferee);
        return;
      }
      default:
        return;
    }
  }

  private voteResultOf(answered: (id: bigint) => boolean | undefined): number {
    let yes = 0;
    for (const id of this.prs.voters) if (answered(id)) yes++;
    return yes >= Math.floor(this.prs.voters.size / 2) + 1 ? VoteResult.Won : VoteResult.Pending;
  }

  private committedEntryInCurrentTerm(): boolean {
    return this.raftLog.termOrZero(this.raftLog.committed) === this.term;
  }

  private releasePendingReadIndexMessages(): void {
    if (this.pendingReadIndexMessages.length === 0 || !this.committedEntryInCurrentTerm()) return;
    const msgs = this.pendingReadIndexMessages;
    this.pendingReadIndexMessages = [];
    for (const m of msgs) this.sendReadIndexConfirmation(m);
  }

  private sendReadIndexConfirmation(m: Message): void {
    const ctx = m.entries[0]!.data;
    if (!this.readOnly.addRequest(this.raftLog.committed, m)) return;
    this.readOnly.recvAck(this.id, ctx);
    this.bcastHeartbeatWithCtx(ctx);
  }

  private respondToReadIndex(req: Message, readIndex: number): void {
    if (req.from === NONE || req.from === this.id) {
      if (this.readStates.length < MAX_READ_STATES) {
        this.readStates.push({ index: readIndex, requestCtx: req.entries[0]!.data });
      }
      return;
    }
    this.send(newMessage({ type: MessageType.MsgReadIndexResp, to: req.from, index: readIndex, entries: req.entries }));
  }

  private stepCandidate(m: Message): void {
    // Only answers to our own kind of request count; stale ones from an earlier phase are ignored.
    const myVoteRespType = this.state === StateType.PreCandidate ? MessageType.MsgPreVoteResp : MessageType.MsgVoteResp;
    switch (m.type) {
      case MessageType.MsgProp:
        throw new ErrProposalDropped();
      case MessageType.MsgApp:
        this.becomeFollower(m.term, m.from);
        this.handleAppendEntries(m);
        return;
      case MessageType.MsgHeartbeat:
        this.becomeFollower(m.term, m.from);
        this.handleHeartbeat(m);
        return;
      case MessageType.MsgSnap:
        this.becomeFollower(m.term, m.from);
        this.handleSnapshot(m);
        return;
      case myVoteRespType: {
        const res = this.poll(m.from, m.type, !m.reject);
        if (res === VoteResult.Won) {
          if (this.state === StateType.PreCandidate) {
            this.campaign(CampaignKind.Election);
          } else {
            this.becomeLeader();
            this.bcastAppend();
          }
        } else if (res === VoteResult.Lost) {
          // Stay at our term: a lost (pre-)vote must not disturb anyone else.
          this.becomeFollower(this.term, NONE);
        }
        return;
      }
      default:
        return;
    }
  }

  private stepFollower(m: Message): void {
    switch (m.type) {
      case MessageType.MsgProp:
        if (this.lead === NONE) throw new ErrProposalDropped();
        m = { ...m, to: this.lead };
        this.send(m);
        return;
      case MessageType.MsgApp:
        this.electionElapsed = 0;
        this.lead = m.from;
        this.handleAppendEntries(m);
        return;
      case MessageType.MsgHeartbeat:
        this.electionElapsed = 0;
        this.lead = m.from;
        this.handleHeartbeat(m);
        return;
      case MessageType.MsgSnap:
        this.electionElapsed = 0;
        this.lead = m.from;
        this.handleSnapshot(m);
        return;
      case MessageType.MsgTransferLeader:
        if (this.lead === NONE) return;
        this.send({ ...m, to: this.lead, term: 0 });
        return;
      case MessageType.MsgTimeoutNow:
        if (this.promotable()) {
          this.logger.info(`${this.hexId} received MsgTimeoutNow from ${hex(m.from)} and starts an election to get leadership`);
          // Transfers skip pre-vote: the old leader asked for it, nobody needs protecting.
          this.campaign(CampaignKind.Transfer);
        }
        return;
      case MessageType.MsgReadIndex:
        if (this.lead === NONE) return; // dropped; the server retries
        this.send({ ...m, to: this.lead });
        return;
      case MessageType.MsgReadIndexResp:
        if (m.entries.length !== 1) return;
        if (this.readStates.length < MAX_READ_STATES) {
          this.readStates.push({ index: m.index, requestCtx: m.entries[0]!.data });
        }
        return;
      default:
        return;
    }
  }

  private handleAppendEntries(m: Message): void {
    if (m.index < this.raftLog.committed) {
      this.send(newMessage({ type: MessageType.MsgAppResp, to: m.from, index: this.raftLog.committed }));
      return;
    }
    const lastNew = this.raftLog.maybeAppend(m.index, m.logTerm, m.commit, m.entries);
    if (lastNew !== null) {
      this.send(newMessage({ type: MessageType.MsgAppResp, to: m.from, index: lastNew }));
      return;
    }
    // Tell the leader the largest index <= m.index whose term is <= m.logTerm, and its term, so it
    // can skip a whole divergent term per round trip instead of one entry.
    const hintIndex0 = Math.min(m.index, this.raftLog.lastIndex());
    const hintIndex = this.raftLog.findConflictByTerm(hintIndex0, m.logTerm);
    const hintTerm = this.raftLog.termOrZero(hintIndex);
    this.send(
      newMessage({ type: MessageType.MsgAppResp, to: m.from, index: m.index, reject: true, rejectHint: hintIndex, logTerm: hintTerm }),
    );
  }

  private handleHeartbeat(m: Message): void {
    this.raftLog.commitTo(m.commit);
    this.send(newMessage({ type: MessageType.MsgHeartbeatResp, to: m.from, context: m.context }));
  }

  private handleSnapshot(m: Message): void {
    const s = m.snapshot;
    assert(s, 'MsgSnap without snapshot');
    if (this.restore(s)) {
      this.logger.info(`${this.hexId} [commit: ${this.raftLog.committed}] restored snapshot [index: ${s.metadata.index}, term: ${s.metadata.term}]`);
      this.send(newMessage({ type: MessageType.MsgAppResp, to: m.from, index: this.raftLog.lastIndex() }));
    } else {
      this.send(newMessage({ type: MessageType.MsgAppResp, to: m.from, index: this.raftLog.committed }));
    }
  }

  /** Installs a snapshot from the leader; false if it is stale or already covered by our log. */
  restore(s: Snapshot): boolean {
    if (s.metadata.index <= this.raftLog.committed) return false;
    if (this.state !== StateType.Follower) {
      // Only a follower may be handed a snapshot; a leader receiving one means a bug elsewhere.
      this.logger.warn(`${this.hexId} attempted to restore snapshot as non-follower`);
      this.becomeFollower(this.term + 1, NONE);
      return false;
    }
    const cs = s.metadata.confState;
    const member = [...cs.voters, ...cs.learners, ...cs.votersOutgoing].includes(this.id);
    if (!member) {
      this.logger.warn(`${this.hexId} attempted to restore snapshot but it is not in the ConfState`);
      return false;
    }
    if (this.raftLog.matchTerm(s.metadata.index, s.metadata.term)) {
      // We already have the snapshot's last entry: just fast-forward the commit index.
      this.raftLog.commitTo(s.metadata.index);
      return false;
    }
    this.raftLog.restore(s);
    this.prs = restoreTracker(this.prs.maxInflight, cs, this.raftLog.lastIndex(), this.prs.maxInflightBytes);
    const pr = this.prs.progress.get(this.id);
    this.isLearner = pr !== undefined && pr.isLearner;
    return true;
  }

  // ---- membership

  applyConfChange(cc: ConfChange): ConfState {
    const next = applySimpleChange(this.prs, cc, this.raftLog.lastIndex());
    return this.switchToConfig(next);
  }

  private switchToConfig(next: ProgressTracker): ConfState {
    this.prs = next;
    const cs = this.prs.confState();
    const pr = this.prs.progress.get(this.id);
    this.isLearner = pr !== undefined && pr.isLearner;
    if ((pr === undefined || this.isLearner) && this.state === StateType.Leader) {
      // Removed or demoted leader. Stepping down lets the remaining voters elect a leader at once;
      // otherwise it keeps leading (without counting itself) until the server stops it.
      if (this.stepDownOnRemoval) this.becomeFollower(this.term, NONE);
      return cs;
    }
    if (this.state !== StateType.Leader || cs.voters.length === 0) return cs;
    if (this.maybeCommit()) {
      // The quorum shrank and more entries are committed: tell everyone.
      this.releasePendingReadIndexMessages();
      this.bcastAppend();
    } else {
      // Probe newcomers now rather than at the next heartbeat or proposal.
      this.prs.visit((id) => {
        if (id !== this.id) this.maybeSendAppend(id, false);
      });
    }
    if (this.leadTransferee !== NONE && !this.prs.voters.has(this.leadTransferee)) this.abortLeaderTransfer();
    return cs;
  }

  abortLeaderTransfer(): void {
    this.leadTransferee = NONE;
  }

  describe(): string {
    return `${this.hexId} [term ${this.term}, ${StateTypeName[this.state]}, lead ${this.lead.toString(16)}, ${this.raftLog}]`;
  }
}

// Plain data types of the Raft core. Shapes and numeric values follow etcd's raftpb so that the WAL and
// the peer transport can map them 1:1 onto etcd's protobuf messages.

export const EntryType = { Normal: 0, ConfChange: 1, ConfChangeV2: 2 } as const;

export interface Entry {
  term: number;
  index: number;
  type: number;
  data: Buffer;
}

/** An entry of the durable log without its data, which stays on disk until asked for. */
export interface EntryHead {
  term: number;
  index: number;
  type: number;
  dataBytes: number;
}

/** Node IDs are uint64 in etcd, so bigint here; 0n means "none". */
export interface HardState {
  term: number;
  vote: bigint;
  commit: number;
}

export interface ConfState {
  voters: bigint[];
  learners: bigint[];
  votersOutgoing: bigint[];
  learnersNext: bigint[];
  autoLeave: boolean;
}

export interface SnapshotMetadata {
  index: number;
  term: number;
  confState: ConfState;
}

export interface Snapshot {
  data: Buffer;
  metadata: SnapshotMetadata;
}

export const MessageType = {
  MsgHup: 0,
  MsgBeat: 1,
  MsgProp: 2,
  MsgApp: 3,
  MsgAppResp: 4,
  MsgVote: 5,
  MsgVoteResp: 6,
  MsgSnap: 7,
  MsgHeartbeat: 8,
  MsgHeartbeatResp: 9,
  MsgUnreachable: 10,
  MsgSnapStatus: 11,
  MsgCheckQuorum: 12,
  MsgTransferLeader: 13,
  MsgTimeoutNow: 14,
  MsgReadIndex: 15,
  MsgReadIndexResp: 16,
  MsgPreVote: 17,
  MsgPreVoteResp: 18,
} as const;

export const MessageTypeName: Record<number, string> = Object.fromEntries(
  Object.entries(MessageType).map(([k, v]) => [v, k]),
);

export interface Message {
  type: number;
  to: bigint;
  from: bigint;
  term: number;
  logTerm: number;
  index: number;
  entries: Entry[];
  commit: number;
  snapshot: Snapshot | null;
  reject: boolean;
  rejectHint: number;
  context: Buffer | null;
}

export const StateType = { Follower: 0, Candidate: 1, Leader: 2, PreCandidate: 3 } as const;
export const StateTypeName: Record<number, string> = {
  0: 'StateFollower',
  1: 'StateCandidate',
  2: 'StateLeader',
  3: 'StatePreCandidate',
};

export interface SoftState {
  lead: bigint;
  raftState: number;
}

export interface ReadState {
  index: number;
  requestCtx: Buffer;
}

export interface Ready {
  softState: SoftState | null;
  hardState: HardState | null;
  readStates: ReadState[];
  entries: Entry[];
  snapshot: Snapshot | null;
  committedEntries: Entry[];
  messages: Message[];
  mustSync: boolean;
}

export const ConfChangeType = { AddNode: 0, RemoveNode: 1, UpdateNode: 2, AddLearnerNode: 3 } as const;

/** etcd's raftpb.ConfChange (v1). `id` is the proposer's request ID (etcd waits on it); optional here. */
export interface ConfChange {
  id?: bigint;
  type: number;
  nodeId: bigint;
  context: Buffer | null;
}

export interface RaftLogger {
  info(msg: string, f?: object): void;
  warn(msg: string, f?: object): void;
}

export interface RaftConfig {
  id: bigint;
  /** Ticks without leader contact before a follower campaigns (randomized in [electionTick, 2*electionTick)). */
  electionTick: number;
  heartbeatTick: number;
  storage: import('./storage').Storage;
  /** Last index the state machine has applied (only when restarting). */
  applied: number;
  /** Upper bound of one MsgApp's entries; 0 means one entry per message. */
  maxSizePerMsgBytes: number;
  maxInflightMsgs: number;
  /**
   * Bound on the entry bytes of the MsgApps in flight to one follower (etcd-raft's MaxInflightBytes);
   * 0 or absent means no bound but the message count.
   */
  maxInflightBytes?: number;
  /** Bound on the leader's uncommitted log tail; 0 means unbounded. */
  maxUncommittedEntriesSizeBytes: number;
  /** Bound on committed entries per Ready; defaults to maxSizePerMsgBytes (as etcd). */
  maxCommittedSizePerReadyBytes?: number;
  checkQuorum: boolean;
  preVote: boolean;
  /** A leader removed from (or demoted in) the configuration steps down; default true (etcd 3.6). */
  stepDownOnRemoval?: boolean;
  /** Uniform in [0, 1); the only source of randomness. */
  random: () => number;
  logger?: RaftLogger;
}

export interface ProgressStatus {
  match: number;
  next: number;
  state: number;
  recentActive: boolean;
  isLearner: boolean;
}

export interface RaftStatus {
  id: bigint;
  term: number;
  vote: bigint;
  commit: number;
  lead: bigint;
  raftState: number;
  applied: number;
  progress: Map<bigint, ProgressStatus> | null;
  leadTransferee: bigint;
}

export const NONE = 0n;
/** "No size limit" for entry slices. */
export const NO_LIMIT = Number.MAX_SAFE_INTEGER;

export function emptyConfState(): ConfState {
  return { voters: [], learners: [], votersOutgoing: [], learnersNext: [], autoLeave: false };
}

export function emptySnapshot(): Snapshot {
  return { data: Buffer.alloc(0), metadata: { index: 0, term: 0, confState: emptyConfState() } };
}

export function isEmptySnapshot(s: Snapshot | null): boolean {
  return s === null || s.metadata.index === 0;
}

export function isEmptyHardState(hs: HardState): boolean {
  return hs.term === 0 && hs.vote === 0n && hs.commit === 0;
}

export function hardStateEqual(a: HardState, b: HardState): boolean {
  return a.term === b.term && a.vote === b.vote && a.commit === b.commit;
}

export function newMessage(fields: Partial<Message> & { type: number }): Message {
  return {
    to: 0n,
    from: 0n,
    term: 0,
    logTerm: 0,
    index: 0,
    entries: [],
    commit: 0,
    snapshot: null,
    reject: false,
    rejectHint: 0,
    context: null,
    ...fields,
  };
}

export function isLocalMsg(t: number): boolean {
  return (
    t === MessageType.MsgHup ||
    t === MessageType.MsgBeat ||
    t === MessageType.MsgUnreachable ||
    t === MessageType.MsgSnapStatus ||
    t === MessageType.MsgCheckQuorum
  );
}

export function isResponseMsg(t: number): boolean {
  return (
    t === MessageType.MsgAppResp ||
    t === MessageType.MsgVoteResp ||
    t === MessageType.MsgHeartbeatResp ||
    t === MessageType.MsgUnreachable ||
    t === MessageType.MsgPreVoteResp
  );
}

function varintLen(n: number): number {
  let len = 1;
  while (n >= 128) {
    n = Math.floor(n / 128);
    len++;
  }
  return len;
}

/** Protobuf-encoded size of an Entry, used for etcd's byte limits on messages and Readys. */
export function entrySizeBytes(e: Entry): number {
  let size = 1 + varintLen(e.type) + 1 + varintLen(e.term) + 1 + varintLen(e.index);
  size += 1 + varintLen(e.data.length) + e.data.length;
  return size;
}

/** Entry data bytes only: what etcd counts against maxUncommittedEntriesSize. */
export function payloadSizeBytes(ents: readonly Entry[]): number {
  let s = 0;
  for (const e of ents) s += e.data.length;
  return s;
}

/** Longest prefix (at least one entry) whose encoded size stays within maxSizeBytes. */
export function limitSize(ents: Entry[], maxSizeBytes: number): Entry[] {
  if (ents.length === 0) return ents;
  let size = entrySizeBytes(ents[0]!);
  let limit = 1;
  for (; limit < ents.length; limit++) {
    size += entrySizeBytes(ents[limit]!);
    if (size > maxSizeBytes) break;
  }
  return limit === ents.length ? ents : ents.slice(0, limit);
}

export function compareIds(a: bigint, b: bigint): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

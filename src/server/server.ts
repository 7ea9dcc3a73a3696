// EtcdServer: turns client requests into Raft proposals and reads, waits for them to be
// applied, and answers with etcd's headers and errors. It owns the node loop, the applier and
// the stores of one member.
import assert from 'node:assert';
import type * as grpc from '@grpc/grpc-js';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { assertLmdbFile, Backend, MAX_BATCH_INTERVAL_MS, MAX_BATCH_LIMIT } from '../backend/backend';
import { Code, EtcdError, Errors, etcdError, type ErrorName } from '../errors';
import { Lessor, MAX_LEASE_TTL_SEC } from '../lease/lessor';
import { formatGoDurationMs, type LogFields, type Logger } from '../log';
import type { EtcdMetrics } from '../metrics';
import { MvccStore } from '../mvcc/store';
import { decodeInternalRequest, encodeInternalRequest } from '../pb/internal';
import type * as pb from '../pb/types';
import { ConfChangeType, EntryType, MemoryStorage, RawNode, StateType, decodeConfChange } from '../raft';
import type { ConfChange, Entry, Message, ReadState, Snapshot, SoftState } from '../raft';
import { assertWalDirNotEtcd, Wal } from '../wal/wal';
import { writeEtcdSnapshotOffThread } from './etcd_snapshot';
import { removeSnapshotDbs, saveSnapshotDb, snapshotDbPath } from './snapshot_db';
import { armFailpoints } from '../runtime/failpoints';
import { mkdirDurable } from '../runtime/fsync';
import { lockDir, type DirLock } from '../runtime/dir_lock';
import { BCRYPT_MAX_COST, BCRYPT_MIN_COST } from '../auth/bcrypt';
import { DEFAULT_BCRYPT_COST } from '../auth/password';
import { createCompactor, type Compactor } from '../compactor';
import { ForwardFailed, PeerTransport, fetchMemberInfo, type LeaseTtl, type TransportMetrics } from '../transport';
import { MessageType } from '../raft';
import { WatchHub } from '../watch';
import type { WatchSink, WatchStream } from '../watch/types';
import { Applier, type ApplyResult } from '../apply/applier';
import { applyRange, applyRangeForWireInSteps } from '../apply/kv';
import { AlarmType, Alarms } from '../alarm/alarms';
import { Members, type Member } from '../membership/members';
import { computeClusterId, computeMemberId, idToHex } from '../membership/ids';
import { IdGenerator } from './idgen';
import { forwardedError, LeaderClient, LeaderUnreachable } from './leader_client';
import { RaftNode, residentLogBytes } from './raft_node';
import type { CallAuth, EtcdServerApi } from './types';
import { AuthStore, type AuthInfo } from '../auth/store';
import { AuthService } from '../auth/service';
import { tokenProviderFromSpec, type TokenProvider } from '../auth/tokens';
import { AppliedWaiter, WaitRegistry } from './wait';
import { describeInternalRequest, describeRange } from './slow_request';

export interface ServerConfig {
  name: string;
  dataDir: string;
  initialAdvertisePeerUrls: string[];
  advertiseClientUrls: string[];
  /** name -> peer URLs */
  initialCluster: Map<string, string[]>;
  initialClusterState: 'new' | 'existing';
  /** --wal-dir; empty: <dataDir>/member/wal. */
  walDir?: string;
  /** --unsafe-no-fsync: neither the WAL nor the backend fsyncs (a power loss can lose everything). */
  unsafeNoFsync?: boolean;
  /** --bcrypt-cost for password hashes; default 10. */
  bcryptCost?: number;
  initialClusterToken: string;
  maxRequestBytes: number;
  maxTxnOps: number;
  quotaBackendBytes: number;
  snapshotCount: number;
  /** Entries kept after a snapshot for slow followers (etcd's SnapshotCatchUpEntries, 5000). */
  snapshotCatchUpEntries: number;
  heartbeatIntervalMs: number;
  electionTimeoutMs: number;
  watchProgressNotifyIntervalMs: number;
  /** e.g. "3.6.5" */
  version: string;
  clusterVersion: string;
  autoCompaction: { mode: 'periodic' | 'revision'; retentionMs: number; retentionRevisions: number };
  /** Channel credentials towards peers (https:// peer URLs are `secure`); insecure when absent. */
  peerCredentials?: (secure: boolean) => grpc.ChannelCredentials;
  /** Channel credentials towards another member's client URL (lease forwarding to the leader). */
  clientCredentials?: (secure: boolean) => grpc.ChannelCredentials;
  /** --auth-token ("simple" or "jwt,...") and --auth-token-ttl; simple tokens, 300 s, when absent. */
  authToken?: string;
  authTokenTtlSec?: number;
  /** --warning-apply-duration: applies (and read-only ranges) slower than this are logged and counted; 100 ms when absent. */
  warningApplyDurationMs?: number;
  /** --backend-batch-interval: longest time applied writes share one LMDB transaction; 100 ms when absent or 0. */
  backendBatchIntervalMs?: number;
  /** --backend-batch-limit: apply batches in one LMDB transaction at most; 10000 when absent or 0. */
  backendBatchLimit?: number;
}

/** Bounds. */
const MAX_PENDING_PROPOSALS = 10_000;
const MAX_INBOX = 20_000;
/**
 * Entry bytes in flight to one follower (etcd-raft's MaxInflightBytes; maxInflightMsgs 512 of up to
 * 1 MiB each would allow 512 MiB). A follower catching up is sent entries read back from the WAL
 * (RESIDENT_LOG_BYTES), so each message in flight holds its own copy; this keeps those copies, and
 * the peer's send queue (64 MiB), bounded. A follower that keeps up has far less in flight.
 * Measured (a follower down for 1000 puts of 100 KiB, then restarted; the leader's peak resident
 * size during the catch-up): 32 MiB 263 MB in 3.2 s, 8 MiB 222 MB in 3.6 s; with every entry kept
 * in memory as before, 334 MB in 3.3 s.
 */
const MAX_INFLIGHT_BYTES = 8 * 1024 * 1024;
const MAX_READ_WAITERS = 100_000;
/** etcd's maxGapBetweenApplyAndCommitIndex. */
const MAX_APPLY_GAP = 5_000;
/**
 * Bounds on committed entries that wait for a defragmentation's copy (above them the copy is
 * given up and they are applied). The apply gap refuses new proposals well before the count.
 */
const MAX_DEFERRED_APPLY_ENTRIES = 50_000;
const MAX_DEFERRED_APPLY_BYTES = 256 * 1024 * 1024;
const LEASE_REVOKES_PER_ROUND = 1_000;
const LEASE_CHECK_INTERVAL_MS = 500;
/** etcd's --backend-batch-interval default: how long applied writes may share one LMDB transaction. */
const DEFAULT_BACKEND_BATCH_INTERVAL_MS = 100;
/** etcd's default --warning-apply-duration. */
const DEFAULT_WARNING_APPLY_MS = 100;
/** etcd's readIndexRetryTime. */
const READ_INDEX_RETRY_MS = 500;

/** A failed forward to the leader is tried again after this long, or sooner when the leader changes. */
const FORWARD_RETRY_MS = 25;

/** A raft proposal refused by the core (etcd's client sees raft's own error, code Unknown). */
function droppedError(e: Error): EtcdError {
  return new EtcdError(Code.Unknown, e.message);
}

/**
 * An error a forward to the leader may be retried after: the leader unreachable (a grpc-js
 * failure, never shown to a client) or one of etcd's Unavailable answers (no leader, leader
 * changed, timed out). etcd's forwarding loops end early only on an answer such as "lease not found".
 */
function retryableForwardError(e: unknown): boolean {
  if (!(e instanceof EtcdError)) return true;
  return e.code === Code.Unavailable || e.code === Code.DeadlineExceeded || e.code === Code.Canceled;
}

export class EtcdServer implements EtcdServerApi {
  readonly limits: { maxRequestBytes: number; maxTxnOps: number };
  readonly memberId: bigint;
  readonly clusterId: bigint;

  private node!: RaftNode;
  private readonly proposals: WaitRegistry<string, ApplyResult>;
  private readonly appliedWaiter = new AppliedWaiter(MAX_READ_WAITERS);
  private readonly idGen: IdGenerator;
  private appliedIndex: number;
  private committedIndex = 0;
  private term = 0;
  private leaderId = 0n;
  private isLeader = false;
  private snapshotIndex: number;
  private stopped = false;
  private leaseTimer: NodeJS.Timeout | null = null;
  private readonly revokesInFlight = new Set<bigint>();
  /** Linearizable reads waiting for the next ReadIndex. */
  private readWaiters: Array<{ resolve(): void; reject(e: Error): void }> = [];
  private readInFlight: { ctx: string; waiters: Array<{ resolve(): void; reject(e: Error): void }>; timer: NodeJS.Timeout } | null = null;
  private readonly leaderWaiters: Array<() => void> = [];
  /** Callers waiting for the leader to change (bounded by MAX_READ_WAITERS; each also has a timer). */
  private readonly leaderChangeWaiters = new Set<() => void>();
  /** performance.now() at which this member last became leader (etcd's leadElectedTime). */
  private leadElectedAtMs = -Infinity;
  /** etcd's ElectionTicks x TickMs. */
  private readonly electionMs: number;
  /** The error of a proposal that outlived the request timeout (one function for all of them). */
  private readonly proposalTimeout: (registeredAtMs: number) => Error;
  private publishedAttributes = false;
  private loggedCapabilities = false;
  readonly requestTimeoutMs: number;
  private readonly warningApplyMs: number;

  private constructor(
    readonly cfg: ServerConfig,
    readonly log: Logger,
    readonly backend: Backend,
    readonly mvcc: MvccStore,
    readonly lessor: Lessor,
    readonly watchHub: WatchHub,
    readonly members: Members,
    readonly alarms: Alarms,
    private readonly applier: Applier,
    private readonly wal: Wal,
    private readonly storage: MemoryStorage,
    identity: { memberId: bigint; clusterId: bigint },
    appliedIndex: number,
    snapshotIndex: number,
  ) {
    this.limits = { maxRequestBytes: cfg.maxRequestBytes, maxTxnOps: cfg.maxTxnOps };
    this.memberId = identity.memberId;
    this.clusterId = identity.clusterId;
    this.appliedIndex = appliedIndex;
    this.committedIndex = appliedIndex;
    this.snapshotIndex = snapshotIndex;
    this.idGen = new IdGenerator(this.memberId, Date.now());
    // etcd's ReqTimeout: 5 s plus two election timeouts.
    this.requestTimeoutMs = 5000 + 2 * cfg.electionTimeoutMs;
    this.electionMs = Math.max(2, Math.round(cfg.electionTimeoutMs / cfg.heartbeatIntervalMs)) * cfg.heartbeatIntervalMs;
    this.proposalTimeout = (registeredAtMs) => this.proposeTimeoutError(registeredAtMs);
    this.warningApplyMs = cfg.warningApplyDurationMs ?? DEFAULT_WARNING_APPLY_MS;
    this.proposals = new WaitRegistry<string, ApplyResult>(MAX_PENDING_PROPOSALS, this.requestTimeoutMs);
  }

  // ---------------------------------------------------------------- start-up

  static async start(cfg: ServerConfig, log: Logger, metrics: EtcdMetrics | null = null): Promise<EtcdServer> {
    armFailpoints(process.env['GOFAIL_FAILPOINTS']);
    const memberDir = path.join(cfg.dataDir, 'member');
    // --wal-dir puts the log elsewhere (a dedicated disk), as etcd's does.
    const walDir = cfg.walDir ? cfg.walDir : path.join(memberDir, 'wal');
    const snapDir = path.join(memberDir, 'snap');
    // One server per data directory (and WAL directory): a second one waits, as etcd's does.
    mkdirDurable(cfg.dataDir, 0o700, cfg.unsafeNoFsync === true);
    const locks = [await lockDir(cfg.dataDir, log)];
    if (cfg.walDir) {
      mkdirDurable(walDir, 0o700, cfg.unsafeNoFsync === true);
      locks.push(await lockDir(walDir, log));
    }
    // A data directory of etcd itself has the same layout: refuse it before anything is written.
    assertWalDirNotEtcd(walDir);
    assertLmdbFile(path.join(snapDir, 'db'));
    mkdirDurable(snapDir, 0o700, cfg.unsafeNoFsync === true);
    const wal = Wal.open(walDir, { entryData: 'on-disk', unsafeNoFsync: cfg.unsafeNoFsync });
    const haveWal = wal.hasIdentity();
    // etcd's defaults when the flags are 0 or absent (the limit's is the backend's own); larger
    // values are held to the backend's bounds (its open transaction keeps its dirty pages in memory).
    const backend = Backend.open(path.join(snapDir, 'db'), {
      batchIntervalMs: Math.min(cfg.backendBatchIntervalMs || DEFAULT_BACKEND_BATCH_INTERVAL_MS, MAX_BATCH_INTERVAL_MS),
      batchLimit: cfg.backendBatchLimit ? Math.min(cfg.backendBatchLimit, MAX_BATCH_LIMIT) : undefined,
      unsafeNoFsync: cfg.unsafeNoFsync,
    });
    // A leader's snapshot the WAL recorded but the backend did not take yet (the power went in
    // between): its database waits in the snap directory, fsynced before the WAL was written.
    const walSnapshot = haveWal ? wal.readAll().snapshot : null;
    const pendingSnapDb = walSnapshot ? snapshotDbPath(snapDir, walSnapshot.index) : null;
    if (walSnapshot && pendingSnapDb && backend.consistentIndex() < walSnapshot.index && fs.existsSync(pendingSnapDb)) {
      assertLmdbFile(pendingSnapDb);
      log.info('recovering v3 backend from snapshot', { 'snapshot-index': walSnapshot.index, 'backend-consistent-index': backend.consistentIndex(), path: pendingSnapDb });
      await backend.installSnapshotFile(pendingSnapDb);
      log.info('recovered v3 backend from snapshot', { 'backend-size-bytes': backend.sizeBytes(), 'consistent-index': backend.consistentIndex() });
    }
    // Anything else there is a snapshot received but never recorded, or one installed already.
    for (const f of removeSnapshotDbs(snapDir)) log.info('removed unused snapshot database', { path: f });
    const members = new Members(backend.subDb('members'), backend.subDb('members_removed'));
    const alarms = new Alarms(backend.subDb('alarm'));

    let identity: { memberId: bigint; clusterId: bigint };
    let bootstrapPeers: bigint[] | null = null;
    if (!haveWal && cfg.initialClusterState === 'existing') {
      // Joining: learn the cluster from a running member; the leader's log brings the rest.
      const joined = await fetchClusterToJoin(cfg, log);
      identity = { memberId: joined.memberId, clusterId: joined.clusterId };
      backend.batch(() => {
        for (const m of joined.members) members.add(m);
      });
      await backend.flushed();
      await wal.create({ memberId: joined.memberId, clusterId: joined.clusterId, name: cfg.name });
      log.info('joining an existing cluster', { 'local-member-id': idToHex(joined.memberId), 'cluster-id': idToHex(joined.clusterId) });
    } else if (!haveWal) {
      const all: Member[] = [];
      for (const urls of cfg.initialCluster.values()) {
        all.push({ id: computeMemberId(urls, cfg.initialClusterToken), name: '', peerUrls: urls, clientUrls: [], isLearner: false });
      }
      const self = cfg.initialCluster.get(cfg.name);
      if (!self) throw new Error(`couldn't find local name "${cfg.name}" in the initial cluster configuration`);
      const memberId = computeMemberId(self, cfg.initialClusterToken);
      const clusterId = computeClusterId(all.map((m) => m.id));
      identity = { memberId, clusterId };
      backend.batch(() => {
        for (const m of all) members.add(m);
      });
      await backend.flushed();
      await wal.create({ memberId, clusterId, name: cfg.name });
      bootstrapPeers = all.map((m) => m.id);
      log.info('starting local member', { 'local-member-id': idToHex(memberId), 'cluster-id': idToHex(clusterId) });
    } else {
      const c = wal.readAll();
      identity = { memberId: c.identity.memberId, clusterId: c.identity.clusterId };
      log.info('restarting local member', {
        'cluster-id': idToHex(identity.clusterId),
        'local-member-id': idToHex(identity.memberId),
        'commit-index': c.hardState.commit,
      });
    }

    const mvcc = new MvccStore(backend);
    const lessor = new Lessor({
      db: backend.subDb('lease'),
      nowMs: () => Date.now(),
      // etcd: ceil((3 * electionTicks / 2) * heartbeat), in seconds.
      minTtlSec: Math.ceil((Math.floor((3 * Math.floor(cfg.electionTimeoutMs / cfg.heartbeatIntervalMs)) / 2) * cfg.heartbeatIntervalMs) / 1000),
      maxTtlSec: MAX_LEASE_TTL_SEC,
    });
    lessor.recover(mvcc.keysWithLease());
    const watchHub = new WatchHub(mvcc, { progressNotifyIntervalMs: cfg.watchProgressNotifyIntervalMs });
    mvcc.onEvents((events, rev) => watchHub.notify(events, rev));
    mvcc.eventsNeedPrevKv = () => watchHub.wantsPrevKv();
    const authStore = new AuthStore(backend.subDb('auth'));
    const tokens = tokenProviderFromSpec(cfg.authToken ?? 'simple', cfg.authTokenTtlSec ?? 300);
    if (authStore.isEnabled()) tokens.enable();
    authStore.onEnabledChange((en) => (en ? tokens.enable() : tokens.disable()));
    authStore.onUserInvalidated((name) => tokens.invalidateUser(name));
    const applier = new Applier({ backend, mvcc, lessor, alarms, members, log, auth: { store: authStore, tokens } });

    // Raft storage from the WAL.
    const storage = new MemoryStorage(wal);
    const contents = wal.readAll();
    let snapshotIndex = 0;
    if (contents.snapshot) {
      storage.applySnapshot({ data: Buffer.alloc(0), metadata: contents.snapshot });
      snapshotIndex = contents.snapshot.index;
    }
    const applied = backend.consistentIndex();
    // Opened with the entries' data left on disk (nothing was written since, which would replay it
    // into memory).
    assert.equal(contents.entries.length, 0, 'WAL entries read into memory at start-up');
    const heads = contents.entryHeads;
    const lastWalIndex = heads.length > 0 ? heads[heads.length - 1].index : snapshotIndex;
    // The backend may be ahead of the log: a leader's snapshot database carries whatever the leader
    // had applied when it was taken, often past the snapshot's index, and the power may go before
    // this member's log holds those entries again. They were committed (the leader applied them),
    // so nothing is lost: Raft starts at the log's end and the leader sends them again; applying
    // them skips what the backend has (etcd does the same). Own entries are fsynced before they are
    // applied, so only a leader's snapshot can put the backend ahead.
    if (applied > lastWalIndex) {
      log.info('backend is ahead of the WAL (a leader snapshot carried entries past its index); catching up from the leader', {
        'backend-consistent-index': applied,
        'last-wal-index': lastWalIndex,
      });
    }
    // The log keeps no entry at or below its snapshot: a backend behind it (lost, or replaced by an
    // older copy) cannot be brought up to date from here. etcd refuses to start too; serving less
    // than was acknowledged is worse than not serving.
    if (applied < snapshotIndex) {
      throw new Error(
        `failed to recover v3 backend from snapshot: the database ${path.join(snapDir, 'db')} has applied index ${applied}, ` +
          `behind the WAL's snapshot at index ${snapshotIndex} (the database was lost or replaced by an older copy); ` +
          'restore the member from a snapshot or remove it and add it back to the cluster',
      );
    }
    // A commit-index-only hard state is written without fsync (etcd-raft's MustSync), so after a
    // crash the WAL's commit may trail what was applied; applied entries were committed.
    const hardState = { ...contents.hardState, commit: Math.max(contents.hardState.commit, Math.min(applied, lastWalIndex)) };
    storage.setHardState(hardState);
    // The log's entries stay in the WAL until Raft asks for their data: entries not yet applied,
    // and entries a follower lacks.
    storage.appendFromLog(heads);
    // Raft starts from what the backend has applied, not from the snapshot: etcd hands every entry
    // since the snapshot to its apply loop again, which skips all but their membership changes. Of
    // those entries that is all that lives outside the backend (in the Raft core's configuration),
    // so they are applied to the core below; reading back the rest (the whole log since the
    // snapshot, usually) would only churn through memory.
    const raftApplied = Math.min(Math.max(applied, snapshotIndex), lastWalIndex);

    const electionTick = Math.max(2, Math.round(cfg.electionTimeoutMs / cfg.heartbeatIntervalMs));
    const raw = new RawNode({
      id: identity.memberId,
      electionTick,
      heartbeatTick: 1,
      storage,
      applied: raftApplied,
      maxSizePerMsgBytes: 1024 * 1024,
      maxInflightMsgs: 512,
      maxInflightBytes: MAX_INFLIGHT_BYTES,
      maxUncommittedEntriesSizeBytes: 1 << 30,
      checkQuorum: true,
      preVote: true,
      random: Math.random,
      logger: { info: (m: string, f?: object) => log.debug(m, f as LogFields), warn: (m: string, f?: object) => log.warn(m, f as LogFields) },
    });
    if (bootstrapPeers) raw.bootstrap(bootstrapPeers);
    for (const h of heads) {
      if (h.index > raftApplied) break;
      if (h.type === EntryType.Normal) continue;
      // Ours and etcd 3.4's members propose only the first form.
      if (h.type !== EntryType.ConfChange) assert.fail(`WAL entry ${h.index} has entry type ${h.type}`);
      raw.applyConfChange(decodeConfChange(wal.readEntryData(h.index, h.term)));
    }

    const server = new EtcdServer(cfg, log, backend, mvcc, lessor, watchHub, members, alarms, applier, wal, storage, identity, raftApplied, snapshotIndex);
    server.dirLocks = locks;
    server.metrics = metrics;
    backend.commitObserver = metrics ? (seconds) => metrics.disk.backendCommitDurationSeconds.observe(seconds) : null;
    backend.commitFailed = (e) => server.fatal(e);
    server.authStore = authStore;
    server.tokens = tokens;
    server.auth = new AuthService({
      store: authStore,
      tokens,
      propose: (req, ai) => server.propose(req as pb.InternalRaftRequest, ai),
      linearizableRead: () => server.linearizableReadNotify(),
      header: () => server.header(),
      bcryptCost: bcryptCostOf(cfg.bcryptCost, log),
    });
    if (metrics) server.instrument(metrics);
    server.transport = new PeerTransport({
      memberId: identity.memberId,
      clusterId: identity.clusterId,
      log,
      onMessage: (m) => {
        server.node.step(m);
      },
      credentials: cfg.peerCredentials,
      metrics: metrics ? peerMetrics(metrics, identity.memberId) : undefined,
      onPeerUnreachable: (id) => server.node.enqueue((r) => r.reportUnreachable(id)),
      onSnapshotStatus: (id, failed) => server.node.enqueue((r) => r.reportSnapshot(id, failed)),
      isMemberRemoved: (id) => members.isRemoved(id),
      membersJson: () => membersToJson(members.list()),
      leases: {
        renew: (id) => server.renewForwarded(id),
        timeToLive: (id) => server.timeToLiveForwarded(id),
      },
      onRemovedFromCluster: () => {
        log.warn('the local member has been permanently removed from the cluster', { 'local-member-id': idToHex(identity.memberId) });
        void server.stop().then(() => process.exit(0));
      },
    });
    for (const m of members.list()) {
      if (m.id !== identity.memberId) server.transport.addPeer(m.id, m.peerUrls);
    }
    server.node = new RaftNode(raw, storage, wal, {
      onSoftState: (ss) => server.onSoftState(ss),
      onReadStates: (rs) => server.onReadStates(rs),
      applyEntries: (ents) => server.applyEntries(ents),
      send: (msgs) => server.sendToPeers(msgs),
      afterAdvance: () => server.maybeSnapshot(),
      saveSnapshot: (snap) => server.saveSnapshot(snap),
      installSnapshot: (snap) => server.installSnapshot(snap),
      fatal: (e) => server.fatal(e),
      // etcd observes its WAL fsync histogram per fdatasync: saves that needed none (a commit
      // index moving on) are not fsyncs.
      onWalSaved: (bytes, seconds, synced, writeSeconds) => {
        const m = server.metrics;
        if (m === null || bytes === 0) return;
        m.disk.walWriteBytes.inc(bytes);
        m.disk.walWriteDurationSeconds.observe(writeSeconds);
        if (synced) m.disk.walFsyncDurationSeconds.observe(Math.max(0, seconds - writeSeconds));
      },
      proposalsWaiting: () => server.proposals.size,
    }, { tickMs: cfg.heartbeatIntervalMs, maxInbox: MAX_INBOX, log, residentLogBytes: residentLogBytes() });
    // Rebuilding the key index read the whole file through LMDB's map: unmap what it left
    // resident before anything is served (100k keys: ~34 MiB).
    backend.releaseMappedPagesAfterStart();
    server.node.start();
    // With nothing to apply no apply batch will look for a lone voter's quick election.
    if (raftApplied > 0 && hardState.commit <= raftApplied) server.maybeCampaignAlone();
    server.leaseTimer = setInterval(() => server.revokeExpiredLeases(), LEASE_CHECK_INTERVAL_MS);
    server.compactor = createCompactor(cfg.autoCompaction.mode, {
      retentionMs: cfg.autoCompaction.retentionMs,
      retentionRevisions: cfg.autoCompaction.retentionRevisions,
      target: server,
      revs: mvcc,
      log,
    });
    server.compactor?.run();
    return server;
  }

  /** Raft messages to other members (set once at start). */
  transport!: PeerTransport;
  /** Held from start to stop: the data (and WAL) directory is this server's. */
  private dirLocks: DirLock[] = [];
  private metrics: EtcdMetrics | null = null;
  private authStore!: AuthStore;
  private tokens!: TokenProvider;
  auth!: AuthService;
  private compactor: Compactor | null = null;
  private reportedOps = { puts: 0, deletes: 0, compactedKeys: 0, eventsSent: 0 };
  private proposalsFailed = 0;

  /** Gauges are sampled at scrape time; counters are bumped where things happen. */
  private instrument(m: EtcdMetrics): void {
    m.setServerId(idToHex(this.memberId));
    m.setClusterVersion(this.cfg.clusterVersion.split('.').slice(0, 2).join('.'));
    m.server.quotaBackendBytes.set(this.cfg.quotaBackendBytes);
    m.beforeScrape(() => {
      m.server.hasLeader.set(this.leaderId !== 0n ? 1 : 0);
      m.server.isLeader.set(this.isLeader ? 1 : 0);
      m.server.isLearner.set(this.members.get(this.memberId)?.isLearner ? 1 : 0);
      m.server.proposalsCommitted.set(this.committedIndex);
      m.server.proposalsApplied.set(this.appliedIndex);
      m.server.proposalsPending.set(this.proposals.size);
      m.mvcc.dbTotalSizeInBytes.set(this.backend.sizeBytes());
      m.mvcc.dbTotalSizeInUseInBytes.set(this.backend.sizeInUseBytes());
      m.mvcc.keysTotal.set(this.mvcc.keyCount());
      m.mvcc.currentRevision.set(this.mvcc.currentRevision());
      m.mvcc.compactRevision.set(this.mvcc.compactRevision());
      m.mvcc.watcherTotal.set(this.watchHub.watcherCount());
      m.mvcc.slowWatcherTotal.set(this.watchHub.slowWatcherCount());
      // Counted where they happen in the store (txn puts and lease-revoke deletes included).
      const ops = this.mvcc.ops;
      const sent = this.watchHub.eventsSent;
      m.mvcc.putTotal.inc(ops.puts - this.reportedOps.puts);
      m.mvcc.deleteTotal.inc(ops.deletes - this.reportedOps.deletes);
      m.mvcc.dbCompactionKeysTotal.inc(ops.compactedKeys - this.reportedOps.compactedKeys);
      m.mvcc.eventsTotal.inc(sent - this.reportedOps.eventsSent);
      this.reportedOps = { puts: ops.puts, deletes: ops.deletes, compactedKeys: ops.compactedKeys, eventsSent: sent };
      m.mvcc.totalPutSizeInBytes.set(ops.putBytes);
      m.mvcc.dbCompactionLast.set(ops.lastCompactionEpochSec);
      m.mvcc.watchStreamTotal.set(this.watchHub.streamCount());
      m.mvcc.dbOpenReadTransactions.set(this.backend.openReadTransactions());
    });
  }

  private sendToPeers(msgs: Message[]): void {
    const out: Message[] = [];
    for (const m of msgs) {
      if (m.type === MessageType.MsgSnap) this.sendSnapshot(m);
      else out.push(m);
      if (m.type === MessageType.MsgHeartbeat) this.observeHeartbeat(m.to);
    }
    if (out.length > 0) this.transport.send(out);
  }

  /** When the last heartbeat to each member was sent (performance.now() ms); cleared on every soft-state change. */
  private readonly heartbeatSentAtMs = new Map<bigint, number>();

  /**
   * etcd's timeout detector over heartbeats: a leader whose next heartbeat to a member leaves
   * more than two heartbeat intervals after the last one was too busy (slow disk, long applies)
   * to tick on time, and followers may start an election.
   */
  private observeHeartbeat(to: bigint): void {
    const now = performance.now();
    const last = this.heartbeatSentAtMs.get(to);
    this.heartbeatSentAtMs.set(to, now);
    if (last === undefined) return;
    const expectedMs = 2 * this.cfg.heartbeatIntervalMs;
    const exceededMs = now - last - expectedMs;
    if (exceededMs <= 0) return;
    this.metrics?.server.heartbeatSendFailures.inc();
    this.log.warn('leader failed to send out heartbeat on time; took too long, leader is overloaded likely from slow disk', {
      to: idToHex(to),
      'heartbeat-interval': formatGoDurationMs(this.cfg.heartbeatIntervalMs),
      'expected-duration': formatGoDurationMs(expectedMs),
      'exceeded-duration': formatGoDurationMs(exceededMs),
    });
  }

  /** etcd's warnOfExpensiveGenericRequest: logged and counted in etcd_server_slow_apply_total. */
  private warnSlowApply(tookMs: number, prefix: string, request: string, err: Error | null, response = ''): void {
    this.metrics?.server.slowApply.inc();
    const fields: LogFields = {
      took: formatGoDurationMs(tookMs),
      'expected-duration': formatGoDurationMs(this.warningApplyMs),
      prefix,
      request,
      response,
      ...(err ? { error: err.message } : {}),
    };
    this.log.warn('apply request took too long', fields);
  }

  private readonly snapshotsInFlight = new Set<bigint>();

  /**
   * A follower too far behind gets the whole applied state: a fresh copy of the backend, with
   * Raft metadata at the index it reflects at least (etcd's merged snapshot message). Entries
   * the copy already contains are replayed as no-ops on the follower (consistent index).
   */
  private sendSnapshot(m: Message): void {
    if (this.snapshotsInFlight.has(m.to)) return;
    this.snapshotsInFlight.add(m.to);
    const index = this.appliedIndex;
    let term: number;
    try {
      term = this.storage.term(index);
    } catch {
      this.snapshotsInFlight.delete(m.to);
      this.node.enqueue((r) => r.reportSnapshot(m.to, true));
      return;
    }
    const confState = this.confState();
    void (async () => {
      const snap = await this.backend.openSnapshot();
      const chunks: Buffer[] = [];
      for await (const c of snap.chunks) chunks.push(c);
      const data = Buffer.concat(chunks);
      this.log.info('sending database snapshot', { 'remote-peer-id': idToHex(m.to), 'snapshot-index': index, size: data.length });
      this.transport.send([{ ...m, snapshot: { data, metadata: { index, term, confState } } }]);
    })()
      .catch((e) => {
        this.log.warn('failed to send database snapshot', { 'remote-peer-id': idToHex(m.to), error: String(e) });
        this.node.enqueue((r) => r.reportSnapshot(m.to, true));
      })
      .finally(() => this.snapshotsInFlight.delete(m.to));
  }

  /** Replace the applied state with the leader's copy (called by the node loop before the WAL saves it). */
  /** The database of a leader's snapshot, checked and saved durably beside `db` (before the WAL records the snapshot). */
  async saveSnapshot(snap: Snapshot): Promise<void> {
    const data = snap.data;
    const SHA_BYTES = 32;
    if (data.length <= SHA_BYTES) throw new Error(`snapshot at index ${snap.metadata.index} carries no database`);
    const db = data.subarray(0, data.length - SHA_BYTES);
    const sum = createHash('sha256').update(db).digest();
    if (!sum.equals(data.subarray(data.length - SHA_BYTES))) throw new Error('snapshot database checksum mismatch');
    this.pendingSnapshotDb = await saveSnapshotDb(path.dirname(this.backend.filePath), snap.metadata.index, db, this.cfg.unsafeNoFsync === true);
  }

  /** The file saveSnapshot wrote, until installSnapshot renames it over the backend. */
  private pendingSnapshotDb: string | null = null;

  /** Replaces the state with the leader's snapshot saved by saveSnapshot (the WAL has recorded it by now). */
  async installSnapshot(snap: Snapshot): Promise<void> {
    const file = this.pendingSnapshotDb;
    assert(file !== null && file === snapshotDbPath(path.dirname(this.backend.filePath), snap.metadata.index), `snapshot ${snap.metadata.index} installed before its database was saved`);
    this.pendingSnapshotDb = null;
    // Entries waiting for a defragmentation come before the snapshot: apply them first.
    if (this.deferredApplies !== null) this.applyDeferredWithoutWaiting();
    this.log.info('applying snapshot', { 'incoming-leader-snapshot-index': snap.metadata.index, 'current-applied-index': this.appliedIndex });
    this.metrics?.server.snapshotApplyInProgress.set(1);
    try {
      await this.backend.installSnapshotFile(file);
    } finally {
      this.metrics?.server.snapshotApplyInProgress.set(0);
    }
    this.mvcc.reload();
    this.lessor.recover(this.mvcc.keysWithLease());
    this.members.reload();
    this.alarms.reload();
    this.authStore.reload();
    this.watchHub.restore();
    for (const m of this.members.list()) {
      if (m.id !== this.memberId && !this.transport.hasPeer(m.id)) this.transport.addPeer(m.id, m.peerUrls);
    }
    assert(this.backend.consistentIndex() >= snap.metadata.index, 'snapshot database is older than its Raft metadata');
    this.appliedIndex = snap.metadata.index;
    this.snapshotIndex = snap.metadata.index;
    this.committedIndex = Math.max(this.committedIndex, this.appliedIndex);
    this.appliedWaiter.appliedTo(this.appliedIndex);
    this.log.info('applied snapshot', { 'snapshot-index': snap.metadata.index, 'consistent-index': this.backend.consistentIndex() });
  }

  private fatal(e: unknown): void {
    this.log.error('raft loop failed; stopping the member', { error: e instanceof Error ? e.stack ?? e.message : String(e) });
    // Crashing beats serving from a state we can no longer trust.
    process.exit(1);
  }

  // ---------------------------------------------------------------- node loop hooks

  private onSoftState(ss: SoftState): void {
    const wasLeader = this.isLeader;
    this.heartbeatSentAtMs.clear();
    const leaderChanged = ss.lead !== this.leaderId;
    // etcd's newLeader: a leader is known and it is not the one known before.
    const newLeader = leaderChanged && ss.lead !== 0n;
    if (leaderChanged) {
      if (ss.lead !== 0n) {
        this.log.info('raft.node: elected leader', {
          'local-member-id': idToHex(this.memberId),
          'elected-leader-member-id': idToHex(ss.lead),
          term: this.node?.raw.status().term ?? 0,
        });
      } else {
        this.log.info('raft.node: lost leader', { 'local-member-id': idToHex(this.memberId), 'lost-leader-member-id': idToHex(this.leaderId) });
      }
      if (ss.lead !== 0n) this.metrics?.server.leaderChangesSeen.inc();
      this.leaderId = ss.lead;
    }
    this.isLeader = ss.raftState === StateType.Leader;
    if (this.isLeader && newLeader) this.leadElectedAtMs = performance.now();
    if (newLeader && this.readInFlight) {
      // etcd's read loop: a read index request outstanding when a new leader is elected fails
      // with the retryable "leader changed" (its answer may never come); queued reads go next.
      const inflight = this.readInFlight;
      this.readInFlight = null;
      clearTimeout(inflight.timer);
      this.metrics?.server.readIndexesFailed.inc();
      for (const w of inflight.waiters) w.reject(etcdError('LeaderChanged'));
      this.issueReadIndex();
    }
    if (leaderChanged && this.leaderChangeWaiters.size > 0) {
      const ws = [...this.leaderChangeWaiters];
      this.leaderChangeWaiters.clear();
      for (const w of ws) w();
    }
    if (this.isLeader && !wasLeader) {
      // A new leader must not expire leases early: give every lease a full TTL again.
      this.lessor.promote(this.cfg.electionTimeoutMs);
      this.compactor?.resume();
    } else if (!this.isLeader && wasLeader) {
      this.lessor.demote();
    }
    // Only the leader compacts (followers apply its compactions through the log).
    if (!this.isLeader && ss.lead !== 0n) this.compactor?.pause();
    if (ss.lead !== 0n) {
      const ws = this.leaderWaiters.splice(0);
      for (const w of ws) w();
      // Every member publishes its own name and client URLs once it knows a leader.
      if (!this.publishedAttributes) this.publishAttributes();
      if (!this.loggedCapabilities) {
        // etcd says this once the cluster version is known; tools (etcd's e2e harness) wait for it.
        this.loggedCapabilities = true;
        const clusterVersion = this.cfg.clusterVersion.split('.').slice(0, 2).join('.');
        if (this.isLeader) this.log.info('set initial cluster version', { 'cluster-version': clusterVersion });
        this.log.info('enabled capabilities for version', { 'cluster-version': clusterVersion });
      }
    }
  }

  private onReadStates(rs: ReadState[]): void {
    const inflight = this.readInFlight;
    if (!inflight) return;
    for (const r of rs) {
      if (r.requestCtx.toString('hex') !== inflight.ctx) {
        // The answer to a read that timed out or was asked again (etcd's read loop counts it too).
        this.metrics?.server.slowReadIndexes.inc();
        this.log.warn('ignored out-of-date read index response; local node read indexes queueing up and waiting to be in sync with leader', {
          'sent-request-id': BigInt('0x' + inflight.ctx).toString(),
          'received-request-id': r.requestCtx.length === 8 ? r.requestCtx.readBigUInt64BE().toString() : '0',
        });
        continue;
      }
      clearTimeout(inflight.timer);
      this.readInFlight = null;
      const p = this.appliedWaiter.wait(r.index, this.appliedIndex);
      const done = (): void => {
        for (const w of inflight.waiters) w.resolve();
        this.issueReadIndex();
      };
      if (p) void p.then(done);
      else {
        for (const w of inflight.waiters) w.reject(etcdError('RequestTooManyRequests'));
        this.issueReadIndex();
      }
    }
  }

  /**
   * Committed entries waiting while a defragmentation holds the backend's writes (etcd's apply
   * waits for its defragmentation too); applied in order once the hold ends. Null when none wait.
   */
  private deferredApplies: Entry[] | null = null;
  private deferredApplyBytes = 0;

  private applyEntries(entries: Entry[]): void {
    if (this.deferredApplies === null) {
      const held = this.backend.writesHeld();
      if (held === null) return this.applyEntriesNow(entries);
      this.deferredApplies = [];
      this.deferredApplyBytes = 0;
      this.applyDeferredAfter(held);
    }
    const waiting = this.deferredApplies;
    let urgent = false;
    for (const e of entries) {
      waiting.push(e);
      this.deferredApplyBytes += e.data.length;
      // A membership change reaches the Raft core only when applied, and Raft counts votes
      // and acks by it: it does not wait (etcd's raft loop waits for such an apply too).
      if (e.type !== EntryType.Normal) urgent = true;
    }
    // Proposals past the apply gap are refused as etcd does ("too many requests").
    if (waiting.length > 0) this.committedIndex = Math.max(this.committedIndex, waiting[waiting.length - 1].index);
    if (urgent || waiting.length > MAX_DEFERRED_APPLY_ENTRIES || this.deferredApplyBytes > MAX_DEFERRED_APPLY_BYTES) {
      this.applyDeferredWithoutWaiting();
    }
  }

  /** Ends the hold on writes (the defragmentation throws that copy away and tries again) and applies what waited. */
  private applyDeferredWithoutWaiting(): void {
    this.backend.releaseWrites();
    this.applyDeferred();
  }

  private applyDeferredAfter(held: Promise<void>): void {
    held.then(
      () => this.applyDeferred(),
      (e: unknown) => this.fatal(e),
    );
  }

  /** Applies the entries that waited for a hold on writes, unless a new hold began. */
  private applyDeferred(): void {
    const waiting = this.deferredApplies;
    if (waiting === null || this.stopped) return;
    const held = this.backend.writesHeld();
    if (held !== null) return this.applyDeferredAfter(held);
    this.deferredApplies = null;
    this.deferredApplyBytes = 0;
    try {
      this.applyEntriesNow(waiting);
    } catch (e) {
      this.fatal(e);
    }
  }

  private applyEntriesNow(entries: Entry[]): void {
    const results: Array<[string, ApplyResult]> = [];
    // After a restart Raft hands back every entry after its snapshot; the backend already holds
    // the effect of those up to its consistent index. Conf changes among them must still reach
    // the Raft core (it learns the membership only from them); normal entries are skipped.
    const backendIndex = this.backend.consistentIndex();
    let removedSelf = false;
    let lastNewIndex = 0;
    this.backend.batch(() => {
      for (const e of entries) {
        if (e.index !== this.appliedIndex + 1) assert.fail(`applying entry ${e.index} after ${this.appliedIndex}`);
        const replay = e.index <= backendIndex;
        if (e.type === EntryType.Normal) {
          if (!replay && e.data.length > 0) {
            const req = decodeInternalRequest(e.data);
            const startMs = performance.now();
            const r = this.applier.apply(req, e.index);
            const tookMs = performance.now() - startMs;
            if (tookMs > this.warningApplyMs) this.warnSlowApply(tookMs, '', describeInternalRequest(req), r.err);
            const id = req.header?.ID ?? '0';
            if (this.proposals.has(id)) results.push([id, r]);
          }
        } else if (e.type === EntryType.ConfChange) {
          const cc = decodeConfChange(e.data);
          if (!replay) this.applyMembershipChange(cc);
          this.node.raw.applyConfChange(cc);
          const reqId = confChangeReqId(cc.context);
          if (reqId && this.proposals.has(reqId)) results.push([reqId, { resp: null, err: null }]);
          if (!replay && cc.type === ConfChangeType.RemoveNode && cc.nodeId === this.memberId) removedSelf = true;
        }
        this.appliedIndex = e.index;
        if (!replay) lastNewIndex = e.index;
      }
      // Once per batch: the batch is one backend transaction, so only its last index can be
      // seen (a write per entry was ~0.3 KB and one LMDB put each at 100 clients).
      if (lastNewIndex > 0) this.backend.setConsistentIndex(lastNewIndex);
    });
    this.committedIndex = Math.max(this.committedIndex, this.appliedIndex);
    for (const [id, r] of results) this.proposals.trigger(id, r);
    this.appliedWaiter.appliedTo(this.appliedIndex);
    this.maybeCampaignAlone();
    if (removedSelf) {
      this.log.warn('the local member has been permanently removed from the cluster', { 'local-member-id': idToHex(this.memberId) });
      // Let the answer to the remove request leave before stopping.
      setTimeout(() => void this.stop().then(() => process.exit(0)), 200).unref();
    }
  }

  /** A lone voter need not wait an election timeout to lead (etcd fast-forwards its ticks). */
  private maybeCampaignAlone(): void {
    if (this.campaignedAlone || this.leaderId !== 0n) return;
    const voters = this.members.list().filter((m) => !m.isLearner);
    if (voters.length !== 1 || voters[0].id !== this.memberId) return;
    this.campaignedAlone = true;
    this.node.enqueue((r) => r.campaign());
  }
  private campaignedAlone = false;

  private applyMembershipChange(cc: ConfChange): void {
    switch (cc.type) {
      case ConfChangeType.AddNode:
      case ConfChangeType.AddLearnerNode: {
        const existing = this.members.get(cc.nodeId);
        if (existing) {
          if (existing.isLearner && cc.type === ConfChangeType.AddNode) this.members.update(cc.nodeId, { isLearner: false });
        } else if (cc.context && cc.context.length > 0) {
          const m = JSON.parse(cc.context.toString()) as { id: string; name: string; peerUrls: string[]; isLearner: boolean };
          this.members.add({ id: BigInt(m.id), name: m.name, peerUrls: m.peerUrls, clientUrls: [], isLearner: cc.type === ConfChangeType.AddLearnerNode });
          if (cc.nodeId !== this.memberId && !this.transport.hasPeer(cc.nodeId)) this.transport.addPeer(cc.nodeId, m.peerUrls);
        }
        break;
      }
      case ConfChangeType.RemoveNode:
        this.members.remove(cc.nodeId);
        if (cc.nodeId !== this.memberId && this.transport.hasPeer(cc.nodeId)) this.transport.removePeer(cc.nodeId);
        break;
      case ConfChangeType.UpdateNode:
        if (cc.context && cc.context.length > 0) {
          const m = JSON.parse(cc.context.toString()) as { peerUrls: string[] };
          this.members.update(cc.nodeId, { peerUrls: m.peerUrls });
          if (cc.nodeId !== this.memberId && this.transport.hasPeer(cc.nodeId)) this.transport.updatePeer(cc.nodeId, m.peerUrls);
        }
        break;
    }
  }

  /** Publish this member's name and client URLs through the log, as etcd does once at start. */
  private publishAttributes(): void {
    this.publishedAttributes = true;
    const req: pb.InternalRaftRequest = {
      clusterMemberAttrSet: {
        member_ID: this.memberId.toString(),
        memberAttributes: { name: this.cfg.name, clientUrls: this.cfg.advertiseClientUrls },
      },
    } as unknown as pb.InternalRaftRequest;
    this.propose(req).then(
      () => {
        this.log.info('published local member to cluster through raft', {
          'local-member-id': idToHex(this.memberId),
          'local-member-attributes': `{Name:${this.cfg.name} ClientURLs:[${this.cfg.advertiseClientUrls.join(' ')}]}`,
          'cluster-id': idToHex(this.clusterId),
          'publish-timeout': `${this.requestTimeoutMs / 1000}s`,
        });
      },
      (e) => {
        this.publishedAttributes = false;
        this.log.warn('failed to publish local member to cluster through raft', { error: String(e) });
        // etcd keeps trying until it is published.
        setTimeout(() => {
          if (!this.stopped && !this.publishedAttributes && this.leaderId !== 0n) this.publishAttributes();
        }, 500).unref();
      },
    );
  }

  private async maybeSnapshot(): Promise<void> {
    if (this.appliedIndex - this.snapshotIndex <= this.cfg.snapshotCount) return;
    const index = this.appliedIndex;
    this.log.info('triggering snapshot', {
      'local-member-id': idToHex(this.memberId),
      'local-member-applied-index': index,
      'local-member-snapshot-index': this.snapshotIndex,
      'local-member-snapshot-count': this.cfg.snapshotCount,
    });
    // The applied state must be durable before the log that could rebuild it is dropped.
    await this.backend.flushed();
    const snap = this.storage.createSnapshot(index, this.confState(), Buffer.alloc(0));
    this.snapshotIndex = index;
    this.log.info('saved snapshot', { 'snapshot-index': index });
    const compactTo = index - this.cfg.snapshotCatchUpEntries;
    if (compactTo > this.storage.firstIndex()) {
      this.storage.compact(compactTo);
      await this.wal.compact(compactTo, snap.metadata);
      this.log.info('compacted Raft logs', { 'compact-index': compactTo });
    }
  }

  private confState(): { voters: bigint[]; learners: bigint[]; votersOutgoing: bigint[]; learnersNext: bigint[]; autoLeave: boolean } {
    const ms = this.members.list();
    return {
      voters: ms.filter((m) => !m.isLearner).map((m) => m.id),
      learners: ms.filter((m) => m.isLearner).map((m) => m.id),
      votersOutgoing: [],
      learnersNext: [],
      autoLeave: false,
    };
  }

  private revokeExpiredLeases(): void {
    if (!this.isLeader || this.stopped) return;
    const ids = this.lessor.expired(LEASE_REVOKES_PER_ROUND);
    for (const id of ids) {
      if (this.revokesInFlight.has(id)) continue;
      this.revokesInFlight.add(id);
      const req = { leaseRevoke: { ID: id.toString() } } as pb.InternalRaftRequest;
      // etcd revokes expired leases as root (its WithRoot), past any permission check.
      this.propose(req, { username: 'root', revision: this.authStore.revision() })
        .then(() => {
          this.metrics?.lease.revokedTotal.inc();
          this.metrics?.server.leaseExpired.inc();
        })
        .catch((e) => this.log.warn('failed to revoke expired lease', { 'lease-id': id.toString(16), error: String(e) }))
        .finally(() => this.revokesInFlight.delete(id));
    }
  }

  // ---------------------------------------------------------------- proposals and reads

  private async propose(req: pb.InternalRaftRequest, ai: AuthInfo | null = null): Promise<unknown> {
    if (this.stopped) throw etcdError('Stopped');
    // Like etcd's raft node, a proposal waits (bounded) for a leader instead of failing at once.
    // (Checked first so the common case costs no extra promise turn.)
    if (this.leaderId === 0n) await this.waitLeaderOr('ContextDeadlineExceeded');
    if (this.committedIndex - this.appliedIndex > MAX_APPLY_GAP) throw etcdError('RequestTooManyRequests');
    const id = this.idGen.next().toString();
    // Not `{ ...req, header }`: V8 gives an object built that way a slow layout, and the encoder
    // reads every field of it (measured at ~10 µs per proposal).
    const full = Object.assign({}, req);
    full.header = { ID: id, username: ai?.username ?? '', authRevision: String(ai?.revision ?? 0) };
    const data = encodeInternalRequest(full);
    if (data.length > this.cfg.maxRequestBytes) throw etcdError('RequestTooLarge');
    const wait = this.proposals.register(id, this.proposalTimeout);
    if (!wait) throw etcdError('RequestTooManyRequests');
    const onDropped = (e: Error): void => this.onProposalDropped(id, e, () => this.node.propose(data, onDropped));
    if (!this.node.propose(data, onDropped)) {
      this.proposals.fail(id, etcdError('RequestTooManyRequests'));
    }
    let r: ApplyResult;
    try {
      r = await wait;
    } catch (e) {
      this.metrics?.server.proposalsFailed.inc();
      throw e;
    }
    if (r.err) throw r.err;
    if (r.done) await r.done;
    return r.resp;
  }

  /**
   * A proposal the Raft core refused. Refused for want of a leader (lost between the caller's wait
   * and the node loop's turn), it is proposed again once there is one: etcd's raft node holds a
   * proposal until a leader is known. Its wait's own deadline still bounds it.
   */
  private onProposalDropped(id: string, e: Error, again: () => boolean): void {
    if (this.leaderId !== 0n || this.stopped) {
      this.proposals.fail(id, droppedError(e));
      return;
    }
    this.waitLeader().then(
      () => {
        if (this.proposals.has(id) && !this.stopped && !again()) this.proposals.fail(id, etcdError('RequestTooManyRequests'));
      },
      () => undefined, // the wait's own timeout answers the caller
    );
  }

  /**
   * etcd's parseProposeCtxErr: why a proposal registered at `startedAtMs` (performance.now())
   * timed out. Started while the previous leader was failing (within two election timeouts before
   * this member was elected): the leader's failure; else a leader this member has not been
   * connected to since the start (or, as leader, no connected quorum): connection lost.
   */
  private proposeTimeoutError(startedAtMs: number): EtcdError {
    const elected = this.leadElectedAtMs;
    if (startedAtMs > elected - 2 * this.electionMs && startedAtMs < elected) return etcdError('TimeoutDueToLeaderFail');
    const sinceEpochMs = Date.now() - (performance.now() - startedAtMs);
    const connectedSince = (id: bigint): boolean => {
      const t = this.transport.activeSince(id);
      return t !== 0 && t < sinceEpochMs;
    };
    const lead = this.leaderId;
    if (lead === this.memberId) {
      const members = this.members.list();
      const connected = members.filter((m) => m.id === this.memberId || connectedSince(m.id)).length;
      if (connected < Math.floor(members.length / 2) + 1) return etcdError('TimeoutDueToConnectionLost');
    } else if (lead !== 0n && !connectedSince(lead)) {
      return etcdError('TimeoutDueToConnectionLost');
    }
    return etcdError('Timeout');
  }

  /** Resolves when the leader changes or after `ms`, whichever is first. */
  private leaderChangeOrDelay(ms: number): Promise<void> {
    return new Promise((resolve) => {
      if (this.leaderChangeWaiters.size >= MAX_READ_WAITERS) {
        setTimeout(resolve, ms);
        return;
      }
      const done = (): void => {
        clearTimeout(timer);
        this.leaderChangeWaiters.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.leaderChangeWaiters.add(done);
    });
  }

  /**
   * A call only the leader can answer (etcd's LeaseRenew, LeaseTimeToLive and PromoteMember on a
   * follower): answered here when this member leads, else forwarded to the leader, and forwarded
   * again (to whichever member leads by then) until an answer or the request timeout. Waits for a
   * leader when there is none ("no leader" when none comes in time); a forward that cannot reach
   * the leader is retried, and the client sees "request timed out" if nothing answered in time,
   * never the transport's own error.
   */
  private async viaLeader<T>(local: () => Promise<T>, forward: (leader: Member, timeoutMs: number) => Promise<T>): Promise<T> {
    const deadline = performance.now() + this.requestTimeoutMs;
    for (;;) {
      if (this.stopped) throw etcdError('Stopped');
      let remaining = deadline - performance.now();
      if (remaining <= 0) throw etcdError('Timeout');
      await this.waitLeader(remaining);
      if (this.isLeader) return local();
      remaining = deadline - performance.now();
      if (remaining <= 0) throw etcdError('Timeout');
      const leader = this.members.get(this.leaderId);
      if (leader) {
        try {
          return await forward(leader, Math.ceil(remaining));
        } catch (e) {
          if (!retryableForwardError(e)) throw e;
        }
      }
      remaining = deadline - performance.now();
      if (remaining <= 0) throw etcdError('Timeout');
      await this.leaderChangeOrDelay(Math.min(FORWARD_RETRY_MS, remaining));
    }
  }

  /** Resolves when this member has applied everything committed before the call (linearizable read). */
  private async linearizableReadNotify(): Promise<void> {
    if (this.stopped) throw etcdError('Stopped');
    // etcd's read waits its request timeout for a read index no member without a leader can give.
    if (this.leaderId === 0n) await this.waitLeaderOr('Timeout');
    // The only voter answers ReadIndex with its commit index at once: ask it directly instead of
    // through the Ready loop (measured: range-l-1c spent ~0.15 ms more than a serializable read).
    const readIndex = this.node.raw.singletonLeaderReadIndex();
    if (readIndex !== null) {
      if (this.appliedIndex >= readIndex) return;
      const applied = this.appliedWaiter.wait(readIndex, this.appliedIndex);
      if (!applied) throw etcdError('RequestTooManyRequests');
      // Bounded like a read index request: a stalled apply answers Timeout, not a hang.
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(etcdError('Timeout')), this.requestTimeoutMs);
      });
      try {
        return await Promise.race([applied, timeout]);
      } finally {
        clearTimeout(timer);
      }
    }
    if (this.readWaiters.length >= MAX_READ_WAITERS) throw etcdError('RequestTooManyRequests');
    const p = new Promise<void>((resolve, reject) => this.readWaiters.push({ resolve, reject }));
    this.issueReadIndex();
    return p;
  }

  private issueReadIndex(): void {
    if (this.readInFlight || this.readWaiters.length === 0) return;
    const waiters = this.readWaiters;
    this.readWaiters = [];
    // The leader tells ReadIndex requests apart by context: it must be unique across members
    // (the ID generator carries our member ID), or one member's read would shadow another's.
    const ctxBuf = Buffer.alloc(8);
    ctxBuf.writeBigUInt64BE(this.idGen.next());
    const ctx = ctxBuf.toString('hex');
    const timer = setTimeout(() => {
      if (this.readInFlight?.ctx !== ctx) return;
      this.readInFlight = null;
      if (this.leaderId === 0n) {
        this.metrics?.server.readIndexesFailed.inc();
      } else {
        this.metrics?.server.slowReadIndexes.inc();
        this.log.warn('timed out waiting for read index response (local node might have slow network)', { timeout: formatGoDurationMs(this.requestTimeoutMs) });
      }
      for (const w of waiters) w.reject(etcdError('Timeout'));
      this.issueReadIndex();
    }, this.requestTimeoutMs);
    this.readInFlight = { ctx, waiters, timer };
    if (!this.node.readIndex(ctxBuf)) {
      clearTimeout(timer);
      this.readInFlight = null;
      this.metrics?.server.readIndexesFailed.inc();
      this.log.warn('failed to get read index from Raft', { error: 'the node loop refused the request (its inbox is full)' });
      for (const w of waiters) w.reject(etcdError('RequestTooManyRequests'));
      return;
    }
    // A ReadIndex request or its answer can be lost (no leader yet, a peer stream still
    // connecting, a leader change): ask again with the same context, as etcd's read loop does.
    const retry = setInterval(() => {
      if (this.readInFlight?.ctx !== ctx || this.stopped) {
        clearInterval(retry);
        return;
      }
      this.log.warn('waiting for ReadIndex response took too long, retrying', {
        'sent-request-id': ctxBuf.readBigUInt64BE().toString(),
        'retry-timeout': formatGoDurationMs(READ_INDEX_RETRY_MS),
      });
      this.node.readIndex(ctxBuf);
    }, READ_INDEX_RETRY_MS);
    retry.unref();
  }

  /** Decimal IDs for headers, converted once (a bigint's toString on every response showed in profiles). */
  private idStrings: { cluster: string; member: string } | null = null;

  header(revision?: number): pb.ResponseHeader {
    const ids = (this.idStrings ??= { cluster: this.clusterId.toString(), member: this.memberId.toString() });
    return {
      clusterId: ids.cluster,
      memberId: ids.member,
      revision: String(revision ?? this.mvcc.currentRevision()),
      // The core's term directly: status() builds a progress map, too dear for every response.
      raftTerm: String(this.node.raw.raft.term),
    };
  }

  private withHeader<T extends { header?: pb.ResponseHeader | null }>(resp: T): T {
    const rev = resp.header?.revision ? Number(resp.header.revision) : this.mvcc.currentRevision();
    resp.header = this.header(rev);
    return resp;
  }

  private inUseSample = { bytes: 0, atMs: 0 };

  /** The backend's pages in use, sampled at most every 100 ms (reading it per write was measurable). */
  private inUseBytesCached(): number {
    const now = Date.now();
    if (now - this.inUseSample.atMs >= 100) this.inUseSample = { bytes: this.backend.sizeInUseBytes(), atMs: now };
    return this.inUseSample.bytes;
  }

  /** NOSPACE: refuse writes that would grow the backend past the quota, and raise the alarm once. */
  private checkQuota(costBytes: number): void {
    if (this.cfg.quotaBackendBytes <= 0) return;
    // Pages in use, not the file size: LMDB files start larger than bbolt's, and a small
    // --quota-backend-bytes must still leave room for data.
    if (this.inUseBytesCached() + costBytes <= this.cfg.quotaBackendBytes) return;
    if (!this.alarms.has(AlarmType.NOSPACE)) {
      const req = { alarm: { action: 1, memberID: this.memberId.toString(), alarm: AlarmType.NOSPACE } } as pb.InternalRaftRequest;
      this.propose(req).catch(() => undefined);
    }
    throw etcdError('NoSpace');
  }

  // ---------------------------------------------------------------- KV

  async range(req: pb.RangeRequest, ctx?: CallAuth, forWire = false): Promise<pb.RangeResponse> {
    const startMs = performance.now();
    try {
      if (!req.serializable) await this.linearizableReadNotify();
      this.auth.checkRange(ctx, req.key, req.rangeEnd);
      this.metrics?.mvcc.rangeTotal.inc();
      const resp = this.withHeader(forWire ? await applyRangeForWireInSteps(this.mvcc, req) : applyRange(this.mvcc, req));
      this.checkSlowRange(req, startMs, resp, null);
      return resp;
    } catch (e) {
      this.checkSlowRange(req, startMs, null, e as Error);
      throw e;
    }
  }

  /** As etcd's Range: the whole call is timed, the wait for a linearizable read included. */
  private checkSlowRange(req: pb.RangeRequest, startMs: number, resp: pb.RangeResponse | null, err: Error | null): void {
    const tookMs = performance.now() - startMs;
    if (tookMs <= this.warningApplyMs) return;
    this.warnSlowApply(tookMs, 'read-only range ', describeRange(req), err, resp ? `range_response_count:${resp.kvs.length}` : '');
  }

  async put(req: pb.PutRequest, ctx?: CallAuth): Promise<pb.PutResponse> {
    this.checkQuota(req.key.length + req.value.length);
    return this.withHeader((await this.propose({ put: req } as pb.InternalRaftRequest, this.auth.authInfo(ctx))) as pb.PutResponse);
  }

  async deleteRange(req: pb.DeleteRangeRequest, ctx?: CallAuth): Promise<pb.DeleteRangeResponse> {
    return this.withHeader((await this.propose({ deleteRange: req } as pb.InternalRaftRequest, this.auth.authInfo(ctx))) as pb.DeleteRangeResponse);
  }

  async txn(req: pb.TxnRequest, ctx?: CallAuth): Promise<pb.TxnResponse> {
    this.checkQuota(0);
    this.metrics?.mvcc.txnTotal.inc();
    return this.withHeader((await this.propose({ txn: req } as pb.InternalRaftRequest, this.auth.authInfo(ctx))) as pb.TxnResponse);
  }

  async compact(req: pb.CompactionRequest, ctx?: CallAuth): Promise<pb.CompactionResponse> {
    return this.withHeader((await this.propose({ compaction: req } as pb.InternalRaftRequest, this.auth.authInfo(ctx))) as pb.CompactionResponse);
  }

  openWatchStream(sink: WatchSink): WatchStream {
    return this.watchHub.openStream(sink);
  }

  // ---------------------------------------------------------------- leases

  async leaseGrant(req: pb.LeaseGrantRequest, ctx?: CallAuth): Promise<pb.LeaseGrantResponse> {
    this.checkQuota(0);
    // etcd 3.6's requireAuthInfo: with auth on, no lease for nobody (3.4 granted one).
    const ai = this.auth.requireUser(ctx);
    // A client may choose any non-zero int64, negative ones too (etcd's LeaseGrant and lessor take them).
    const id = req.ID === '0' || req.ID === '' ? this.idGen.nextLeaseId() : BigInt(req.ID);
    if (Number(req.TTL) > MAX_LEASE_TTL_SEC) throw etcdError('LeaseTTLTooLarge');
    const resp = (await this.propose({ leaseGrant: { ID: id.toString(), TTL: req.TTL } } as pb.InternalRaftRequest, ai)) as pb.LeaseGrantResponse;
    this.metrics?.lease.grantedTotal.inc();
    return this.withHeader(resp);
  }

  async leaseRevoke(req: pb.LeaseRevokeRequest, ctx?: CallAuth): Promise<pb.LeaseRevokeResponse> {
    // Someone, as for a grant; whether they may write the lease's keys is checked when applied.
    const ai = this.auth.requireUser(ctx);
    const resp = (await this.propose({ leaseRevoke: { ID: req.ID } } as pb.InternalRaftRequest, ai)) as pb.LeaseRevokeResponse;
    this.metrics?.lease.revokedTotal.inc();
    return this.withHeader(resp);
  }

  private get leaderClient(): LeaderClient {
    this.leaderClientInstance ??= new LeaderClient(this.cfg.clientCredentials);
    return this.leaderClientInstance;
  }
  private leaderClientInstance: LeaderClient | null = null;

  async leaseKeepAlive(req: pb.LeaseKeepAliveRequest, ctx?: CallAuth): Promise<pb.LeaseKeepAliveResponse> {
    // etcd 3.6's checkLeaseRenew, on the member the client called (a forwarded renewal is not
    // checked again): a caller, who may write every key of the lease unless they have the root role.
    this.checkLeaseRenew(req.ID, ctx);
    if (this.isLeader) return this.renewHere(req);
    return this.viaLeader(
      async () => this.renewHere(req),
      async (leader, timeoutMs) => {
        const ttl = await this.forwardLeaseCall(
          leader,
          () => this.transport.forwardLeaseRenew(leader.id, req.ID, timeoutMs),
          async (url) => (await this.leaderClient.keepAlive(url, req.ID, timeoutMs)).TTL,
        );
        return { header: this.header(), ID: req.ID, TTL: ttl } as pb.LeaseKeepAliveResponse;
      },
    );
  }

  /**
   * A lease call forwarded to the leader over its peer URLs (the caller was checked here; members
   * answer each other without a user). A leader that does not answer those yet (an older etcd-ts,
   * during a rolling upgrade) is asked over its client URL instead, as before.
   */
  private async forwardLeaseCall<T>(leader: Member, viaPeerUrl: () => Promise<T>, viaClientUrl: (url: string) => Promise<T>): Promise<T> {
    try {
      return await viaPeerUrl();
    } catch (e) {
      if (!(e instanceof ForwardFailed)) throw e;
      if (e.code === Code.Unimplemented) return viaClientUrl(this.clientUrlOf(leader));
      throw forwardedError(e.code, e.details);
    }
  }

  private clientUrlOf(leader: Member): string {
    const url = leader.clientUrls[0];
    // Not published yet: retried until the request timeout, like an unreachable leader.
    if (url === undefined) throw new LeaderUnreachable(Code.Unavailable);
    return url;
  }

  /** A renewal another member forwarded (it checked its caller): answered while this member leads. */
  private async renewForwarded(id: string): Promise<string> {
    if (!this.isLeader) throw etcdError('LeaderChanged');
    return this.renewHere({ ID: id } as pb.LeaseKeepAliveRequest).TTL;
  }

  /** A time-to-live another member forwarded, without the keys (that member reads them itself). */
  private async timeToLiveForwarded(id: string): Promise<LeaseTtl> {
    if (!this.isLeader) throw etcdError('LeaderChanged');
    const r = await this.timeToLiveHere({ ID: id, keys: false } as pb.LeaseTimeToLiveRequest);
    return { ttl: r.TTL, grantedTtl: r.grantedTTL };
  }

  private checkLeaseRenew(id: string, ctx: CallAuth | undefined): void {
    // etcd checks the auth revision again after the keys; nothing runs in between here.
    this.auth.checkLeaseKeys(ctx, () => this.lessor.timeToLive(BigInt(id))?.keys ?? [], 'write');
  }

  /** A keepalive answered by this member's lessor (it leads). */
  private renewHere(req: pb.LeaseKeepAliveRequest): pb.LeaseKeepAliveResponse {
    let ttl = 0;
    try {
      ttl = this.lessor.renew(BigInt(req.ID));
      this.metrics?.lease.renewedTotal.inc();
    } catch (e) {
      if (!(e instanceof EtcdError) || e.message !== etcdError('LeaseNotFound').message) throw e;
    }
    return { header: this.header(), ID: req.ID, TTL: String(ttl) } as pb.LeaseKeepAliveResponse;
  }

  async leaseTimeToLive(req: pb.LeaseTimeToLiveRequest, ctx?: CallAuth): Promise<pb.LeaseTimeToLiveResponse> {
    // etcd 3.6: a caller for any time-to-live (3.4 answered anyone); for a lease's keys
    // (checkLeaseTimeToLive, CVE-2023-32082) one who may read each of them, checked here, on the
    // member the client called.
    this.auth.requireUser(ctx);
    const rev = req.keys ? this.auth.checkLeaseKeys(ctx, () => this.lessor.timeToLive(BigInt(req.ID))?.keys ?? [], 'read') : 0;
    const resp = await this.timeToLiveViaLeader(req);
    if (req.keys && this.auth.authRevisionChanged(rev)) throw etcdError('AuthOldRevision');
    return resp;
  }

  private async timeToLiveViaLeader(req: pb.LeaseTimeToLiveRequest): Promise<pb.LeaseTimeToLiveResponse> {
    if (!this.isLeader) {
      return this.viaLeader(
        () => this.timeToLiveHere(req),
        async (leader, timeoutMs) => {
          // Only the clock is the leader's: the keys were checked against the caller here, and are
          // read here (every member applies the same attachments).
          const t = await this.forwardLeaseCall(
            leader,
            () => this.transport.forwardLeaseTimeToLive(leader.id, req.ID, timeoutMs),
            async (url) => {
              const r = await this.leaderClient.timeToLive(url, { ...req, keys: false }, timeoutMs);
              return { ttl: r.TTL, grantedTtl: r.grantedTTL };
            },
          );
          const resp = { header: this.header(), ID: req.ID, TTL: t.ttl, grantedTTL: t.grantedTtl, keys: [] as Buffer[] } as pb.LeaseTimeToLiveResponse;
          if (!req.keys || t.ttl === '-1') return resp;
          await this.linearizableReadNotify();
          return { ...resp, header: this.header(), keys: this.lessor.timeToLive(BigInt(req.ID))?.keys ?? [] };
        },
      );
    }
    return this.timeToLiveHere(req);
  }

  /** A time-to-live answered by this member's lessor (it leads). */
  private async timeToLiveHere(req: pb.LeaseTimeToLiveRequest): Promise<pb.LeaseTimeToLiveResponse> {
    await this.linearizableReadNotify();
    const t = this.lessor.timeToLive(BigInt(req.ID));
    if (!t) return { header: this.header(), ID: req.ID, TTL: '-1', grantedTTL: '0', keys: [] } as pb.LeaseTimeToLiveResponse;
    return {
      header: this.header(),
      ID: req.ID,
      TTL: String(t.remainingTtlSec),
      grantedTTL: String(t.grantedTtlSec),
      keys: req.keys ? t.keys : [],
    } as pb.LeaseTimeToLiveResponse;
  }

  async leaseLeases(_req: pb.LeaseLeasesRequest, ctx?: CallAuth): Promise<pb.LeaseLeasesResponse> {
    await this.linearizableReadNotify();
    const ids = this.lessor.leases();
    // etcd 3.6's checkLeaseLeases: a caller who, without the root role, may read every key of
    // every lease (3.4 listed them to anyone).
    this.auth.checkLeaseKeys(ctx, () => ids.flatMap((id) => this.lessor.timeToLive(id)?.keys ?? []), 'read');
    return { header: this.header(), leases: ids.map((id) => ({ ID: id.toString() })) } as pb.LeaseLeasesResponse;
  }

  /** waitLeader, failing with `name` instead of "no leader" (what etcd says for that request). */
  private async waitLeaderOr(name: ErrorName): Promise<void> {
    try {
      await this.waitLeader();
    } catch (e) {
      throw e instanceof EtcdError && e.message === Errors.NoLeader.message ? etcdError(name) : e;
    }
  }

  /** Resolves once a leader is known; "no leader" when none is within `timeoutMs`. */
  private waitLeader(timeoutMs = this.requestTimeoutMs): Promise<void> {
    if (this.leaderId !== 0n) return Promise.resolve();
    if (this.leaderWaiters.length >= MAX_READ_WAITERS) return Promise.reject(etcdError('RequestTooManyRequests'));
    return new Promise((resolve, reject) => {
      const w = (): void => {
        clearTimeout(t);
        resolve();
      };
      const t = setTimeout(() => {
        const i = this.leaderWaiters.indexOf(w);
        if (i >= 0) this.leaderWaiters.splice(i, 1);
        reject(etcdError('NoLeader'));
      }, timeoutMs);
      this.leaderWaiters.push(w);
    });
  }

  // ---------------------------------------------------------------- cluster

  private memberToPb(m: Member): pb.Member {
    return { ID: m.id.toString(), name: m.name, peerURLs: m.peerUrls, clientURLs: m.clientUrls, isLearner: m.isLearner } as pb.Member;
  }

  async memberList(_req: pb.MemberListRequest): Promise<pb.MemberListResponse> {
    // etcd's Cluster service headers carry no revision.
    return { header: { ...this.header(), revision: '0' }, members: this.members.list().map((m) => this.memberToPb(m)) } as pb.MemberListResponse;
  }

  /** etcd's IsReadyToAddVotingMember: adding must not leave the cluster without a started quorum. */
  private readyToAddVoter(): boolean {
    const voters = this.members.list().filter((m) => !m.isLearner);
    const started = voters.filter((m) => m.name !== '').length;
    const total = voters.length + 1;
    if (started === 1 && total === 2) return true;
    return started >= Math.floor(total / 2) + 1;
  }

  /** etcd's IsReadyToRemoveVotingMember. */
  private readyToRemoveVoter(id: bigint): boolean {
    const rest = this.members.list().filter((m) => !m.isLearner && m.id !== id);
    const started = rest.filter((m) => m.name !== '').length;
    return started >= Math.floor(rest.length / 2) + 1;
  }

  private async proposeConfChange(type: number, nodeId: bigint, context: Record<string, unknown>): Promise<void> {
    if (this.stopped) throw etcdError('Stopped');
    if (this.leaderId === 0n) await this.waitLeaderOr('ContextDeadlineExceeded');
    const reqId = this.idGen.next().toString();
    const cc = { type, nodeId, context: Buffer.from(JSON.stringify({ ...context, reqId })) };
    const wait = this.proposals.register(reqId, this.proposalTimeout);
    if (!wait) throw etcdError('RequestTooManyRequests');
    const onDropped = (e: Error): void => this.onProposalDropped(reqId, e, () => this.node.proposeConfChange(cc, onDropped));
    if (!this.node.proposeConfChange(cc, onDropped)) this.proposals.fail(reqId, etcdError('RequestTooManyRequests'));
    const r = await wait;
    if (r.err) throw r.err;
  }

  private membersPb(): pb.Member[] {
    return this.members.list().map((m) => this.memberToPb(m));
  }

  private clusterHeader(): pb.ResponseHeader {
    return { ...this.header(), revision: '0' };
  }

  async memberAdd(req: pb.MemberAddRequest, ctx?: CallAuth): Promise<pb.MemberAddResponse> {
    this.auth.checkAdmin(ctx);
    const peerUrls = req.peerURLs ?? [];
    if (peerUrls.length === 0 || !peerUrls.every(isValidUrl)) throw etcdError('MemberBadURLs');
    for (const m of this.members.list()) {
      if (m.peerUrls.some((u) => peerUrls.includes(u))) throw etcdError('PeerURLExist');
    }
    if (!req.isLearner && !this.readyToAddVoter()) throw etcdError('MemberNotEnoughStarted');
    const id = computeMemberId(peerUrls, this.cfg.initialClusterToken, Math.floor(Date.now() / 1000));
    if (this.members.get(id)) throw etcdError('MemberExist');
    const type = req.isLearner ? ConfChangeType.AddLearnerNode : ConfChangeType.AddNode;
    await this.proposeConfChange(type, id, { id: id.toString(), name: '', peerUrls, isLearner: req.isLearner });
    this.log.info('added member', { 'added-peer-id': idToHex(id), 'added-peer-peer-urls': peerUrls });
    return {
      header: this.clusterHeader(),
      member: { ID: id.toString(), name: '', peerURLs: peerUrls, clientURLs: [], isLearner: req.isLearner },
      members: this.membersPb(),
    } as pb.MemberAddResponse;
  }

  async memberRemove(req: pb.MemberRemoveRequest, ctx?: CallAuth): Promise<pb.MemberRemoveResponse> {
    this.auth.checkAdmin(ctx);
    const id = BigInt(req.ID);
    const m = this.members.get(id);
    if (!m) throw etcdError('MemberNotFound');
    if (!m.isLearner && !this.readyToRemoveVoter(id)) throw etcdError('MemberNotEnoughStarted');
    await this.proposeConfChange(ConfChangeType.RemoveNode, id, {});
    this.log.info('removed member', { 'removed-member-id': idToHex(id) });
    return { header: this.clusterHeader(), members: this.membersPb() } as pb.MemberRemoveResponse;
  }

  async memberUpdate(req: pb.MemberUpdateRequest, ctx?: CallAuth): Promise<pb.MemberUpdateResponse> {
    this.auth.checkAdmin(ctx);
    const id = BigInt(req.ID);
    if (!this.members.get(id)) throw etcdError('MemberNotFound');
    const peerUrls = req.peerURLs ?? [];
    if (peerUrls.length === 0 || !peerUrls.every(isValidUrl)) throw etcdError('MemberBadURLs');
    for (const m of this.members.list()) {
      if (m.id !== id && m.peerUrls.some((u) => peerUrls.includes(u))) throw etcdError('PeerURLExist');
    }
    await this.proposeConfChange(ConfChangeType.UpdateNode, id, { peerUrls });
    return { header: this.clusterHeader(), members: this.membersPb() } as pb.MemberUpdateResponse;
  }

  async memberPromote(req: pb.MemberPromoteRequest, ctx?: CallAuth): Promise<pb.MemberPromoteResponse> {
    this.auth.checkAdmin(ctx);
    const id = BigInt(req.ID);
    let forwarded = false;
    try {
      const m = this.members.get(id);
      if (!m) throw etcdError('MemberNotFound');
      if (!m.isLearner) throw etcdError('MemberNotLearner');
      if (!this.isLeader) {
        // etcd counts a failure only where the promotion was decided, not where it was forwarded from.
        forwarded = true;
        return await this.viaLeader(
          async () => {
            forwarded = false;
            return this.promoteHere(id);
          },
          (leader, timeoutMs) => this.leaderClient.memberPromote(this.clientUrlOf(leader), req, timeoutMs),
        );
      }
      return await this.promoteHere(id);
    } catch (e) {
      // As etcd: counted by the member that decided, with the error's text as the reason.
      if (!forwarded) this.metrics?.server.learnerPromoteFailures.inc({ Reason: (e as Error).message });
      throw e;
    }
  }

  /** The leader's promotion of a learner. */
  private async promoteHere(id: bigint): Promise<pb.MemberPromoteResponse> {
    // etcd: the learner's log must be within 90% of the leader's.
    const st = this.node.raw.status();
    const pr = st.progress?.get(id);
    if (!pr || pr.match < st.commit * 0.9) throw etcdError('LearnerNotReady');
    await this.proposeConfChange(ConfChangeType.AddNode, id, {});
    this.metrics?.server.learnerPromoteSuccesses.inc();
    return { header: this.clusterHeader(), members: this.membersPb() } as pb.MemberPromoteResponse;
  }

  // ---------------------------------------------------------------- maintenance

  async status(_req: pb.StatusRequest): Promise<pb.StatusResponse> {
    const st = this.node.raw.status();
    return {
      header: this.header(),
      version: this.cfg.version,
      dbSize: String(this.backend.sizeBytes()),
      leader: this.leaderId.toString(),
      raftIndex: String(st.commit),
      raftTerm: String(st.term),
      raftAppliedIndex: String(this.appliedIndex),
      errors: [
        ...(this.leaderId === 0n ? [etcdError('NoLeader').message] : []),
        ...this.alarms.list().map((a) => `memberID:${a.memberId} alarm:${a.alarm === AlarmType.NOSPACE ? 'NOSPACE' : 'CORRUPT'} `),
      ],
      dbSizeInUse: String(this.backend.sizeInUseBytes()),
      isLearner: this.members.get(this.memberId)?.isLearner ?? false,
      storageVersion: this.cfg.clusterVersion,
      dbSizeQuota: String(this.cfg.quotaBackendBytes),
    } as unknown as pb.StatusResponse;
  }

  memberState(): { hasLeader: boolean; isLearner: boolean } {
    return { hasLeader: this.leaderId !== 0n, isLearner: this.members.get(this.memberId)?.isLearner ?? false };
  }

  async alarm(req: pb.AlarmRequest, ctx?: CallAuth): Promise<pb.AlarmResponse> {
    // No permission check, but as every proposal etcd's Alarm refuses a token it cannot resolve.
    return this.withHeader((await this.propose({ alarm: req } as pb.InternalRaftRequest, this.auth.authInfo(ctx))) as pb.AlarmResponse);
  }

  async defragment(_req: pb.DefragmentRequest, ctx?: CallAuth): Promise<pb.DefragmentResponse> {
    this.auth.checkAdmin(ctx);
    this.log.info('starting defragment');
    const startMs = performance.now();
    this.metrics?.disk.defragInflight.set(1);
    let done: boolean;
    try {
      done = await this.backend.defragment();
    } finally {
      this.metrics?.disk.defragInflight.set(0);
    }
    if (!done) {
      this.log.warn('failed to defragment', { error: 'every copy was overtaken by a write that could not wait' });
      throw new Error('defragment gave up: every copy was overtaken by a write that could not wait; try again');
    }
    this.metrics?.disk.backendDefragDurationSeconds.observe((performance.now() - startMs) / 1000);
    this.log.info('finished defragment');
    // etcd 3.6 answers Defragment with an empty message.
    return { header: null } as unknown as pb.DefragmentResponse;
  }

  async hash(_req: pb.HashRequest, ctx?: CallAuth): Promise<pb.HashResponse> {
    this.auth.checkAdmin(ctx);
    const startMs = performance.now();
    const hash = await this.mvcc.hash();
    this.metrics?.mvcc.hashDurationSeconds.observe((performance.now() - startMs) / 1000);
    return { header: this.header(), hash } as pb.HashResponse;
  }

  async hashKV(req: pb.HashKVRequest, ctx?: CallAuth): Promise<pb.HashKVResponse> {
    this.auth.checkAdmin(ctx);
    const startMs = performance.now();
    const r = await this.mvcc.hashKV(Number(req.revision));
    this.metrics?.mvcc.hashRevDurationSeconds.observe((performance.now() - startMs) / 1000);
    return {
      header: this.header(),
      hash: r.hash,
      compactRevision: String(r.compactRevision),
      hashRevision: String(r.hashRevision),
    } as unknown as pb.HashKVResponse;
  }

  async *snapshot(ctx?: CallAuth): AsyncIterable<pb.SnapshotResponse> {
    this.auth.checkAdmin(ctx);
    const header = this.header();
    this.log.info('sending database snapshot to client');
    const startMs = performance.now();
    // etcd's format (bbolt): etcd's tools read it and etcd itself can be restored from it.
    const snap = await this.backend.openSnapshot(async (copy, dir) => {
      const out = path.join(dir, 'etcd.db');
      await writeEtcdSnapshotOffThread(copy, out);
      return out;
    });
    let sent = 0;
    try {
      for await (const blob of snap.chunks) {
        sent += blob.length;
        yield { header, remainingBytes: String(Math.max(0, snap.totalBytes - sent)), blob, version: this.cfg.clusterVersion } as unknown as pb.SnapshotResponse;
      }
    } finally {
      // etcd observes the transfer when its snapshot reader closes, finished or not.
      this.metrics?.disk.backendSnapshotDurationSeconds.observe((performance.now() - startMs) / 1000);
    }
    this.log.info('sent database snapshot to client', { size: sent });
  }

  async moveLeader(req: pb.MoveLeaderRequest, ctx?: CallAuth): Promise<pb.MoveLeaderResponse> {
    this.auth.checkAdmin(ctx);
    if (!this.isLeader) throw etcdError('NotLeader');
    const target = BigInt(req.targetID);
    const m = this.members.get(target);
    if (!m || m.isLearner) throw etcdError('BadLeaderTransferee');
    if (target === this.memberId) return { header: this.header() } as pb.MoveLeaderResponse;
    this.log.info('leadership transfer starting', { 'local-member-id': idToHex(this.memberId), 'target-member-id': idToHex(target) });
    this.node.enqueue((r) => r.transferLeader(target));
    const deadline = Date.now() + this.requestTimeoutMs;
    while (this.leaderId !== target) {
      if (Date.now() > deadline) throw etcdError('Timeout');
      // Bounded wait for the transfer to show in the node's soft state.
      await new Promise((r) => setTimeout(r, 20));
    }
    return { header: this.header() } as pb.MoveLeaderResponse;
  }

  async authStatus(_req: pb.AuthStatusRequest): Promise<pb.AuthStatusResponse> {
    return { header: this.header(), enabled: this.authStore.isEnabled(), authRevision: String(this.authStore.revision()) } as pb.AuthStatusResponse;
  }

  async health(opts: { serializable: boolean; exclude: string[] }): Promise<{ ok: boolean; reason: string }> {
    for (const a of this.alarms.list()) {
      const name = a.alarm === AlarmType.NOSPACE ? 'NOSPACE' : 'CORRUPT';
      if (!opts.exclude.includes(name)) return { ok: false, reason: `ALARM ${name}` };
    }
    if (this.leaderId === 0n) return { ok: false, reason: 'RAFT NO LEADER' };
    if (!opts.serializable) {
      try {
        await this.range({ key: Buffer.from('health'), rangeEnd: Buffer.alloc(0), serializable: false } as pb.RangeRequest);
      } catch (e) {
        // With auth enabled the anonymous probe is refused, which still proves the member serves.
        const msg = (e as Error).message;
        if (msg !== etcdError('UserEmpty').message && msg !== etcdError('PermissionDenied').message) {
          return { ok: false, reason: `QGET ERROR: ${msg}` };
        }
      }
    }
    return { ok: true, reason: '' };
  }

  versions(): { etcdserver: string; etcdcluster: string } {
    return { etcdserver: this.cfg.version, etcdcluster: this.cfg.clusterVersion };
  }

  /** Resolves once this member has a leader and published itself (etcd's "ready"). */
  async waitReady(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      if (this.leaderId !== 0n && this.members.get(this.memberId)?.name === this.cfg.name) return;
      await new Promise((r) => setTimeout(r, 10));
    }
    throw new Error('member did not become ready in time');
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    if (this.leaseTimer) clearInterval(this.leaseTimer);
    this.compactor?.stop();
    await this.node.stop();
    await this.transport.stop();
    this.leaderClientInstance?.close();
    this.proposals.failAll(etcdError('Stopped'));
    for (const w of this.readWaiters.splice(0)) w.reject(etcdError('Stopped'));
    if (this.readInFlight) {
      clearTimeout(this.readInFlight.timer);
      for (const w of this.readInFlight.waiters) w.reject(etcdError('Stopped'));
      this.readInFlight = null;
    }
    this.watchHub.close();
    await this.mvcc.close();
    await this.backend.close();
    await this.wal.close();
    for (const l of this.dirLocks.splice(0)) l.release();
  }
}

interface MemberJson {
  id: string;
  name: string;
  peerUrls: string[];
  clientUrls: string[];
  isLearner: boolean;
}

function membersToJson(ms: Member[]): string {
  const out: MemberJson[] = ms.map((m) => ({ id: m.id.toString(), name: m.name, peerUrls: m.peerUrls, clientUrls: m.clientUrls, isLearner: m.isLearner }));
  return JSON.stringify(out);
}

/** etcd's check of --bcrypt-cost: outside bcrypt's range, a warning and the default. */
function bcryptCostOf(given: number | undefined, log: Logger): number {
  if (given === undefined) return DEFAULT_BCRYPT_COST;
  if (given >= BCRYPT_MIN_COST && given <= BCRYPT_MAX_COST) return given;
  log.warn('use default bcrypt cost instead of the invalid given cost', { 'min-cost': BCRYPT_MIN_COST, 'max-cost': BCRYPT_MAX_COST, 'default-cost': DEFAULT_BCRYPT_COST, 'given-cost': given });
  return DEFAULT_BCRYPT_COST;
}

/** etcd's --initial-cluster-state=existing: ask the other members who is in the cluster. */
async function fetchClusterToJoin(cfg: ServerConfig, log: Logger): Promise<{ clusterId: bigint; memberId: bigint; members: Member[] }> {
  const urls: string[] = [];
  for (const [name, u] of cfg.initialCluster) if (name !== cfg.name) urls.push(...u);
  let lastError = '';
  for (const url of urls) {
    try {
      const info = await fetchMemberInfo(url, { timeoutMs: 5000, credentials: cfg.peerCredentials });
      const list = (JSON.parse(info.membersJson) as MemberJson[]).map((m) => ({ ...m, id: BigInt(m.id) }));
      const mine = [...cfg.initialAdvertisePeerUrls].sort().join(',');
      const self = list.find((m) => [...m.peerUrls].sort().join(',') === mine);
      if (!self) {
        throw new Error(`member with peer URLs ${cfg.initialAdvertisePeerUrls.join(',')} is not in the cluster; add it with "etcdctl member add" first`);
      }
      return { clusterId: info.clusterId, memberId: self.id, members: list };
    } catch (e) {
      lastError = (e as Error).message;
      log.warn('failed to get cluster information from peer', { 'remote-peer-url': url, error: lastError });
    }
  }
  throw new Error(`cannot fetch cluster info from peer urls: ${lastError || 'no peer URLs given'}`);
}

function isValidUrl(u: string): boolean {
  try {
    const p = new URL(u);
    return (p.protocol === 'http:' || p.protocol === 'https:' || p.protocol === 'unix:' || p.protocol === 'unixs:') && p.host !== '';
  } catch {
    return false;
  }
}

/** The request ID a conf change carries in its context (ours are JSON with `reqId`). */
function confChangeReqId(context: Buffer | null): string | null {
  if (!context || context.length === 0) return null;
  try {
    const v = (JSON.parse(context.toString()) as { reqId?: unknown }).reqId;
    return typeof v === 'string' ? v : null;
  } catch {
    return null;
  }
}

/** etcd's peer network series, labelled with member IDs in hex as etcd labels them. */
function peerMetrics(m: EtcdMetrics, local: bigint): TransportMetrics {
  const l = idToHex(local);
  // Bytes per peer add up in plain numbers and reach the counters when scraped: a labelled
  // inc per Raft message (hex ID, labels object, prom-client's label hash) was ~3% of the bytes
  // a three-member leader allocated per put. One entry per peer ever seen (members are bounded).
  const sent = new Map<bigint, number>();
  const received = new Map<bigint, number>();
  m.beforeScrape(() => {
    for (const [id, n] of sent) if (n > 0) m.network.peerSentBytes.inc({ To: idToHex(id) }, n);
    for (const [id, n] of received) if (n > 0) m.network.peerReceivedBytes.inc({ From: idToHex(id) }, n);
    sent.clear();
    received.clear();
  });
  // etcd_network_known_peers is etcd 3.6's membership gauge: 1 for every member, this one
  // included, and 0 for a removed one (etcd keeps removed IDs). The transport reports the others.
  m.network.knownPeers.set({ Local: l, Remote: l }, 1);
  return {
    sentBytes: (to, bytes) => sent.set(to, (sent.get(to) ?? 0) + bytes),
    sentFailure: (to) => m.network.peerSentFailures.inc({ To: idToHex(to) }),
    receivedBytes: (from, bytes) => received.set(from, (received.get(from) ?? 0) + bytes),
    receivedFailure: (from) => m.network.peerReceivedFailures.inc({ From: idToHex(from) }),
    peerActive: (remote, active) => {
      const labels = { Local: l, Remote: idToHex(remote) };
      if (active) m.network.activePeers.inc(labels);
      else {
        m.network.activePeers.dec(labels);
        m.network.disconnectedPeers.inc(labels);
      }
    },
    // The prober's smoothed RTT, a few times a minute per peer (never per Raft message).
    observeRoundTrip: (to, seconds) => m.network.peerRoundTripTimeSeconds.observe({ To: idToHex(to) }, seconds),
    knownPeer: (remote, known) => m.network.knownPeers.set({ Local: l, Remote: idToHex(remote) }, known ? 1 : 0),
  };
}

// etcd's Prometheus metrics (names, types, help texts, labels and buckets as etcd 3.6 exports
// them) on a registry of our own, so tests and several servers in one process do not collide.

import assert from 'node:assert';
import fs from 'node:fs';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { createGrpcServerMetrics, type GrpcServerMetrics } from './grpc';

/** Go's prometheus.ExponentialBuckets. */
export function exponentialBuckets(start: number, factor: number, count: number): number[] {
  assert(start > 0 && factor > 1 && count >= 1);
  const out: number[] = [];
  for (let i = 0, v = start; i < count; i++, v *= factor) out.push(v);
  return out;
}

// 1 ms doubling up to 8.192 s: etcd's buckets for disk latencies.
const DISK_BUCKETS = exponentialBuckets(0.001, 2, 14);

export interface MetricsOptions {
  /** `--metrics=extensive` adds grpc_server_handling_seconds. */
  extensive?: boolean;
  /** etcd_server_version{server_version}. */
  serverVersion: string;
  /** process_* and nodejs_* collectors (default true). */
  defaultMetrics?: boolean;
  /** Pre-create the zero series of every etcd gRPC method (default true). */
  preRegisterGrpcMethods?: boolean;
}

export interface ServerMetrics {
  hasLeader: Gauge;
  isLeader: Gauge;
  isLearner: Gauge;
  leaderChangesSeen: Counter;
  heartbeatSendFailures: Counter;
  /** An apply that took longer than etcd's 100 ms warning threshold. */
  slowApply: Counter;
  /** /health answers; counters without the _total suffix, as etcd names them. */
  healthSuccess: Counter;
  healthFailures: Counter;
  snapshotApplyInProgress: Gauge;
  /** Gauges in etcd despite the _total suffix: set them to the raft indexes. */
  proposalsCommitted: Gauge;
  proposalsApplied: Gauge;
  proposalsPending: Gauge;
  proposalsFailed: Counter;
  slowReadIndexes: Counter;
  readIndexesFailed: Counter;
  leaseExpired: Counter;
  quotaBackendBytes: Gauge;
  learnerPromoteSuccesses: Counter;
  learnerPromoteFailures: Counter<'Reason'>;
  clientRequests: Counter<'type' | 'client_api_version'>;
}

export interface DiskMetrics {
  walFsyncDurationSeconds: Histogram;
  walWriteDurationSeconds: Histogram;
  /** A gauge in etcd. */
  walWriteBytes: Gauge;
  backendCommitDurationSeconds: Histogram;
  backendDefragDurationSeconds: Histogram;
  backendSnapshotDurationSeconds: Histogram;
  defragInflight: Gauge;
}

export interface MvccMetrics {
  rangeTotal: Counter;
  putTotal: Counter;
  deleteTotal: Counter;
  txnTotal: Counter;
  keysTotal: Gauge;
  watchStreamTotal: Gauge;
  watcherTotal: Gauge;
  slowWatcherTotal: Gauge;
  eventsTotal: Counter;
  pendingEventsTotal: Gauge;
  dbCompactionKeysTotal: Counter;
  dbCompactionLast: Gauge;
  dbTotalSizeInBytes: Gauge;
  dbTotalSizeInUseInBytes: Gauge;
  dbOpenReadTransactions: Gauge;
  currentRevision: Gauge;
  compactRevision: Gauge;
  totalPutSizeInBytes: Gauge;
  hashDurationSeconds: Histogram;
  hashRevDurationSeconds: Histogram;
}

export interface LeaseMetrics {
  grantedTotal: Counter;
  revokedTotal: Counter;
  renewedTotal: Counter;
}

export interface NetworkMetrics {
  clientGrpcSentBytes: Counter;
  clientGrpcReceivedBytes: Counter;
  serverStreamFailures: Counter<'Type' | 'API'>;
  knownPeers: Gauge<'Local' | 'Remote'>;
  /** Peer series are labelled by the remote member's ID in hex (To / From / Remote). */
  activePeers: Gauge<'Local' | 'Remote'>;
  disconnectedPeers: Counter<'Local' | 'Remote'>;
  peerSentBytes: Counter<'To'>;
  peerReceivedBytes: Counter<'From'>;
  peerSentFailures: Counter<'To'>;
  peerReceivedFailures: Counter<'From'>;
  peerRoundTripTimeSeconds: Histogram<'To'>;
  /** Ours, not etcd's: HTTP/2 connections cut off for going over a budget (src/h2/connection.ts CutOffReason). */
  http2CutOffs: Counter<'listener' | 'reason'>;
}

export interface EtcdMetrics {
  readonly registry: Registry;
  readonly server: ServerMetrics;
  readonly disk: DiskMetrics;
  readonly mvcc: MvccMetrics;
  readonly lease: LeaseMetrics;
  readonly network: NetworkMetrics;
  readonly grpc: GrpcServerMetrics;
  /** etcd_server_id{server_id="<hex>"} = 1 (replaces the previous ID). */
  setServerId(hexId: string): void;
  /** etcd_cluster_version{cluster_version="3.6"} = 1 (replaces the previous one). */
  setClusterVersion(version: string): void;
  /** etcd_server_feature_enabled{name,stage}. */
  setFeatureEnabled(name: string, stage: string, enabled: boolean): void;
  /** Run just before each scrape, e.g. to sample the database size (bounded list). */
  beforeScrape(fn: () => void): void;
  /** The /metrics response. */
  metricsText(): Promise<{ contentType: string; body: string }>;
}

const MAX_SCRAPE_HOOKS = 64;

export function createMetrics(opts: MetricsOptions): EtcdMetrics {
  const registry = new Registry();
  const registers = [registry];
  const gauge = <L extends string = string>(name: string, help: string, labelNames: L[] = []) =>
    new Gauge<L>({ name, help, labelNames, registers });
  const counter = <L extends string = string>(name: string, help: string, labelNames: L[] = []) =>
    new Counter<L>({ name, help, labelNames, registers });
  const histogram = <L extends string = string>(name: string, help: string, buckets: number[], labelNames: L[] = []) =>
    new Histogram<L>({ name, help, buckets, labelNames, registers });

  const server: ServerMetrics = {
    hasLeader: gauge('etcd_server_has_leader', 'Whether or not a leader exists. 1 is existence, 0 is not.'),
    isLeader: gauge('etcd_server_is_leader', 'Whether or not this member is a leader. 1 if is, 0 otherwise.'),
    isLearner: gauge('etcd_server_is_learner', 'Whether or not this member is a learner. 1 if is, 0 otherwise.'),
    leaderChangesSeen: counter('etcd_server_leader_changes_seen_total', 'The number of leader changes seen.'),
    heartbeatSendFailures: counter(
      'etcd_server_heartbeat_send_failures_total',
      'The total number of leader heartbeat send failures (likely overloaded from slow disk).',
    ),
    slowApply: counter('etcd_server_slow_apply_total', 'The total number of slow apply requests (likely overloaded from slow disk).'),
    healthSuccess: counter('etcd_server_health_success', 'The total number of successful health checks'),
    healthFailures: counter('etcd_server_health_failures', 'The total number of failed health checks'),
    snapshotApplyInProgress: gauge('etcd_server_snapshot_apply_in_progress_total', '1 if the server is applying the incoming snapshot. 0 if none.'),
    proposalsCommitted: gauge('etcd_server_proposals_committed_total', 'The total number of consensus proposals committed.'),
    proposalsApplied: gauge('etcd_server_proposals_applied_total', 'The total number of consensus proposals applied.'),
    proposalsPending: gauge('etcd_server_proposals_pending', 'The current number of pending proposals to commit.'),
    proposalsFailed: counter('etcd_server_proposals_failed_total', 'The total number of failed proposals seen.'),
    slowReadIndexes: counter(
      'etcd_server_slow_read_indexes_total',
      "The total number of pending read indexes not in sync with leader's or timed out read index requests.",
    ),
    readIndexesFailed: counter('etcd_server_read_indexes_failed_total', 'The total number of failed read indexes seen.'),
    leaseExpired: counter('etcd_debugging_server_lease_expired_total', 'The total number of expired leases.'),
    quotaBackendBytes: gauge('etcd_server_quota_backend_bytes', 'Current backend storage quota size in bytes.'),
    learnerPromoteSuccesses: counter(
      'etcd_server_learner_promote_successes',
      'The total number of successful learner promotions while this member is leader.',
    ),
    learnerPromoteFailures: counter(
      'etcd_server_learner_promote_failures',
      'The total number of failed learner promotions (likely learner not ready) while this member is leader.',
      ['Reason'],
    ),
    clientRequests: counter('etcd_server_client_requests_total', 'The total number of client requests per client version.', [
      'type',
      'client_api_version',
    ]),
  };

  const disk: DiskMetrics = {
    walFsyncDurationSeconds: histogram('etcd_disk_wal_fsync_duration_seconds', 'The latency distributions of fsync called by WAL.', DISK_BUCKETS),
    walWriteDurationSeconds: histogram('etcd_disk_wal_write_duration_seconds', 'The latency distributions of write called by WAL.', DISK_BUCKETS),
    walWriteBytes: gauge('etcd_disk_wal_write_bytes_total', 'Total number of bytes written in WAL.'),
    backendCommitDurationSeconds: histogram(
      'etcd_disk_backend_commit_duration_seconds',
      'The latency distributions of commit called by backend.',
      DISK_BUCKETS,
    ),
    backendDefragDurationSeconds: histogram(
      'etcd_disk_backend_defrag_duration_seconds',
      'The latency distribution of backend defragmentation.',
      exponentialBuckets(0.1, 2, 13),
    ),
    backendSnapshotDurationSeconds: histogram(
      'etcd_disk_backend_snapshot_duration_seconds',
      'The latency distribution of backend snapshots.',
      exponentialBuckets(0.01, 2, 17),
    ),
    defragInflight: gauge('etcd_disk_defrag_inflight', 'Whether or not defrag is active on the member. 1 means active, 0 means not.'),
  };

  const mvcc: MvccMetrics = {
    rangeTotal: counter('etcd_mvcc_range_total', 'Total number of ranges seen by this member.'),
    putTotal: counter('etcd_mvcc_put_total', 'Total number of puts seen by this member.'),
    deleteTotal: counter('etcd_mvcc_delete_total', 'Total number of deletes seen by this member.'),
    txnTotal: counter('etcd_mvcc_txn_total', 'Total number of txns seen by this member.'),
    keysTotal: gauge('etcd_debugging_mvcc_keys_total', 'Total number of keys.'),
    watchStreamTotal: gauge('etcd_debugging_mvcc_watch_stream_total', 'Total number of watch streams.'),
    watcherTotal: gauge('etcd_debugging_mvcc_watcher_total', 'Total number of watchers.'),
    slowWatcherTotal: gauge('etcd_debugging_mvcc_slow_watcher_total', 'Total number of unsynced slow watchers.'),
    eventsTotal: counter('etcd_debugging_mvcc_events_total', 'Total number of events sent by this member.'),
    pendingEventsTotal: gauge('etcd_debugging_mvcc_pending_events_total', 'Total number of pending events to be sent.'),
    dbCompactionKeysTotal: counter('etcd_debugging_mvcc_db_compaction_keys_total', 'Total number of db keys compacted.'),
    dbCompactionLast: gauge('etcd_debugging_mvcc_db_compaction_last', 'The unix time of the last db compaction. Resets to 0 on start.'),
    dbTotalSizeInBytes: gauge('etcd_mvcc_db_total_size_in_bytes', 'Total size of the underlying database physically allocated in bytes.'),
    dbTotalSizeInUseInBytes: gauge(
      'etcd_mvcc_db_total_size_in_use_in_bytes',
      'Total size of the underlying database logically in use in bytes.',
    ),
    dbOpenReadTransactions: gauge('etcd_mvcc_db_open_read_transactions', 'The number of currently open read transactions'),
    currentRevision: gauge('etcd_debugging_mvcc_current_revision', 'The current revision of store.'),
    compactRevision: gauge('etcd_debugging_mvcc_compact_revision', 'The revision of the last compaction in store.'),
    totalPutSizeInBytes: gauge('etcd_debugging_mvcc_total_put_size_in_bytes', 'The total size of put kv pairs seen by this member.'),
    hashDurationSeconds: histogram(
      'etcd_mvcc_hash_duration_seconds',
      'The latency distribution of storage hash operation.',
      exponentialBuckets(0.01, 2, 15),
    ),
    hashRevDurationSeconds: histogram(
      'etcd_mvcc_hash_rev_duration_seconds',
      'The latency distribution of storage hash by revision operation.',
      exponentialBuckets(0.01, 2, 15),
    ),
  };

  const lease: LeaseMetrics = {
    grantedTotal: counter('etcd_debugging_lease_granted_total', 'The total number of granted leases.'),
    revokedTotal: counter('etcd_debugging_lease_revoked_total', 'The total number of revoked leases.'),
    renewedTotal: counter('etcd_debugging_lease_renewed_total', 'The number of renewed leases seen by the leader.'),
  };

  const network: NetworkMetrics = {
    clientGrpcSentBytes: counter('etcd_network_client_grpc_sent_bytes_total', 'The total number of bytes sent to grpc clients.'),
    clientGrpcReceivedBytes: counter('etcd_network_client_grpc_received_bytes_total', 'The total number of bytes received from grpc clients.'),
    serverStreamFailures: counter('etcd_network_server_stream_failures_total', 'The total number of stream failures from the local server.', [
      'Type',
      'API',
    ]),
    knownPeers: gauge('etcd_network_known_peers', 'The current number of known peers.', ['Local', 'Remote']),
    activePeers: gauge('etcd_network_active_peers', 'The current number of active peer connections.', ['Local', 'Remote']),
    disconnectedPeers: counter('etcd_network_disconnected_peers_total', 'The total number of disconnected peers.', ['Local', 'Remote']),
    peerSentBytes: counter('etcd_network_peer_sent_bytes_total', 'The total number of bytes sent to peers.', ['To']),
    peerReceivedBytes: counter('etcd_network_peer_received_bytes_total', 'The total number of bytes received from peers.', ['From']),
    peerSentFailures: counter('etcd_network_peer_sent_failures_total', 'The total number of send failures from peers.', ['To']),
    peerReceivedFailures: counter('etcd_network_peer_received_failures_total', 'The total number of receive failures from peers.', ['From']),
    // 0.1 ms doubling up to 3.2768 s.
    peerRoundTripTimeSeconds: histogram(
      'etcd_network_peer_round_trip_time_seconds',
      'Round-Trip-Time histogram between peers',
      exponentialBuckets(0.0001, 2, 16),
      ['To'],
    ),
    http2CutOffs: counter(
      'etcdts_http2_connections_cut_off_total',
      'HTTP/2 connections ended for going over a budget (unread control frames or output, rapid reset, empty frames, header blocks, pings), by listener (client, peer) and reason.',
      ['listener', 'reason'],
    ),
  };

  const serverVersion = gauge('etcd_server_version', "Which version is running. 1 for 'server_version' label with current version.", [
    'server_version',
  ]);
  serverVersion.labels(opts.serverVersion).set(1);
  const serverId = gauge('etcd_server_id', "Server or member ID in hexadecimal format. 1 for 'server_id' label with current ID.", ['server_id']);
  const clusterVersion = gauge(
    'etcd_cluster_version',
    "Which version is running. 1 for 'cluster_version' label with current cluster version",
    ['cluster_version'],
  );
  const featureEnabled = gauge('etcd_server_feature_enabled', 'Whether or not a feature is enabled. 1 is enabled, 0 is not.', ['name', 'stage']);

  const grpc = createGrpcServerMetrics(registry, {
    handlingHistogram: opts.extensive ?? false,
    preRegister: opts.preRegisterGrpcMethods ?? true,
  });

  if (opts.defaultMetrics ?? true) {
    collectDefaultMetrics({ register: registry });
    // prom-client's gauges named *_total draw lint remarks (promtool) that etcd's own names
    // do not; the same figures remain in nodejs_active_{handles,requests,resources} by type.
    for (const name of ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total']) {
      registry.removeSingleMetric(name);
    }
    registerFdGauges(registry);
  }

  const hooks: Array<() => void> = [];
  return {
    registry,
    server,
    disk,
    mvcc,
    lease,
    network,
    grpc,
    setServerId(hexId) {
      serverId.reset();
      serverId.labels(hexId).set(1);
    },
    setClusterVersion(version) {
      clusterVersion.reset();
      clusterVersion.labels(version).set(1);
    },
    setFeatureEnabled(name, stage, enabled) {
      featureEnabled.labels(name, stage).set(enabled ? 1 : 0);
    },
    beforeScrape(fn) {
      assert(hooks.length < MAX_SCRAPE_HOOKS, 'too many scrape hooks');
      hooks.push(fn);
    },
    async metricsText() {
      for (const h of hooks) h();
      return { contentType: registry.contentType, body: await registry.metrics() };
    },
  };
}

/** etcd's os_fd_used and os_fd_limit (Linux: read from /proc at scrape time). */
function registerFdGauges(registry: Registry): void {
  if (!fs.existsSync('/proc/self/fd')) return;
  new Gauge({
    name: 'os_fd_used',
    help: 'The number of used file descriptors.',
    registers: [registry],
    collect() {
      try {
        // readdir holds one descriptor of its own while listing.
        this.set(Math.max(0, fs.readdirSync('/proc/self/fd').length - 1));
      } catch {
        // Leave the last value.
      }
    },
  });
  new Gauge({
    name: 'os_fd_limit',
    help: 'The file descriptor limit.',
    registers: [registry],
    collect() {
      try {
        const m = /^Max open files\s+(\d+)/m.exec(fs.readFileSync('/proc/self/limits', 'utf8'));
        if (m) this.set(Number(m[1]));
      } catch {
        // Leave the last value.
      }
    },
  });
}

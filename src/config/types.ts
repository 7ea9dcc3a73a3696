// The server configuration produced from etcd's flags and ETCD_* variables.

import type { LogFields, LogLevel } from '../log';
import type { ServerFeature } from './featuregates';
import type { EtcdUrl } from './urls';

export interface TlsFiles {
  certFile: string;
  keyFile: string;
  /** Explicit client-side certificate for outgoing connections (empty: certFile). */
  clientCertFile: string;
  clientKeyFile: string;
  trustedCaFile: string;
  clientCertAuth: boolean;
  crlFile: string;
  allowedHostnames: string[];
  /** Peer only: allowed certificate CNs. */
  allowedCns: string[];
  autoTls: boolean;
  /** Peer only. */
  skipClientSanVerify: boolean;
}

export interface Config {
  name: string;
  /** `--data-dir`, defaulting to `${name}.etcd` as etcd does. */
  dataDir: string;
  /** '' = `${dataDir}/member/wal`. */
  walDir: string;

  listenClientUrls: EtcdUrl[];
  listenClientHttpUrls: EtcdUrl[];
  /** Empty when --listen-client-urls was set without --advertise-client-urls (then validation fails). */
  advertiseClientUrls: EtcdUrl[];
  listenPeerUrls: EtcdUrl[];
  initialAdvertisePeerUrls: EtcdUrl[];
  listenMetricsUrls: EtcdUrl[];

  /** The `--initial-cluster` text after etcd's defaulting (name changes the default entry). */
  initialClusterText: string;
  /** Parsed `--initial-cluster`: member name -> its peer URLs. Empty when the text is invalid. */
  initialCluster: Map<string, EtcdUrl[]>;
  /**
   * Why `--initial-cluster` does not parse, if it does not. etcd only reports this when it
   * bootstraps a fresh member: log fatal "discovery failed" with
   * error "error setting up initial cluster: <this>".
   */
  initialClusterError: string | undefined;
  initialClusterState: 'new' | 'existing';
  initialClusterToken: string;
  strictReconfigCheck: boolean;
  preVote: boolean;
  initialElectionTickAdvance: boolean;
  forceNewCluster: boolean;
  maxLearners: number;

  heartbeatIntervalMs: number;
  electionTimeoutMs: number;
  /** electionTimeoutMs / heartbeatIntervalMs, rounded down (etcd's ElectionTicks). */
  electionTicks: number;
  snapshotCount: number;
  snapshotCatchUpEntries: number;
  maxSnapshots: number;
  maxWals: number;

  /** The flag as given: 0 = default (2 GiB), negative = quota disabled. */
  quotaBackendBytesFlag: number;
  /** Effective quota in bytes (2 GiB when the flag is 0); Infinity when disabled. */
  quotaBackendBytes: number;
  maxRequestBytes: number;
  maxTxnOps: number;
  maxConcurrentStreams: number;
  backendBatchIntervalMs: number;
  backendBatchLimit: number;
  backendFreelistType: 'map' | 'array';

  grpcKeepAliveMinTimeMs: number;
  grpcKeepAliveIntervalMs: number;
  grpcKeepAliveTimeoutMs: number;
  raftReadTimeoutMs: number;
  raftWriteTimeoutMs: number;
  socketReusePort: boolean;
  socketReuseAddress: boolean;
  enableGrpcGateway: boolean;

  autoCompactionMode: 'periodic' | 'revision';
  /** `--auto-compaction-retention` exactly as given. */
  autoCompactionRetention: string;
  /** periodic mode: retention window in ms (0 = off). A bare integer means hours. */
  autoCompactionRetentionMs: number;
  /** revision mode: revisions to keep (0 = off). */
  autoCompactionRetentionRevisions: number;
  compactionBatchLimit: number;
  compactionSleepIntervalMs: number;

  /** Effective interval (etcd's default 10 minutes when the flag is 0). */
  watchProgressNotifyIntervalMs: number;
  warningApplyDurationMs: number;
  warningUnaryRequestDurationMs: number;
  corruptCheckTimeMs: number;
  compactHashCheckTimeMs: number;
  downgradeCheckTimeMs: number;
  bootstrapDefragThresholdMegabytes: number;
  memoryMlock: boolean;
  unsafeNoFsync: boolean;

  featureGates: Record<ServerFeature, boolean>;

  logger: 'zap';
  logLevel: LogLevel;
  logOutputs: string[];
  logFormat: 'json' | 'console';
  enableLogRotation: boolean;
  logRotationConfigJson: string;

  enablePprof: boolean;
  metrics: 'basic' | 'extensive';

  authToken: string;
  bcryptCost: number;
  authTokenTtlSec: number;

  clientTls: TlsFiles;
  peerTls: TlsFiles;
  selfSignedCertValidityYears: number;
  cipherSuites: string[];
  tlsMinVersion: string;
  tlsMaxVersion: string;
  /** CORS origins; contains "*" for all. */
  cors: string[];
  hostWhitelist: string[];

  discovery: string;
  discoveryEndpoints: string[];
  discoveryToken: string;
  discoverySrv: string;
  discoverySrvName: string;

  enableDistributedTracing: boolean;

  /** The etcd version this server reports (Status, /version, metrics). */
  emulatedEtcdVersion: string;

  /** Every flag set on the command line or through ETCD_* (names without dashes prefix). */
  flagsExplicitlySet: ReadonlySet<string>;
  /** Flags we accept as etcd does but do not act on (names, in the order given). */
  acceptedButIgnored: string[];
}

/** A log entry produced while parsing; main writes them once its logger exists. */
export interface ConfigNotice {
  level: LogLevel;
  msg: string;
  fields?: LogFields;
}

export type ParseResult =
  | { kind: 'run'; config: Config; notices: ConfigNotice[] }
  /** Print `text` to stdout (and `usage` to stderr first, as etcd does), exit 0. */
  | { kind: 'help'; text: string; usage: string }
  /** Print `text` to stdout, exit 0. */
  | { kind: 'version'; text: string }
  /**
   * Exit with `exitCode`. Write `notices` as log entries (they include the failure itself,
   * e.g. warn "failed to verify flags"), then `stderrText` verbatim if present (Go's flag
   * package errors: one line plus the usage text).
   */
  | { kind: 'error'; message: string; exitCode: number; notices: ConfigNotice[]; stderrText?: string };

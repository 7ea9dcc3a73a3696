// Every flag etcd 3.6 defines, with its value type, default and help section. The help
// texts are ours; names, kinds and defaults are etcd's.

import { FeatureGateValue, knownFeatureLines } from './featuregates';
import {
  BoolValue,
  DurationValue,
  IgnoredValue,
  IntegerValue,
  SelectiveMultiValue,
  SelectiveValue,
  StringValue,
  StringsValue,
  Uint32Value,
  UniqueStringsValue,
  UniqueUrlsValue,
  type FlagValue,
} from './values';

export type HelpSection =
  | 'Member'
  | 'Clustering'
  | 'Security'
  | 'Auth'
  | 'Profiling and Monitoring'
  | 'Logging'
  | 'Experimental distributed tracing'
  | 'Experimental feature'
  | 'Unsafe feature';

export const HELP_SECTIONS: readonly HelpSection[] = [
  'Member',
  'Clustering',
  'Security',
  'Auth',
  'Profiling and Monitoring',
  'Logging',
  'Experimental distributed tracing',
  'Experimental feature',
  'Unsafe feature',
];

export interface FlagSpec {
  readonly name: string;
  /** Where `--help` lists it; undefined for flags etcd accepts but does not list. */
  readonly section: HelpSection | undefined;
  /** Default as `--help` shows it. */
  readonly defText: string;
  readonly help: string;
  readonly make: () => FlagValue;
}

const S = 1_000_000_000n;
const MIN = 60n * S;

function str(name: string, section: HelpSection | undefined, def: string, help: string): FlagSpec {
  return { name, section, defText: `'${def}'`, help, make: () => new StringValue(def) };
}
function bool(name: string, section: HelpSection | undefined, def: boolean, help: string): FlagSpec {
  return { name, section, defText: `'${def}'`, help, make: () => new BoolValue(def) };
}
function uint(name: string, section: HelpSection | undefined, def: number, help: string): FlagSpec {
  return { name, section, defText: `'${def}'`, help, make: () => new IntegerValue(BigInt(def), false) };
}
function int(name: string, section: HelpSection | undefined, def: number, help: string): FlagSpec {
  return { name, section, defText: `'${def}'`, help, make: () => new IntegerValue(BigInt(def), true) };
}
function dur(name: string, section: HelpSection | undefined, defNs: bigint, defText: string, help: string): FlagSpec {
  return { name, section, defText: `'${defText}'`, help, make: () => new DurationValue(defNs) };
}
function urls(name: string, section: HelpSection | undefined, def: string, help: string, exceptions = ['']): FlagSpec {
  return { name, section, defText: `'${def}'`, help, make: () => new UniqueUrlsValue(def, exceptions) };
}
function strings(name: string, section: HelpSection | undefined, help: string): FlagSpec {
  return { name, section, defText: "''", help, make: () => new StringsValue() };
}
function uniqueStrings(name: string, section: HelpSection | undefined, def: string, help: string): FlagSpec {
  return { name, section, defText: `'${def}'`, help, make: () => new UniqueStringsValue(def) };
}
function select(name: string, section: HelpSection | undefined, valids: string[], help: string): FlagSpec {
  return { name, section, defText: `'${valids[0]}'`, help, make: () => new SelectiveValue(valids) };
}

/** Flags from etcd 0.4/2.x that etcd still accepts and ignores (boolean-style, no argument). */
export const IGNORED_FLAGS: readonly string[] = [
  'cluster-active-size',
  'cluster-remove-delay',
  'cluster-sync-interval',
  'config',
  'force',
  'max-result-buffer',
  'max-retry-attempts',
  'peer-heartbeat-interval',
  'peer-election-timeout',
  'retry-interval',
  'snapshot',
  'v',
  'vv',
  'test.coverprofile',
  'test.outputdir',
];

const M: HelpSection = 'Member';
const C: HelpSection = 'Clustering';
const SEC: HelpSection = 'Security';
const LOG: HelpSection = 'Logging';
const PROF: HelpSection = 'Profiling and Monitoring';
const TR: HelpSection = 'Experimental distributed tracing';
const EXP: HelpSection = 'Experimental feature';
const DEPRECATED = ' Deprecated in v3.6, to be removed in v3.7; use';

export const FLAG_SPECS: readonly FlagSpec[] = [
  // Member
  str('name', M, 'default', 'Human-readable name of this member.'),
  { ...str('data-dir', M, '', 'Directory for the member data.'), defText: "'${name}.etcd'" },
  str('wal-dir', M, '', 'Separate directory for the write-ahead log (optional).'),
  uint('snapshot-count', M, 10000, 'Committed entries between two snapshots.'),
  uint('heartbeat-interval', M, 100, 'Heartbeat interval in milliseconds.'),
  uint('election-timeout', M, 1000, 'Election timeout in milliseconds.'),
  bool('initial-election-tick-advance', M, true, 'Fast-forward election ticks at start for a quicker first election.'),
  urls('listen-peer-urls', M, 'http://localhost:2380', 'URLs to listen on for peer traffic.'),
  urls('listen-client-urls', M, 'http://localhost:2379', 'URLs to listen on for client gRPC traffic (and HTTP unless --listen-client-http-urls is set).'),
  urls('listen-client-http-urls', M, '', 'URLs to listen on for HTTP-only client traffic; moves HTTP off --listen-client-urls.'),
  uint('max-snapshots', M, 5, `Snapshot files to keep (0 keeps all).${DEPRECATED.replace('v3.7', 'v3.8').replace('; use', '.')}`),
  uint('max-wals', M, 5, 'WAL files to keep (0 keeps all).'),
  bool('memory-mlock', M, false, 'Lock the database pages in RAM.'),
  int('quota-backend-bytes', M, 0, 'Size limit of the backend database in bytes; over it an alarm makes the cluster read-only. 0 means the 2 GiB default.'),
  { ...str('backend-bbolt-freelist-type', M, '', 'Freelist type of the backend database (array or map).'), defText: "'map'" },
  dur('backend-batch-interval', M, 0n, '', 'Longest time before a backend transaction is committed.'),
  int('backend-batch-limit', M, 0, 'Most operations before a backend transaction is committed.'),
  uint('max-txn-ops', M, 128, 'Most operations allowed in one transaction.'),
  uint('max-request-bytes', M, 1572864, 'Largest client request in bytes the server accepts.'),
  {
    name: 'max-concurrent-streams',
    section: M,
    defText: "'math.MaxUint32'",
    help: 'Most concurrent streams each client may open.',
    make: () => new Uint32Value(0xffffffffn),
  },
  dur('grpc-keepalive-min-time', M, 5n * S, '5s', 'Shortest interval a client should wait between pings.'),
  dur('grpc-keepalive-interval', M, 120n * MIN, '2h', 'Interval of server-to-client pings (0 disables).'),
  dur('grpc-keepalive-timeout', M, 20n * S, '20s', 'Wait for a ping answer before closing the connection (0 disables).'),
  bool('socket-reuse-port', M, false, 'Set SO_REUSEPORT on listeners.'),
  bool('socket-reuse-address', M, false, 'Set SO_REUSEADDR on listeners.'),
  bool('enable-grpc-gateway', M, true, 'Serve the JSON/HTTP gateway to the gRPC API.'),
  dur('raft-read-timeout', M, 5n * S, '5s', 'Read timeout of each peer connection.'),
  dur('raft-write-timeout', M, 5n * S, '5s', 'Write timeout of each peer connection.'),
  {
    name: 'feature-gates',
    section: M,
    defText: "''",
    help: 'Comma-separated Name=true|false switches of server features. Known features:\n    ' + knownFeatureLines().join('\n    '),
    make: () => new FeatureGateValue(),
  },
  // Clustering
  urls('initial-advertise-peer-urls', C, 'http://localhost:2380', "This member's peer URLs as announced to the rest of the cluster."),
  str('initial-cluster', C, 'default=http://localhost:2380', 'Members of the cluster at bootstrap: name=peerURL,...'),
  select('initial-cluster-state', C, ['new', 'existing'], "'new' to bootstrap a new cluster, 'existing' to join one. Ignored once the member is initialized."),
  str('initial-cluster-token', C, 'etcd-cluster', 'Token that distinguishes this cluster during bootstrap.'),
  urls('advertise-client-urls', C, 'http://localhost:2379', "This member's client URLs as announced to clients."),
  str('discovery', C, '', 'v2 discovery URL used to bootstrap the cluster.'),
  str('discovery-token', C, '', 'v3 discovery: token of the cluster to bootstrap.'),
  uniqueStrings('discovery-endpoints', C, '', 'v3 discovery: gRPC endpoints of the discovery service.'),
  dur('discovery-dial-timeout', C, 2n * S, '2s', 'v3 discovery: dial timeout.'),
  dur('discovery-request-timeout', C, 5n * S, '5s', 'v3 discovery: request timeout.'),
  dur('discovery-keepalive-time', C, 2n * S, '2s', 'v3 discovery: keepalive time.'),
  dur('discovery-keepalive-timeout', C, 6n * S, '6s', 'v3 discovery: keepalive timeout.'),
  bool('discovery-insecure-transport', C, true, 'v3 discovery: no transport security.'),
  bool('discovery-insecure-skip-tls-verify', C, false, 'v3 discovery: do not verify the server certificate.'),
  str('discovery-cert', C, '', 'v3 discovery: client TLS certificate.'),
  str('discovery-key', C, '', 'v3 discovery: client TLS key.'),
  str('discovery-cacert', C, '', 'v3 discovery: CA bundle.'),
  str('discovery-user', C, '', 'v3 discovery: username[:password].'),
  str('discovery-password', C, '', 'v3 discovery: password.'),
  select('discovery-fallback', C, ['exit', 'proxy'], "What to do when discovery fails; only 'exit' remains."),
  str('discovery-proxy', C, '', 'HTTP proxy for the v2 discovery service.'),
  str('discovery-srv', C, '', 'DNS SRV domain used to bootstrap the cluster.'),
  str('discovery-srv-name', C, '', 'Suffix of the DNS SRV name queried at bootstrap.'),
  bool('strict-reconfig-check', C, true, 'Refuse membership changes that would lose quorum.'),
  bool('pre-vote', C, true, 'Run the Raft pre-vote phase before elections.'),
  str('auto-compaction-retention', C, '0', 'History kept by automatic compaction; 0 disables it.'),
  str('auto-compaction-mode', C, 'periodic', "How to read --auto-compaction-retention: 'periodic' (a duration, hours without unit) or 'revision' (a count)."),
  {
    name: 'v2-deprecation',
    section: C,
    defText: "'write-only'",
    help: 'Stage of the v2 store deprecation; only the default is honoured.',
    make: () => new SelectiveMultiValue(['write-only', 'write-only-skip-check', 'write-only-drop-data', 'gone']),
  },
  // Security
  str('cert-file', SEC, '', 'TLS certificate of the client server.'),
  str('key-file', SEC, '', 'TLS key of the client server.'),
  bool('client-cert-auth', SEC, false, 'Require client certificates.'),
  str('client-cert-file', SEC, '', 'Client certificate used when client auth is required (default: --cert-file).'),
  str('client-key-file', SEC, '', 'Client key used when client auth is required (default: --key-file).'),
  str('client-crl-file', SEC, '', 'Client certificate revocation list.'),
  strings('client-cert-allowed-hostname', SEC, 'Comma-separated SAN hostnames allowed for client certificates.'),
  str('trusted-ca-file', SEC, '', 'CA used to verify client certificates.'),
  bool('auto-tls', SEC, false, 'Client TLS with self-generated certificates.'),
  str('peer-cert-file', SEC, '', 'TLS certificate of the peer server.'),
  str('peer-key-file', SEC, '', 'TLS key of the peer server.'),
  bool('peer-client-cert-auth', SEC, false, 'Require peer client certificates.'),
  str('peer-client-cert-file', SEC, '', 'Peer client certificate (default: --peer-cert-file).'),
  str('peer-client-key-file', SEC, '', 'Peer client key (default: --peer-key-file).'),
  str('peer-trusted-ca-file', SEC, '', 'CA used to verify peer certificates.'),
  strings('peer-cert-allowed-cn', SEC, 'Comma-separated CNs allowed for peer certificates.'),
  strings('peer-cert-allowed-hostname', SEC, 'Comma-separated SAN hostnames allowed for peer certificates.'),
  bool('peer-auto-tls', SEC, false, 'Peer TLS with self-generated certificates when no peer key/cert is given.'),
  uint('self-signed-cert-validity', SEC, 1, 'Validity in years of self-generated certificates.'),
  str('peer-crl-file', SEC, '', 'Peer certificate revocation list.'),
  strings('cipher-suites', SEC, 'Comma-separated TLS cipher suites (empty: the runtime default).'),
  { ...urls('cors', SEC, '*', 'Comma-separated CORS origins (empty or * allows all).', ['*']) },
  uniqueStrings('host-whitelist', SEC, '*', 'Hostnames accepted from HTTP clients of an insecure server (empty or * allows all).'),
  str('tls-min-version', SEC, 'TLS1.2', 'Lowest TLS version: TLS1.2 or TLS1.3.'),
  str('tls-max-version', SEC, '', 'Highest TLS version: TLS1.2 or TLS1.3 (empty: the runtime default).'),
  bool('experimental-peer-skip-client-san-verification', SEC, false, `Skip the SAN check of peer client certificates.${DEPRECATED} --peer-skip-client-san-verification.`),
  bool('peer-skip-client-san-verification', SEC, false, 'Skip the SAN check of peer client certificates.'),
  // Auth
  str('auth-token', 'Auth', 'simple', "Auth token type and options ('simple' or 'jwt,...')."),
  uint('bcrypt-cost', 'Auth', 10, 'bcrypt cost for password hashes (4 to 31).'),
  uint('auth-token-ttl', 'Auth', 300, 'Lifetime of simple auth tokens in seconds.'),
  // Profiling and Monitoring
  bool('enable-pprof', PROF, false, 'Serve profiling data under the client URL + "/debug/pprof/".'),
  str('metrics', PROF, 'basic', "Metrics detail: 'basic' or 'extensive' (adds gRPC histograms)."),
  urls('listen-metrics-urls', PROF, '', 'Extra URLs serving /metrics and /health.'),
  // Logging
  str('logger', LOG, 'zap', "Logger; only 'zap' (structured) remains."),
  uniqueStrings('log-outputs', LOG, 'default', "Comma-separated log targets: 'default', 'stderr', 'stdout' or file paths."),
  str('log-level', LOG, 'info', 'Lowest level logged: debug, info, warn, error, panic or fatal.'),
  str('log-format', LOG, 'json', 'Log encoding: json or console.'),
  bool('enable-log-rotation', LOG, false, 'Rotate the single file log output.'),
  str('log-rotation-config-json', LOG, '{"maxsize": 100, "maxage": 0, "maxbackups": 0, "localtime": false, "compress": false}', 'Log rotation settings as JSON.'),
  dur('warning-unary-request-duration', LOG, 0n, '300ms', 'Unary requests slower than this are logged.'),
  // Experimental distributed tracing
  bool('experimental-enable-distributed-tracing', TR, false, `Enable OpenTelemetry tracing.${DEPRECATED} --enable-distributed-tracing.`),
  bool('enable-distributed-tracing', TR, false, 'Enable OpenTelemetry tracing.'),
  str('experimental-distributed-tracing-address', TR, 'localhost:4317', `Tracing collector address.${DEPRECATED} --distributed-tracing-address.`),
  str('distributed-tracing-address', TR, 'localhost:4317', 'Tracing collector address.'),
  str('experimental-distributed-tracing-service-name', TR, 'etcd', `Tracing service name.${DEPRECATED} --distributed-tracing-service-name.`),
  str('distributed-tracing-service-name', TR, 'etcd', 'Tracing service name (the same on all members).'),
  str('experimental-distributed-tracing-instance-id', TR, '', `Tracing instance ID.${DEPRECATED} --distributed-tracing-instance-id.`),
  str('distributed-tracing-instance-id', TR, '', 'Tracing instance ID (unique per member).'),
  int('experimental-distributed-tracing-sampling-rate', TR, 0, `Sampled spans per million.${DEPRECATED} --distributed-tracing-sampling-rate.`),
  int('distributed-tracing-sampling-rate', TR, 0, 'Sampled spans per million.'),
  // Experimental feature
  bool('experimental-initial-corrupt-check', EXP, false, `Check data for corruption before serving.${DEPRECATED} --feature-gates=InitialCorruptCheck=true.`),
  dur('experimental-corrupt-check-time', EXP, 0n, '0s', `Interval of cluster corruption checks.${DEPRECATED} --corrupt-check-time.`),
  dur('corrupt-check-time', EXP, 0n, '0s', 'Interval of cluster corruption checks.'),
  bool('experimental-compact-hash-check-enabled', EXP, false, `Leader checks followers' compaction hashes.${DEPRECATED} --feature-gates=CompactHashCheck=true.`),
  dur('experimental-compact-hash-check-time', EXP, MIN, '1m', `Interval of compaction hash checks.${DEPRECATED} --compact-hash-check-time.`),
  dur('compact-hash-check-time', EXP, MIN, '1m', 'Interval of compaction hash checks.'),
  bool('experimental-enable-lease-checkpoint', EXP, false, `Leader checkpoints remaining lease TTLs.${DEPRECATED} --feature-gates=LeaseCheckpoint=true.`),
  bool('experimental-enable-lease-checkpoint-persist', EXP, false, `Persist lease checkpoints.${DEPRECATED} --feature-gates=LeaseCheckpointPersist=true.`),
  { ...int('experimental-compaction-batch-limit', EXP, 0, `Revisions deleted per compaction batch.${DEPRECATED} --compaction-batch-limit.`), defText: '1000' },
  { ...int('compaction-batch-limit', EXP, 0, 'Revisions deleted per compaction batch.'), defText: '1000' },
  dur('experimental-compaction-sleep-interval', EXP, 0n, '', `Pause between compaction batches.${DEPRECATED} --compaction-sleep-interval.`),
  dur('compaction-sleep-interval', EXP, 0n, '', 'Pause between compaction batches.'),
  dur('experimental-watch-progress-notify-interval', EXP, 0n, '10m', `Interval of watch progress notifications.${DEPRECATED} --watch-progress-notify-interval.`),
  dur('watch-progress-notify-interval', EXP, 0n, '10m', 'Interval of watch progress notifications.'),
  dur('experimental-warning-apply-duration', EXP, 0n, '100ms', `Applies slower than this are logged.${DEPRECATED} --warning-apply-duration.`),
  dur('warning-apply-duration', EXP, 100_000_000n, '100ms', 'Applies slower than this are logged.'),
  dur('experimental-warning-unary-request-duration', EXP, 0n, '300ms', `Unary requests slower than this are logged.${DEPRECATED} --warning-unary-request-duration.`),
  bool('experimental-txn-mode-write-with-shared-buffer', EXP, true, `Write transactions read through the shared buffer.${DEPRECATED} --feature-gates=TxnModeWriteWithSharedBuffer=true.`),
  { ...uint('experimental-bootstrap-defrag-threshold-megabytes', EXP, 0, `Defragment at start when that frees at least this many MB.${DEPRECATED} --bootstrap-defrag-threshold-megabytes.`), defText: '' },
  { ...uint('bootstrap-defrag-threshold-megabytes', EXP, 0, 'Defragment at start when that frees at least this many MB (0 disables).'), defText: '' },
  int('max-learners', EXP, 1, 'Most learner members allowed in the cluster.'),
  dur('experimental-downgrade-check-time', EXP, 5n * S, '5s', `Interval of downgrade status checks.${DEPRECATED} --downgrade-check-time.`),
  dur('downgrade-check-time', EXP, 5n * S, '5s', 'Interval of downgrade status checks.'),
  bool('experimental-memory-mlock', EXP, false, `Lock the database pages in RAM.${DEPRECATED} --memory-mlock.`),
  { ...uint('experimental-snapshot-catchup-entries', EXP, 5000, `Entries kept for slow followers after a snapshot.${DEPRECATED} --snapshot-catchup-entries.`), defText: '' },
  { ...uint('snapshot-catchup-entries', EXP, 5000, 'Entries kept for slow followers after a snapshot.'), defText: '' },
  bool('experimental-stop-grpc-service-on-defrag', EXP, false, `Stop serving gRPC during defragmentation.${DEPRECATED} --feature-gates=StopGRPCServiceOnDefrag=true.`),
  // Unsafe feature
  bool('force-new-cluster', 'Unsafe feature', false, 'Start a new one-member cluster from existing data.'),
  bool('unsafe-no-fsync', 'Unsafe feature', false, 'Do not fsync (data loss on crash).'),
  // Listed in the usage lines, not in the flag sections.
  str('config-file', undefined, '', 'Server configuration file; when given, flags and environment variables are ignored.'),
  bool('version', undefined, false, 'Print the version and exit.'),
  ...IGNORED_FLAGS.map((name): FlagSpec => ({ name, section: undefined, defText: '', help: '', make: () => new IgnoredValue() })),
];

/** Deprecated 3.6 flag -> its replacement; setting both is an error. */
export const EXPERIMENTAL_FLAG_MIGRATION: Readonly<Record<string, string>> = {
  'experimental-compact-hash-check-time': 'compact-hash-check-time',
  'experimental-corrupt-check-time': 'corrupt-check-time',
  'experimental-compaction-batch-limit': 'compaction-batch-limit',
  'experimental-watch-progress-notify-interval': 'watch-progress-notify-interval',
  'experimental-warning-apply-duration': 'warning-apply-duration',
  'experimental-bootstrap-defrag-threshold-megabytes': 'bootstrap-defrag-threshold-megabytes',
  'experimental-memory-mlock': 'memory-mlock',
  'experimental-snapshot-catchup-entries': 'snapshot-catchup-entries',
  'experimental-compaction-sleep-interval': 'compaction-sleep-interval',
  'experimental-downgrade-check-time': 'downgrade-check-time',
  'experimental-peer-skip-client-san-verification': 'peer-skip-client-san-verification',
  'experimental-enable-distributed-tracing': 'enable-distributed-tracing',
  'experimental-distributed-tracing-address': 'distributed-tracing-address',
  'experimental-distributed-tracing-service-name': 'distributed-tracing-service-name',
  'experimental-distributed-tracing-instance-id': 'distributed-tracing-instance-id',
  'experimental-distributed-tracing-sampling-rate': 'distributed-tracing-sampling-rate',
};

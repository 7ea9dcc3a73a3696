// From flag values to a validated Config: etcd's configFromCmdLine defaulting, embed.Config
// Validate (same checks, same order, same texts) and etcdmain's start-up defaulting.

import { formatGoDuration, parseLogLevel, type LogLevel } from '../log';
import { EXPERIMENTAL_FLAG_FEATURES } from './featuregates';
import { ERR_UNSET_ADVERTISE_CLIENT_URLS, Invalid, PanicExit, StartFailure } from './failures';
import type { Flags } from './flagreader';
import { EXPERIMENTAL_FLAG_MIGRATION } from './flags';
import { goQuote, parseGoAtoi, parseGoDuration } from './goparse';
import type { Config, ConfigNotice, TlsFiles } from './types';
import { isIpLiteral, parseInitialCluster, type EtcdUrl } from './urls';
import { ETCD_VERSION } from './version';
import { defaultHostFromRoutes } from './defaulthost';

const DEFAULT_NAME = 'default';
const DEFAULT_QUOTA_BYTES = 2 * 1024 * 1024 * 1024;
const MAX_ELECTION_MS = 50000;
const DEFAULT_WATCH_PROGRESS_NOTIFY_MS = 10 * 60 * 1000;
const DEFAULT_WARNING_UNARY_REQUEST_MS = 300;
const DEFAULT_ADVERTISE_PEER_URL = 'http://localhost:2380';
const DEFAULT_ADVERTISE_CLIENT_URL = 'http://localhost:2379';

const ERR_CONFLICT_BOOTSTRAP =
  'multiple discovery or bootstrap flags are set. Choose one of "initial-cluster", "discovery", "discovery-endpoints" or "discovery-srv"';

function checkBindUrls(urls: readonly EtcdUrl[]): void {
  for (const u of urls) {
    if (u.scheme === 'unix' || u.scheme === 'unixs') continue;
    if (u.hostname === 'localhost') continue;
    if (!isIpLiteral(u.hostname)) throw new Invalid(`expected IP in URL for binding (${u.text})`);
  }
}

function checkHostUrls(urls: readonly EtcdUrl[], flag: string): void {
  for (const u of urls) {
    if (u.hostname === '') {
      const all = urls.map((x) => x.text).join(',');
      throw new Invalid(`${flag} ${goQuote(all)} must be "host:port" (unexpected empty host (${u.text}))`);
    }
  }
}

function tlsVersionRank(v: string): number {
  if (v === '') return 0;
  if (v === 'TLS1.2') return 12;
  if (v === 'TLS1.3') return 13;
  throw new Invalid(`unexpected TLS version ${goQuote(v)} (must be one of: TLS1.2, TLS1.3)`);
}

function initialClusterFromName(name: string, advertisePeer: readonly EtcdUrl[]): string {
  const n = name === '' ? DEFAULT_NAME : name;
  return advertisePeer.map((u) => `${n}=${u.text}`).join(',');
}

const DEPRECATED_FLAG_WARNINGS: Readonly<Record<string, string>> = {
  'max-snapshots': '--max-snapshots is deprecated in 3.6 and will be decommissioned in 3.8.',
  'v2-deprecation': '--v2-deprecation is deprecated and scheduled for removal in v3.8. The default value is enforced, ignoring user input.',
  'experimental-compact-hash-check-enabled':
    "--experimental-compact-hash-check-enabled is deprecated in 3.6 and will be decommissioned in 3.7. Use '--feature-gates=CompactHashCheck=true' instead.",
  'experimental-txn-mode-write-with-shared-buffer':
    "--experimental-txn-mode-write-with-shared-buffer is deprecated in v3.6 and will be decommissioned in v3.7. Use '--feature-gates=TxnModeWriteWithSharedBuffer=true' instead.",
};
function deprecationWarning(flag: string): string | undefined {
  const fixed = DEPRECATED_FLAG_WARNINGS[flag];
  if (fixed !== undefined) return fixed;
  const replacement = EXPERIMENTAL_FLAG_MIGRATION[flag];
  if (replacement === undefined || flag === 'experimental-peer-skip-client-san-verification') return undefined;
  return `--${flag} is deprecated in v3.6 and will be decommissioned in v3.7. Use '--${replacement}' instead.`;
}

export interface Parsed {
  config: Config;
  /** Logged while parsing, before etcd's "Running: " line. */
  warnings: ConfigNotice[];
  /** Logged by etcdmain after "Running: ". */
  afterRunning: ConfigNotice[];
}

export function buildConfig(f: Flags, fromFile: boolean): Parsed {
  const fs = f.fs;
  const set = (n: string) => fs.isSet(n);
  const warnings: ConfigNotice[] = [];

  // Experimental flags that became feature gates: both forms at once is an error.
  const gates = f.gates();
  const gatesText = gates.toString();
  const fromExperimental = new Map<string, boolean>();
  for (const [flag, feature] of Object.entries(EXPERIMENTAL_FLAG_FEATURES)) {
    if (!set(flag)) continue;
    const v = f.bool(flag);
    if (gatesText.includes(feature)) {
      const cur = gates.enabled(feature);
      throw new Invalid(
        `cannot specify both flags: --${flag}=${v} and --feature-gates=${feature}=${cur} at the same time, please just use --feature-gates=${feature}=${cur}`,
      );
    }
    fromExperimental.set(feature, v);
  }
  gates.setFromMap(fromExperimental);

  const listenClientUrls = f.urls('listen-client-urls');
  let advertiseClientUrls = f.urls('advertise-client-urls');
  // Only on the command line does an explicit listen URL drop the default advertise URL.
  if (!fromFile && set('listen-client-urls') && !set('advertise-client-urls')) advertiseClientUrls = [];
  const discoveryEndpoints = f.uniqueStrings('discovery-endpoints');
  let initialClusterText = f.str('initial-cluster');
  const durl = f.str('discovery');
  const dnsCluster = f.str('discovery-srv');
  const dnsClusterServiceName = f.str('discovery-srv-name');
  if ((durl !== '' || dnsCluster !== '' || dnsClusterServiceName !== '' || discoveryEndpoints.length > 0) && !set('initial-cluster')) {
    initialClusterText = '';
  }

  // cfg.validate()
  if (f.select('discovery-fallback') === 'proxy') {
    throw new Invalid(`v2 proxy is deprecated, and --discovery-fallback can't be configured as "proxy"`);
  }
  // embed.Config.Validate()
  for (const [oldFlag, newFlag] of Object.entries(EXPERIMENTAL_FLAG_MIGRATION)) {
    if (set(oldFlag) && set(newFlag)) {
      throw new Invalid(`cannot set --${oldFlag} and --${newFlag} at the same time, please use --${newFlag} only`);
    }
  }
  // setupLogging
  const logger = f.str('logger');
  if (logger === 'capnslog') throw new Invalid('--logger=capnslog is removed in v3.5');
  if (logger !== 'zap') throw new Invalid(`unknown logger option ${goQuote(logger)}`);
  let logOutputs = f.uniqueStrings('log-outputs');
  if (logOutputs.length === 0) logOutputs = ['default'];
  if (logOutputs.length > 1 && logOutputs.includes('default')) {
    throw new Invalid(`multi logoutput for "default" is not supported yet`);
  }
  const enableLogRotation = f.bool('enable-log-rotation');
  if (enableLogRotation) {
    const files = logOutputs.filter((o) => o !== 'default' && o !== 'stderr' && o !== 'stdout').length;
    if ((logOutputs.length === 1 && files === 0) || files > 1) {
      throw new Invalid('--log-outputs requires a single file path when --log-rotate-config-json is defined');
    }
  }
  const logLevelText = f.str('log-level');
  const logLevel: LogLevel | undefined = parseLogLevel(logLevelText);
  if (logLevel === undefined) throw new PanicExit(`unrecognized level: ${goQuote(logLevelText)}`);
  const logFormatText = f.str('log-format');
  if (logFormatText !== 'json' && logFormatText !== 'console' && logFormatText !== '') {
    throw new Invalid(`unknown log format: ${logFormatText}, supported values json, console`);
  }
  const logFormat = logFormatText === 'console' ? 'console' : 'json';

  const listenPeerUrls = f.urls('listen-peer-urls');
  const listenClientHttpUrls = f.urls('listen-client-http-urls');
  const listenMetricsUrls = f.urls('listen-metrics-urls');
  let advertisePeerUrls = f.urls('initial-advertise-peer-urls');
  checkBindUrls(listenPeerUrls);
  checkBindUrls(listenClientUrls);
  checkBindUrls(listenClientHttpUrls);
  if (listenClientHttpUrls.length === 0) {
    warnings.push({ level: 'warn', msg: 'Running http and grpc server on single port. This is not recommended for production.' });
  }
  checkBindUrls(listenMetricsUrls);
  checkHostUrls(advertisePeerUrls, '--initial-advertise-peer-urls');
  checkHostUrls(advertiseClientUrls, '--advertise-client-urls');

  const discoveryToken = f.str('discovery-token');
  const nSet = [durl !== '', initialClusterText !== '', dnsCluster !== '', discoveryEndpoints.length > 0].filter(Boolean).length;
  if (nSet > 1) throw new Invalid(ERR_CONFLICT_BOOTSTRAP);
  const v2Discovery = f.str('discovery-proxy') !== '';
  const v3Discovery =
    discoveryEndpoints.length > 0 ||
    discoveryToken !== '' ||
    ['discovery-cert', 'discovery-key', 'discovery-cacert', 'discovery-user', 'discovery-password'].some((n) => f.str(n) !== '');
  if (v2Discovery && v3Discovery) {
    throw new Invalid(
      'both v2 discovery settings (discovery, discovery-proxy) and v3 discovery settings (discovery-token, discovery-endpoints, discovery-cert, discovery-key, discovery-cacert, discovery-user, discovery-password) are set',
    );
  }
  if ((discoveryToken !== '') !== (discoveryEndpoints.length > 0)) {
    throw new Invalid('both --discovery-token and --discovery-endpoints must be set');
  }
  if (discoveryEndpoints.some((ep) => ep.trim() === '')) {
    throw new Invalid('--discovery-endpoints must not contain empty endpoints');
  }

  const tickMs = f.num('heartbeat-interval');
  const electionMs = f.num('election-timeout');
  if (tickMs === 0) throw new Invalid(`--heartbeat-interval must be >0 (set to ${tickMs}ms)`);
  if (electionMs === 0) throw new Invalid(`--election-timeout must be >0 (set to ${electionMs}ms)`);
  if (5 * tickMs > electionMs) {
    throw new Invalid(`--election-timeout[${electionMs}ms] should be at least as 5 times as --heartbeat-interval[${tickMs}ms]`);
  }
  if (electionMs > MAX_ELECTION_MS) {
    throw new Invalid(`--election-timeout[${electionMs}ms] is too long, and should be set less than ${MAX_ELECTION_MS}ms`);
  }
  if (listenClientUrls.length > 0 && advertiseClientUrls.length === 0) {
    throw new Invalid(ERR_UNSET_ADVERTISE_CLIENT_URLS);
  }
  const autoCompactionMode = f.str('auto-compaction-mode');
  if (autoCompactionMode === '') throw new Invalid('undefined auto-compaction-mode');
  if (autoCompactionMode !== 'periodic' && autoCompactionMode !== 'revision') {
    throw new Invalid(`unknown auto-compaction-mode ${goQuote(autoCompactionMode)}`);
  }

  // Values of deprecated experimental flags carry over to their replacements.
  const pick = <T>(oldFlag: string, newFlag: string, read: (n: string) => T): T => read(set(oldFlag) ? oldFlag : newFlag);

  const enableTracing = pick('experimental-enable-distributed-tracing', 'enable-distributed-tracing', (n) => f.bool(n));
  if (enableTracing) {
    const rate = pick('experimental-distributed-tracing-sampling-rate', 'distributed-tracing-sampling-rate', (n) => f.num(n));
    const why = rate < 0 ? 'tracing sampling rate must be positive' : rate > 1_000_000 ? 'tracing sampling rate must be less than 1000000' : undefined;
    if (why !== undefined) throw new Invalid(`distributed tracing configurition is not valid: (${why})`);
  }
  if (gates.enabled('LeaseCheckpoint') && !gates.enabled('LeaseCheckpointPersist')) {
    warnings.push({ level: 'warn', msg: 'Detected that checkpointing is enabled without persistence. Consider enabling feature gate LeaseCheckpointPersist' });
  }
  if (gates.enabled('LeaseCheckpointPersist') && !gates.enabled('LeaseCheckpoint')) {
    throw new Invalid('enabling feature gate LeaseCheckpointPersist requires enabling feature gate LeaseCheckpoint');
  }
  for (const n of ['experimental-compact-hash-check-time', 'compact-hash-check-time']) {
    const ns = f.ns(n);
    if (ns <= 0n) throw new Invalid(`--${n} must be >0 (set to ${formatGoDuration(ns)})`);
  }
  const name = f.str('name');
  if (name === DEFAULT_NAME) {
    warnings.push({
      level: 'warn',
      msg: "it isn't recommended to use default name, please set a value for --name. Note that etcd might run into issue when multiple members have the same default name",
      fields: { name },
    });
  }
  const tlsMinVersion = f.str('tls-min-version');
  const tlsMaxVersion = f.str('tls-max-version');
  const minRank = tlsVersionRank(tlsMinVersion);
  const maxRank = tlsVersionRank(tlsMaxVersion);
  if (maxRank !== 0 && minRank > maxRank) {
    throw new Invalid(`min version (${tlsMinVersion}) is greater than max version (${tlsMaxVersion})`);
  }
  const cipherSuites = f.strings('cipher-suites');
  if (minRank === 13 && cipherSuites.length > 0) {
    throw new Invalid('cipher suites cannot be configured when only TLS1.3 is enabled');
  }

  // etcdmain.parse, after validation.
  const expUnary = f.ms('experimental-warning-unary-request-duration');
  const unary = f.ms('warning-unary-request-duration');
  if (expUnary !== 0 && unary !== 0) {
    throw new Invalid(
      'both --experimental-warning-unary-request-duration and --warning-unary-request-duration flags are set. Use only --warning-unary-request-duration',
    );
  }
  if (unary === 0 && expUnary !== 0) {
    warnings.push({
      level: 'warn',
      msg: '--experimental-warning-unary-request-duration is deprecated, and will be decommissioned in v3.7. Use --warning-unary-request-duration instead.',
    });
  }
  const warningUnaryRequestDurationMs = unary !== 0 ? unary : expUnary !== 0 ? expUnary : DEFAULT_WARNING_UNARY_REQUEST_MS;
  for (const flag of [...fs.actual].sort()) {
    const w = deprecationWarning(flag);
    if (w !== undefined) warnings.push({ level: 'warn', msg: w });
  }

  // etcdmain.startEtcdOrProxyV2: default host for 0.0.0.0 listeners, initial cluster from name.
  const defaultInitialCluster = `${DEFAULT_NAME}=${DEFAULT_ADVERTISE_PEER_URL}`;
  const afterRunning: ConfigNotice[] = [];
  const anyWildcard = listenPeerUrls[0]?.hostname === '0.0.0.0' || listenClientUrls[0]?.hostname === '0.0.0.0';
  const defaultHost = anyWildcard ? defaultHostFromRoutes() : undefined;
  if (defaultHost !== undefined) {
    let used = false;
    if (
      advertisePeerUrls.length === 1 &&
      advertisePeerUrls[0].text === DEFAULT_ADVERTISE_PEER_URL &&
      listenPeerUrls[0]?.hostname === '0.0.0.0'
    ) {
      advertisePeerUrls = [withHost(advertisePeerUrls[0], defaultHost, listenPeerUrls[0].port)];
      used = true;
    }
    if (
      advertiseClientUrls.length === 1 &&
      advertiseClientUrls[0].text === DEFAULT_ADVERTISE_CLIENT_URL &&
      listenClientUrls[0]?.hostname === '0.0.0.0'
    ) {
      advertiseClientUrls = [withHost(advertiseClientUrls[0], defaultHost, listenClientUrls[0].port)];
      used = true;
    }
    if (used) afterRunning.push({ level: 'info', msg: 'detected default host for advertise', fields: { host: defaultHost } });
  }
  if (name !== DEFAULT_NAME && initialClusterText === defaultInitialCluster) {
    initialClusterText = initialClusterFromName(name, advertisePeerUrls);
  }
  let dataDir = f.str('data-dir');
  if (dataDir === '') {
    dataDir = `${name}.etcd`;
    afterRunning.push({ level: 'warn', msg: "'data-dir' was empty; using default", fields: { 'data-dir': dataDir } });
  }

  let initialCluster = new Map<string, EtcdUrl[]>();
  let initialClusterError: string | undefined;
  try {
    initialCluster = parseInitialCluster(initialClusterText);
  } catch (e) {
    initialClusterError = (e as Error).message;
  }

  // Compaction retention, as embed.StartEtcd reads it.
  const retention = f.str('auto-compaction-retention') === '' ? '0' : f.str('auto-compaction-retention');
  let autoCompactionRetentionMs = 0;
  let autoCompactionRetentionRevisions = 0;
  const asInt = parseGoAtoi(retention);
  if (asInt !== undefined && asInt >= 0) {
    if (autoCompactionMode === 'revision') autoCompactionRetentionRevisions = asInt;
    else autoCompactionRetentionMs = asInt * 3_600_000;
  } else {
    let ns: bigint;
    try {
      ns = parseGoDuration(retention);
    } catch (e) {
      throw new StartFailure(`error parsing CompactionRetention: ${(e as Error).message}`);
    }
    // etcd passes the duration on unchanged; in revision mode its nanosecond count is the revision count.
    if (autoCompactionMode === 'revision') autoCompactionRetentionRevisions = Number(ns);
    else autoCompactionRetentionMs = Number(ns) / 1e6;
  }

  const quotaFlag = f.num('quota-backend-bytes');
  const watchProgressMs = pick('experimental-watch-progress-notify-interval', 'watch-progress-notify-interval', (n) => f.ms(n));
  const metrics = f.str('metrics');

  const tls = (peer: boolean): TlsFiles => {
    const p = peer ? 'peer-' : '';
    return {
      certFile: f.str(`${p}cert-file`),
      keyFile: f.str(`${p}key-file`),
      clientCertFile: f.str(peer ? 'peer-client-cert-file' : 'client-cert-file'),
      clientKeyFile: f.str(peer ? 'peer-client-key-file' : 'client-key-file'),
      trustedCaFile: f.str(`${p}trusted-ca-file`),
      clientCertAuth: f.bool(peer ? 'peer-client-cert-auth' : 'client-cert-auth'),
      crlFile: f.str(peer ? 'peer-crl-file' : 'client-crl-file'),
      allowedHostnames: f.strings(peer ? 'peer-cert-allowed-hostname' : 'client-cert-allowed-hostname'),
      allowedCns: peer ? f.strings('peer-cert-allowed-cn') : [],
      autoTls: f.bool(peer ? 'peer-auto-tls' : 'auto-tls'),
      skipClientSanVerify: peer
        ? pick('experimental-peer-skip-client-san-verification', 'peer-skip-client-san-verification', (n) => f.bool(n))
        : false,
    };
  };

  const acceptedButIgnored = [...fs.actual].filter((n) => !ACTED_ON.has(n));

  const config: Config = {
    name,
    dataDir,
    walDir: f.str('wal-dir'),
    listenClientUrls,
    listenClientHttpUrls,
    advertiseClientUrls,
    listenPeerUrls,
    initialAdvertisePeerUrls: advertisePeerUrls,
    listenMetricsUrls,
    initialClusterText,
    initialCluster,
    initialClusterError,
    initialClusterState: f.select('initial-cluster-state') === 'existing' ? 'existing' : 'new',
    initialClusterToken: f.str('initial-cluster-token'),
    strictReconfigCheck: f.bool('strict-reconfig-check'),
    preVote: f.bool('pre-vote'),
    initialElectionTickAdvance: f.bool('initial-election-tick-advance'),
    forceNewCluster: f.bool('force-new-cluster'),
    maxLearners: f.num('max-learners'),
    heartbeatIntervalMs: tickMs,
    electionTimeoutMs: electionMs,
    electionTicks: Math.floor(electionMs / tickMs),
    snapshotCount: f.num('snapshot-count'),
    snapshotCatchUpEntries: pick('experimental-snapshot-catchup-entries', 'snapshot-catchup-entries', (n) => f.num(n)),
    maxSnapshots: f.num('max-snapshots'),
    maxWals: f.num('max-wals'),
    quotaBackendBytesFlag: quotaFlag,
    quotaBackendBytes: quotaFlag < 0 ? Infinity : quotaFlag === 0 ? DEFAULT_QUOTA_BYTES : quotaFlag,
    maxRequestBytes: f.num('max-request-bytes'),
    maxTxnOps: f.num('max-txn-ops'),
    maxConcurrentStreams: f.uint32('max-concurrent-streams'),
    backendBatchIntervalMs: f.ms('backend-batch-interval'),
    backendBatchLimit: f.num('backend-batch-limit'),
    backendFreelistType: f.str('backend-bbolt-freelist-type') === 'array' ? 'array' : 'map',
    grpcKeepAliveMinTimeMs: f.ms('grpc-keepalive-min-time'),
    grpcKeepAliveIntervalMs: f.ms('grpc-keepalive-interval'),
    grpcKeepAliveTimeoutMs: f.ms('grpc-keepalive-timeout'),
    // etcd raises these to their 5s minimum.
    raftReadTimeoutMs: Math.max(5000, f.ms('raft-read-timeout')),
    raftWriteTimeoutMs: Math.max(5000, f.ms('raft-write-timeout')),
    socketReusePort: f.bool('socket-reuse-port'),
    socketReuseAddress: f.bool('socket-reuse-address'),
    enableGrpcGateway: f.bool('enable-grpc-gateway'),
    autoCompactionMode,
    autoCompactionRetention: f.str('auto-compaction-retention'),
    autoCompactionRetentionMs,
    autoCompactionRetentionRevisions,
    compactionBatchLimit: pick('experimental-compaction-batch-limit', 'compaction-batch-limit', (n) => f.num(n)),
    compactionSleepIntervalMs: pick('experimental-compaction-sleep-interval', 'compaction-sleep-interval', (n) => f.ms(n)),
    watchProgressNotifyIntervalMs: watchProgressMs > 0 ? watchProgressMs : DEFAULT_WATCH_PROGRESS_NOTIFY_MS,
    warningApplyDurationMs: pick('experimental-warning-apply-duration', 'warning-apply-duration', (n) => f.ms(n)),
    warningUnaryRequestDurationMs,
    corruptCheckTimeMs: pick('experimental-corrupt-check-time', 'corrupt-check-time', (n) => f.ms(n)),
    compactHashCheckTimeMs: pick('experimental-compact-hash-check-time', 'compact-hash-check-time', (n) => f.ms(n)),
    downgradeCheckTimeMs: pick('experimental-downgrade-check-time', 'downgrade-check-time', (n) => f.ms(n)),
    bootstrapDefragThresholdMegabytes: pick(
      'experimental-bootstrap-defrag-threshold-megabytes',
      'bootstrap-defrag-threshold-megabytes',
      (n) => f.num(n),
    ),
    memoryMlock: pick('experimental-memory-mlock', 'memory-mlock', (n) => f.bool(n)),
    unsafeNoFsync: f.bool('unsafe-no-fsync'),
    featureGates: gates.effective(),
    logger: 'zap',
    logLevel,
    logOutputs,
    logFormat,
    enableLogRotation,
    logRotationConfigJson: f.str('log-rotation-config-json'),
    enablePprof: f.bool('enable-pprof'),
    metrics: metrics === 'extensive' ? 'extensive' : 'basic',
    authToken: f.str('auth-token'),
    bcryptCost: f.num('bcrypt-cost'),
    authTokenTtlSec: f.num('auth-token-ttl'),
    clientTls: tls(false),
    peerTls: tls(true),
    selfSignedCertValidityYears: f.num('self-signed-cert-validity'),
    cipherSuites,
    tlsMinVersion,
    tlsMaxVersion,
    cors: f.urlValues('cors'),
    hostWhitelist: f.uniqueStrings('host-whitelist'),
    discovery: durl,
    discoveryEndpoints,
    discoveryToken,
    discoverySrv: dnsCluster,
    discoverySrvName: dnsClusterServiceName,
    enableDistributedTracing: enableTracing,
    emulatedEtcdVersion: ETCD_VERSION,
    flagsExplicitlySet: new Set(fs.actual),
    acceptedButIgnored,
  };
  return { config, warnings, afterRunning };
}

function withHost(u: EtcdUrl, host: string, port: string): EtcdUrl {
  const hostPort = host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
  return { scheme: u.scheme, hostname: host, port, text: `${u.scheme}://${hostPort}` };
}

/**
 * Flags the server acts on (as of the first integration); every other flag given is reported in
 * `acceptedButIgnored`. Add a flag here when its layer starts honouring it.
 */
const ACTED_ON = new Set<string>([
  'name',
  'data-dir',
  'unsafe-no-fsync',
  'listen-client-urls',
  'advertise-client-urls',
  'listen-peer-urls',
  'initial-advertise-peer-urls',
  'listen-metrics-urls',
  'initial-cluster',
  'initial-cluster-state',
  'initial-cluster-token',
  'heartbeat-interval',
  'election-timeout',
  'snapshot-count',
  'quota-backend-bytes',
  'max-request-bytes',
  'max-txn-ops',
  'auto-compaction-mode',
  'auto-compaction-retention',
  'watch-progress-notify-interval',
  'experimental-watch-progress-notify-interval',
  'log-level',
  'logger',
  'log-outputs',
  'log-format',
  'version',
  'config-file',
  'grpc-keepalive-interval',
  'grpc-keepalive-timeout',
  'max-concurrent-streams',
  'snapshot-catchup-entries',
  'experimental-snapshot-catchup-entries',
  'metrics',
  'emulated-etcd-version',
  'strict-reconfig-check',
  'wal-dir',
  'auth-token',
  'auth-token-ttl',
  'bcrypt-cost',
  'warning-apply-duration',
  'experimental-warning-apply-duration',
  'backend-batch-interval',
  'backend-batch-limit',
]);


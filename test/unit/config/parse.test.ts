import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseConfig, type Config, type ParseResult } from '../../../src/config';

function run(argv: string[], env: NodeJS.ProcessEnv = {}): Extract<ParseResult, { kind: 'run' }> {
  const r = parseConfig(argv, env);
  if (r.kind !== 'run') throw new Error(`expected run, got ${JSON.stringify(r)}`);
  return r;
}
function cfg(argv: string[], env: NodeJS.ProcessEnv = {}): Config {
  return run(argv, env).config;
}
function fail(argv: string[], env: NodeJS.ProcessEnv = {}): Extract<ParseResult, { kind: 'error' }> {
  const r = parseConfig(argv, env);
  if (r.kind !== 'error') throw new Error(`expected error, got ${r.kind}`);
  return r;
}
const texts = (urls: { text: string }[]) => urls.map((u) => u.text);
const CLIENT = ['--listen-client-urls=http://127.0.0.1:2379', '--advertise-client-urls=http://127.0.0.1:2379'];

describe('defaults', () => {
  it('match etcd 3.6', () => {
    const c = cfg([]);
    expect(c.name).toBe('default');
    expect(c.dataDir).toBe('default.etcd');
    expect(texts(c.listenClientUrls)).toEqual(['http://localhost:2379']);
    expect(texts(c.advertiseClientUrls)).toEqual(['http://localhost:2379']);
    expect(texts(c.listenPeerUrls)).toEqual(['http://localhost:2380']);
    expect(c.initialClusterText).toBe('default=http://localhost:2380');
    expect(c.initialClusterState).toBe('new');
    expect(c.initialClusterToken).toBe('etcd-cluster');
    expect(c.snapshotCount).toBe(10000);
    expect(c.heartbeatIntervalMs).toBe(100);
    expect(c.electionTimeoutMs).toBe(1000);
    expect(c.maxRequestBytes).toBe(1.5 * 1024 * 1024);
    expect(c.maxTxnOps).toBe(128);
    expect(c.quotaBackendBytes).toBe(2 * 1024 ** 3);
    expect(c.autoCompactionMode).toBe('periodic');
    expect(c.watchProgressNotifyIntervalMs).toBe(600_000);
    expect(c.logLevel).toBe('info');
    expect(c.logOutputs).toEqual(['default']);
    expect(c.metrics).toBe('basic');
    expect(c.emulatedEtcdVersion).toBe('3.6.14');
    expect(c.acceptedButIgnored).toEqual([]);
  });

  it('logs what etcd logs for a default start, in order', () => {
    const r = run([], {});
    expect(r.notices.map((n) => n.msg)).toEqual([
      'Running http and grpc server on single port. This is not recommended for production.',
      "it isn't recommended to use default name, please set a value for --name. Note that etcd might run into issue when multiple members have the same default name",
      'Running: ',
      "'data-dir' was empty; using default",
    ]);
  });
});

describe('flag syntax (Go flag package)', () => {
  it('accepts -flag, --flag, =value and separate value forms', () => {
    expect(cfg(['-name', 'a']).name).toBe('a');
    expect(cfg(['--name', 'b']).name).toBe('b');
    expect(cfg(['-name=c']).name).toBe('c');
    expect(cfg(['--name=d']).name).toBe('d');
    expect(cfg(['--name=']).name).toBe('');
    expect(cfg(['--name=x=y']).name).toBe('x=y');
  });

  it('booleans take no separate argument', () => {
    expect(cfg(['--enable-pprof']).enablePprof).toBe(true);
    expect(cfg(['--enable-pprof=false']).enablePprof).toBe(false);
    expect(cfg(['-enable-pprof=T']).enablePprof).toBe(true);
    expect(cfg(['--pre-vote=0']).preVote).toBe(false);
    // "--enable-pprof false": "false" is a positional argument, which etcd rejects.
    const r = fail(['--enable-pprof', 'false']);
    expect(r.exitCode).toBe(1);
    expect(r.message).toBe('"false" is not a valid flag');
    expect(r.notices.at(-1)).toEqual({ level: 'warn', msg: 'failed to verify flags', fields: { error: '"false" is not a valid flag' } });
  });

  it('last value wins; "--" ends flags', () => {
    expect(cfg(['--name=a', '--name=b']).name).toBe('b');
    expect(fail(['--', '--name=a']).message).toBe('"--name=a" is not a valid flag');
  });

  it('integers in Go syntax (base prefixes, underscores)', () => {
    expect(cfg(['--snapshot-count=0x10']).snapshotCount).toBe(16);
    expect(cfg(['--snapshot-count=010']).snapshotCount).toBe(8);
    expect(cfg(['--snapshot-count=1_000']).snapshotCount).toBe(1000);
    expect(cfg(['--quota-backend-bytes=-1']).quotaBackendBytes).toBe(Infinity);
    expect(cfg(['--quota-backend-bytes=8589934592']).quotaBackendBytes).toBe(8589934592);
    expect(fail(['--snapshot-count=1__0']).message).toBe('invalid value "1__0" for flag -snapshot-count: parse error');
    expect(fail(['--snapshot-count=18446744073709551616']).message).toBe(
      'invalid value "18446744073709551616" for flag -snapshot-count: value out of range',
    );
    expect(fail(['--max-concurrent-streams=x']).message).toBe(
      'invalid value "x" for flag -max-concurrent-streams: strconv.ParseUint: parsing "x": invalid syntax',
    );
    expect(cfg(['--max-concurrent-streams=100']).maxConcurrentStreams).toBe(100);
  });

  it('durations in Go syntax', () => {
    expect(cfg(['--grpc-keepalive-min-time=100ms']).grpcKeepAliveMinTimeMs).toBe(100);
    expect(cfg(['--grpc-keepalive-min-time=1m30s']).grpcKeepAliveMinTimeMs).toBe(90_000);
    expect(cfg(['--grpc-keepalive-min-time=1.5h']).grpcKeepAliveMinTimeMs).toBe(5_400_000);
    expect(cfg(['--grpc-keepalive-min-time=500us']).grpcKeepAliveMinTimeMs).toBe(0.5);
    expect(cfg(['--grpc-keepalive-min-time=0']).grpcKeepAliveMinTimeMs).toBe(0);
    expect(fail(['--grpc-keepalive-min-time=5']).message).toBe('invalid value "5" for flag -grpc-keepalive-min-time: parse error');
  });

  it('unknown and malformed flags: Go flag package text, usage, exit 2', () => {
    const r = fail(['--foo']);
    expect(r.exitCode).toBe(2);
    expect(r.message).toBe('flag provided but not defined: -foo');
    expect(r.stderrText?.startsWith('flag provided but not defined: -foo\nUsage:\n\n  etcd [flags]\n')).toBe(true);
    expect(fail(['---foo']).message).toBe('bad flag syntax: ---foo');
    expect(fail(['--name']).message).toBe('flag needs an argument: -name');
    expect(fail(['--enable-pprof=maybe']).message).toBe('invalid boolean value "maybe" for -enable-pprof: parse error');
    expect(fail(['--initial-cluster-state=bad']).message).toBe('invalid value "bad" for flag -initial-cluster-state: invalid value');
  });

  it('accepts every etcd 3.6 flag and the long-ignored ones', () => {
    const r = run([
      '--socket-reuse-port',
      '--tls-min-version=TLS1.3',
      '--log-format=console',
      '--max-learners=3',
      '--v',
      '--snapshot',
      '--config',
      '--enable-distributed-tracing=false',
      '--discovery-fallback=exit',
      '--v2-deprecation=write-only',
      '--experimental-stop-grpc-service-on-defrag=true',
    ]);
    expect(r.config.acceptedButIgnored).toContain('socket-reuse-port');
    expect(r.config.acceptedButIgnored).toContain('v');
    expect(r.config.logFormat).toBe('console');
    expect(r.config.featureGates.StopGRPCServiceOnDefrag).toBe(true);
    expect(r.notices.map((n) => n.msg)).toContain(
      '--v2-deprecation is deprecated and scheduled for removal in v3.8. The default value is enforced, ignoring user input.',
    );
  });
});

describe('help and version', () => {
  it('-h, --help, -help print the usage to stderr and flags to stdout', () => {
    for (const a of ['-h', '--help', '-help', '--help=false']) {
      const r = parseConfig([a], {});
      expect(r.kind).toBe('help');
      if (r.kind !== 'help') return;
      expect(r.usage).toContain('etcd --version');
      expect(r.text).toContain("--snapshot-count '10000'");
      expect(r.text).toContain("--initial-cluster 'default=http://localhost:2380'");
      expect(r.text).toContain('InitialCorruptCheck=true|false (ALPHA - default=false)');
    }
  });

  it('--version in etcd format', () => {
    const r = parseConfig(['--version'], {});
    expect(r.kind).toBe('version');
    if (r.kind !== 'version') return;
    expect(r.text).toMatch(/^etcd Version: 3\.6\.14\nGit SHA: .+\nGo Version: .+\nGo OS\/Arch: linux\/(amd64|arm64)\n$/);
    // A later invalid flag still fails first, as in Go.
    expect(parseConfig(['--version', '--foo'], {}).kind).toBe('error');
  });
});

describe('environment variables', () => {
  it('ETCD_* set flags the command line did not set', () => {
    const r = run(['--name=flag'], { ETCD_INITIAL_CLUSTER_TOKEN: 'tok', ETCD_HEARTBEAT_INTERVAL: '200', ETCD_ELECTION_TIMEOUT: '2000', PATH: '/bin' });
    expect(r.config.name).toBe('flag');
    expect(r.config.initialClusterToken).toBe('tok');
    expect(r.config.heartbeatIntervalMs).toBe(200);
    expect(r.config.flagsExplicitlySet.has('initial-cluster-token')).toBe(true);
    expect(r.notices).toContainEqual({
      level: 'info',
      msg: 'recognized and used environment variable',
      fields: { 'variable-name': 'ETCD_INITIAL_CLUSTER_TOKEN', 'variable-value': 'tok' },
    });
  });

  it('a variable shadowed by a command-line flag is fatal', () => {
    const r = fail(['--name=a'], { ETCD_NAME: 'b' });
    expect(r.exitCode).toBe(1);
    expect(r.notices.at(-1)).toEqual({
      level: 'fatal',
      msg: 'conflicting environment variable is shadowed by corresponding command-line flag (either unset environment variable or disable flag))',
      fields: { 'environment-variable': 'ETCD_NAME' },
    });
  });

  it('unknown ETCD_* variables and ETCD_VERSION are warned about', () => {
    const r = run(['--name=a'], { ETCD_FOO: 'bar', ETCD_VERSION: '1', ETCD_EMPTY_FLAGLESS: '' });
    expect(r.notices).toContainEqual({ level: 'warn', msg: 'unrecognized environment variable', fields: { 'environment-variable': 'ETCD_FOO=bar' } });
    expect(r.notices).toContainEqual({ level: 'warn', msg: 'cannot set special environment variable', fields: { key: 'ETCD_VERSION', value: '1' } });
  });

  it('an invalid value in a variable fails verification', () => {
    const r = fail([], { ETCD_HEARTBEAT_INTERVAL: 'abc' });
    expect(r.message).toBe('invalid value "abc" for ETCD_HEARTBEAT_INTERVAL: parse error');
    expect(r.exitCode).toBe(1);
  });
});

describe('validation (etcd error texts)', () => {
  it('election timeout at least 5x heartbeat', () => {
    const r = fail(['--heartbeat-interval=300', '--election-timeout=1000']);
    expect(r.message).toBe('--election-timeout[1000ms] should be at least as 5 times as --heartbeat-interval[300ms]');
    expect(fail(['--election-timeout=60000']).message).toBe('--election-timeout[60000ms] is too long, and should be set less than 50000ms');
    expect(fail(['--heartbeat-interval=0']).message).toBe('--heartbeat-interval must be >0 (set to 0ms)');
  });

  it('listen-client-urls needs advertise-client-urls', () => {
    const r = fail(['--listen-client-urls=http://127.0.0.1:2379']);
    expect(r.message).toBe('--advertise-client-urls is required when --listen-client-urls is set explicitly');
    expect(r.notices.map((n) => n.msg).slice(-2)).toEqual(['failed to verify flags', 'advertise client URLs are not set']);
  });

  it('URL checks', () => {
    expect(fail(['--listen-peer-urls=foo']).message).toBe(
      'invalid value "foo" for flag -listen-peer-urls: URL scheme must be http, https, unix, or unixs: foo',
    );
    expect(fail(['--listen-peer-urls=http://127.0.0.1']).message).toContain('URL address does not have the form "host:port": http://127.0.0.1');
    expect(fail(['--listen-peer-urls=http://127.0.0.1:2380/x']).message).toContain('URL must not contain a path: http://127.0.0.1:2380/x');
    expect(fail(['--listen-peer-urls=http://example.com:2380']).message).toBe('expected IP in URL for binding (http://example.com:2380)');
    expect(fail(['--advertise-client-urls=http://:2379']).message).toBe(
      '--advertise-client-urls "http://:2379" must be "host:port" (unexpected empty host (http://:2379))',
    );
  });

  it('URL lists are de-duplicated and sorted', () => {
    const c = cfg(['--listen-client-urls=http://127.0.0.2:2379, http://127.0.0.1:2379,http://127.0.0.2:2379', '--advertise-client-urls=http://[::1]:2379']);
    expect(texts(c.listenClientUrls)).toEqual(['http://127.0.0.1:2379', 'http://127.0.0.2:2379']);
    expect(c.advertiseClientUrls[0].hostname).toBe('::1');
  });

  it('log settings', () => {
    expect(fail(['--logger=capnslog']).message).toBe('--logger=capnslog is removed in v3.5');
    expect(fail(['--log-outputs=default,stderr']).message).toBe('multi logoutput for "default" is not supported yet');
    const r = fail(['--log-level=verbose']);
    expect(r.exitCode).toBe(2);
    expect(r.stderrText).toBe('panic: unrecognized level: "verbose"\n');
    expect(cfg(['--log-level=debug', '--log-outputs=stdout,/tmp/x.log']).logOutputs).toEqual(['/tmp/x.log', 'stdout']);
  });

  it('auto compaction', () => {
    expect(cfg(['--auto-compaction-retention=1']).autoCompactionRetentionMs).toBe(3_600_000);
    expect(cfg(['--auto-compaction-retention=5m']).autoCompactionRetentionMs).toBe(300_000);
    const rev = cfg(['--auto-compaction-mode=revision', '--auto-compaction-retention=1000']);
    expect(rev.autoCompactionRetentionRevisions).toBe(1000);
    expect(rev.autoCompactionRetention).toBe('1000');
    expect(fail(['--auto-compaction-mode=x']).message).toBe('unknown auto-compaction-mode "x"');
    const bad = fail(['--auto-compaction-retention=abc']);
    expect(bad.message).toBe('error parsing CompactionRetention: time: invalid duration "abc"');
    expect(bad.notices.at(-1)?.msg).toBe('discovery failed');
  });

  it('deprecated experimental flags carry over, and may not be combined with their replacement', () => {
    expect(cfg(['--experimental-watch-progress-notify-interval=5s']).watchProgressNotifyIntervalMs).toBe(5000);
    expect(cfg(['--watch-progress-notify-interval=2s']).watchProgressNotifyIntervalMs).toBe(2000);
    expect(fail(['--experimental-watch-progress-notify-interval=5s', '--watch-progress-notify-interval=5s']).message).toBe(
      'cannot set --experimental-watch-progress-notify-interval and --watch-progress-notify-interval at the same time, please use --watch-progress-notify-interval only',
    );
    expect(cfg(['--experimental-compaction-batch-limit=500']).compactionBatchLimit).toBe(500);
  });

  it('feature gates', () => {
    const c = cfg(['--feature-gates=InitialCorruptCheck=true,LeaseCheckpoint=true']);
    expect(c.featureGates.InitialCorruptCheck).toBe(true);
    expect(c.featureGates.LeaseCheckpoint).toBe(true);
    expect(cfg(['--experimental-initial-corrupt-check=true']).featureGates.InitialCorruptCheck).toBe(true);
    expect(cfg(['--feature-gates=AllAlpha=true']).featureGates.CompactHashCheck).toBe(true);
    expect(fail(['--feature-gates=Nope=true']).message).toBe('invalid value "Nope=true" for flag -feature-gates: unrecognized feature gate: Nope');
    expect(fail(['--feature-gates=InitialCorruptCheck=true', '--experimental-initial-corrupt-check=true']).message).toBe(
      'cannot specify both flags: --experimental-initial-corrupt-check=true and --feature-gates=InitialCorruptCheck=true at the same time, please just use --feature-gates=InitialCorruptCheck=true',
    );
    expect(fail(['--feature-gates=LeaseCheckpointPersist=true']).message).toBe(
      'enabling feature gate LeaseCheckpointPersist requires enabling feature gate LeaseCheckpoint',
    );
  });

  it('bootstrap flag conflicts', () => {
    expect(fail(['--initial-cluster=a=http://127.0.0.1:2380', '--discovery-srv=example.com']).message).toBe(
      'multiple discovery or bootstrap flags are set. Choose one of "initial-cluster", "discovery", "discovery-endpoints" or "discovery-srv"',
    );
    expect(cfg(['--discovery-srv=example.com']).initialClusterText).toBe('');
  });
});

describe('cluster settings', () => {
  it('the default initial cluster follows --name and the advertised peer URLs', () => {
    const c = cfg(['--name=n1', '--initial-advertise-peer-urls=http://127.0.0.1:12380']);
    expect(c.initialClusterText).toBe('n1=http://127.0.0.1:12380');
    expect(c.dataDir).toBe('n1.etcd');
  });

  it('parses --initial-cluster into name -> URLs', () => {
    const c = cfg([
      '--name=a',
      '--initial-cluster=a=http://127.0.0.1:2380,b=http://127.0.0.2:2380,a=http://127.0.0.1:2381',
      '--initial-cluster-state=existing',
    ]);
    expect([...c.initialCluster.keys()]).toEqual(['a', 'b']);
    expect(texts(c.initialCluster.get('a') ?? [])).toEqual(['http://127.0.0.1:2380', 'http://127.0.0.1:2381']);
    expect(c.initialClusterState).toBe('existing');
    const bad = cfg(['--initial-cluster=a=foo']);
    expect(bad.initialClusterError).toBe('URL scheme must be http, https, unix, or unixs: foo');
  });

  it('a kubeadm-style command line', () => {
    const r = run([
      '--advertise-client-urls=https://10.0.0.1:2379',
      '--cert-file=/etc/kubernetes/pki/etcd/server.crt',
      '--client-cert-auth=true',
      '--data-dir=/var/lib/etcd',
      '--feature-gates=InitialCorruptCheck=true',
      '--watch-progress-notify-interval=5s',
      '--initial-advertise-peer-urls=https://10.0.0.1:2380',
      '--initial-cluster=node1=https://10.0.0.1:2380',
      '--key-file=/etc/kubernetes/pki/etcd/server.key',
      '--listen-client-urls=https://127.0.0.1:2379,https://10.0.0.1:2379',
      '--listen-metrics-urls=http://127.0.0.1:2381',
      '--listen-peer-urls=https://10.0.0.1:2380',
      '--name=node1',
      '--peer-cert-file=/etc/kubernetes/pki/etcd/peer.crt',
      '--peer-client-cert-auth=true',
      '--peer-key-file=/etc/kubernetes/pki/etcd/peer.key',
      '--peer-trusted-ca-file=/etc/kubernetes/pki/etcd/ca.crt',
      '--snapshot-count=10000',
      '--trusted-ca-file=/etc/kubernetes/pki/etcd/ca.crt',
    ]);
    const c = r.config;
    expect(c.dataDir).toBe('/var/lib/etcd');
    expect(c.watchProgressNotifyIntervalMs).toBe(5000);
    expect(c.featureGates.InitialCorruptCheck).toBe(true);
    expect(c.clientTls).toMatchObject({ certFile: '/etc/kubernetes/pki/etcd/server.crt', clientCertAuth: true, trustedCaFile: '/etc/kubernetes/pki/etcd/ca.crt' });
    expect(c.peerTls).toMatchObject({ keyFile: '/etc/kubernetes/pki/etcd/peer.key', clientCertAuth: true });
    expect(texts(c.listenMetricsUrls)).toEqual(['http://127.0.0.1:2381']);
    expect(texts(c.initialCluster.get('node1') ?? [])).toEqual(['https://10.0.0.1:2380']);
    expect(c.acceptedButIgnored).toContain('cert-file');
    // The older kubeadm spelling is accepted too.
    expect(cfg([...CLIENT, '--experimental-initial-corrupt-check=true', '--experimental-watch-progress-notify-interval=5s']).watchProgressNotifyIntervalMs).toBe(5000);
  });
});

// The real etcd here is 3.4; compare where 3.4 and 3.6 word things the same way.
const REAL_ETCD = '/usr/bin/etcd';
describe('same output as the real etcd', () => {
  const cases = [
    ['--foo'],
    ['-foo=1'],
    ['---foo'],
    ['--name'],
    ['--heartbeat-interval=abc'],
    ['--heartbeat-interval=-1'],
    ['--snapshot-count=99999999999999999999'],
    ['--enable-pprof=maybe'],
    ['--initial-cluster-state=bad'],
    ['--listen-client-urls=foo'],
    ['--listen-client-urls=http://127.0.0.1'],
    ['--grpc-keepalive-timeout=5'],
    ['--max-concurrent-streams=x'],
  ];
  for (const args of cases) {
    it(`etcd ${args.join(' ')}`, () => {
      const real = spawnSync(REAL_ETCD, args, { encoding: 'utf8', timeout: 10_000, env: {} });
      const ours = fail(args);
      expect(ours.exitCode).toBe(real.status);
      expect(ours.stderrText?.split('\n')[0]).toBe(real.stderr.split('\n')[0]);
    });
  }
  it('help goes to stdout with the usage on stderr, exit 0', () => {
    const real = spawnSync(REAL_ETCD, ['--help'], { encoding: 'utf8', timeout: 10_000, env: {} });
    expect(real.status).toBe(0);
    const ours = parseConfig(['--help'], {});
    expect(ours.kind).toBe('help');
    expect(real.stderr.startsWith('Usage:\n\n  etcd [flags]\n')).toBe(true);
    if (ours.kind === 'help') expect(ours.usage.startsWith('Usage:\n\n  etcd [flags]\n')).toBe(true);
  });
});

describe('sub-commands', () => {
  it('gateway and grpc-proxy are refused plainly', () => {
    const r = fail(['grpc-proxy', 'start']);
    expect(r.exitCode).toBe(1);
    expect(r.stderrText).toBe('etcd grpc-proxy is not available in this server\n');
  });
});

describe('0.0.0.0 listeners with default advertise URLs', () => {
  it('advertise the default-route address instead of localhost, when there is one', () => {
    const r = run(['--listen-peer-urls=http://0.0.0.0:2380']);
    const peer = r.config.initialAdvertisePeerUrls[0];
    if (r.notices.some((n) => n.msg === 'detected default host for advertise')) {
      expect(peer.hostname).not.toBe('localhost');
      expect(peer.port).toBe('2380');
    } else {
      expect(peer.text).toBe('http://localhost:2380');
    }
  });
});

import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { testTempDir } from '../../helpers/temp_dir';
import { parseConfig } from '../../../src/config';
import { parseYaml } from '../../../src/config/yaml';

function writeConfig(text: string): string {
  const dir = testTempDir('etcd-conf-');
  const file = path.join(dir, 'etcd.conf.yml');
  fs.writeFileSync(file, text);
  return file;
}

// Laid out like etcd's sample configuration: empty values, quoted and plain scalars, nested TLS
// sections, and a flow sequence spread over lines.
const SAMPLE = `# member settings
name: 'infra1'
data-dir:
wal-dir:
snapshot-count: 10000
heartbeat-interval: 100
election-timeout: 1000
quota-backend-bytes: 0
listen-peer-urls: http://127.0.0.1:2380
listen-client-urls: http://127.0.0.1:2379
max-snapshots: 5
cors:
initial-advertise-peer-urls: http://127.0.0.1:2380
advertise-client-urls: http://127.0.0.1:2379
discovery:
discovery-fallback: 'proxy'   # no field in the file format: ignored
initial-cluster: infra1=http://127.0.0.1:2380
initial-cluster-token: 'etcd-cluster-1'
initial-cluster-state: 'new'
strict-reconfig-check: false
enable-pprof: true
proxy: 'off'
client-transport-security:
  # comment inside a section
  cert-file: /etc/ssl/server.crt
  key-file: /etc/ssl/server.key
  client-cert-auth: true
  trusted-ca-file: "/etc/ssl/ca.crt"
  auto-tls: false
peer-transport-security:
  cert-file:
  client-cert-auth: false
  allowed-cn:
self-signed-cert-validity: 1
log-level: debug
logger: zap
log-outputs: [stderr]
force-new-cluster: false
auto-compaction-mode: periodic
auto-compaction-retention: "1"
grpc-keepalive-min-time: 2000000000
cipher-suites: [
  TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
  TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384
]
tls-min-version: 'TLS1.2'
tls-max-version: 'TLS1.3'
`;

describe('--config-file', () => {
  it('reads etcd-style YAML and ignores flags and ETCD_* variables', () => {
    const file = writeConfig(SAMPLE);
    const r = parseConfig([`--config-file=${file}`, '--name=ignored'], { ETCD_SNAPSHOT_COUNT: '5' });
    if (r.kind !== 'run') throw new Error(JSON.stringify(r));
    const c = r.config;
    expect(c.name).toBe('infra1');
    expect(c.dataDir).toBe('infra1.etcd');
    expect(c.snapshotCount).toBe(10000);
    expect(c.initialClusterToken).toBe('etcd-cluster-1');
    expect(c.strictReconfigCheck).toBe(false);
    expect(c.enablePprof).toBe(true);
    expect(c.clientTls).toMatchObject({ certFile: '/etc/ssl/server.crt', clientCertAuth: true, trustedCaFile: '/etc/ssl/ca.crt' });
    expect(c.logLevel).toBe('debug');
    expect(c.logOutputs).toEqual(['stderr']);
    expect(c.autoCompactionRetentionMs).toBe(3_600_000);
    expect(c.grpcKeepAliveMinTimeMs).toBe(2000);
    expect(c.cipherSuites).toEqual(['TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256', 'TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384']);
    expect(c.initialCluster.get('infra1')?.[0].text).toBe('http://127.0.0.1:2380');
    expect(r.notices).toContainEqual({
      level: 'info',
      msg: 'loaded server configuration, other configuration command line flags and environment variables will be ignored if provided',
      fields: { path: file },
    });
  });

  it('ETCD_CONFIG_FILE selects the file too', () => {
    const file = writeConfig('name: from-env-file\n');
    const r = parseConfig([], { ETCD_CONFIG_FILE: file });
    expect(r.kind === 'run' && r.config.name).toBe('from-env-file');
  });

  it('a file keeps the default advertise URL when it only sets listen URLs', () => {
    const r = parseConfig([`--config-file=${writeConfig('listen-client-urls: http://127.0.0.1:2379\n')}`], {});
    expect(r.kind === 'run' && r.config.advertiseClientUrls.map((u) => u.text)).toEqual(['http://localhost:2379']);
  });

  it('reports errors as etcd does', () => {
    const missing = parseConfig(['--config-file=/nonexistent/etcd.yml'], {});
    expect(missing.kind === 'error' && missing.message).toBe('open /nonexistent/etcd.yml: no such file or directory');
    const badType = parseConfig([`--config-file=${writeConfig('heartbeat-interval: "100"\n')}`], {});
    expect(badType.kind === 'error' && badType.message).toBe(
      'error unmarshaling JSON: while decoding JSON: json: cannot unmarshal string into Go struct field configYAML.heartbeat-interval of type uint',
    );
    const invalid = parseConfig([`--config-file=${writeConfig('heartbeat-interval: 300\nelection-timeout: 1000\n')}`], {});
    expect(invalid.kind === 'error' && invalid.message).toBe(
      '--election-timeout[1000ms] should be at least as 5 times as --heartbeat-interval[300ms]',
    );
  });
});

describe('YAML subset', () => {
  it('parses scalars as YAML 1.1 does', () => {
    expect(parseYaml("a: yes\nb: off\nc: 0x10\nd: '1'\ne: ~\nf: 1.5\ng: \"x # y\" # c\nh: it's\n")).toEqual({
      a: true,
      b: false,
      c: 16,
      d: '1',
      e: null,
      f: 1.5,
      g: 'x # y',
      h: "it's",
    });
  });
  it('parses block sequences and nested maps', () => {
    expect(parseYaml('log-outputs:\n  - stderr\n  - /var/log/etcd.log\nsocket-options:\n  reuse-port: true\n')).toEqual({
      'log-outputs': ['stderr', '/var/log/etcd.log'],
      'socket-options': { 'reuse-port': true },
    });
    expect(parseYaml('list:\n- a\n- b\nnext: 1\n')).toEqual({ list: ['a', 'b'], next: 1 });
  });
  it('rejects what it does not understand, with the line', () => {
    expect(() => parseYaml('a: &anchor 1\n')).toThrow('line 1');
    expect(() => parseYaml('a: 1\n  b: 2\n')).toThrow('line 2');
  });
});

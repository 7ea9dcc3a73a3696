import { describe, expect, it } from 'vitest';
import { createMetrics, ETCD_GRPC_METHODS, exponentialBuckets } from '../../../src/metrics';

function parse(body: string) {
  const help = new Map<string, string>();
  const type = new Map<string, string>();
  for (const line of body.split('\n')) {
    const m = /^# (HELP|TYPE) (\S+) (.*)$/.exec(line);
    if (m === null) continue;
    (m[1] === 'HELP' ? help : type).set(m[2], m[3]);
  }
  return { help, type };
}

describe('etcd metrics', () => {
  it('exposes etcd names, types and help texts', async () => {
    const m = createMetrics({ serverVersion: '3.6.14' });
    const { contentType, body } = await m.metricsText();
    expect(contentType).toBe('text/plain; version=0.0.4; charset=utf-8');
    const { help, type } = parse(body);
    const expected: Array<[string, string, string]> = [
      ['etcd_server_has_leader', 'gauge', 'Whether or not a leader exists. 1 is existence, 0 is not.'],
      ['etcd_server_is_leader', 'gauge', 'Whether or not this member is a leader. 1 if is, 0 otherwise.'],
      ['etcd_server_leader_changes_seen_total', 'counter', 'The number of leader changes seen.'],
      ['etcd_server_proposals_committed_total', 'gauge', 'The total number of consensus proposals committed.'],
      ['etcd_server_proposals_applied_total', 'gauge', 'The total number of consensus proposals applied.'],
      ['etcd_server_proposals_pending', 'gauge', 'The current number of pending proposals to commit.'],
      ['etcd_server_proposals_failed_total', 'counter', 'The total number of failed proposals seen.'],
      ['etcd_disk_wal_fsync_duration_seconds', 'histogram', 'The latency distributions of fsync called by WAL.'],
      ['etcd_disk_backend_commit_duration_seconds', 'histogram', 'The latency distributions of commit called by backend.'],
      ['etcd_mvcc_db_total_size_in_bytes', 'gauge', 'Total size of the underlying database physically allocated in bytes.'],
      ['etcd_debugging_mvcc_keys_total', 'gauge', 'Total number of keys.'],
      ['etcd_server_version', 'gauge', "Which version is running. 1 for 'server_version' label with current version."],
      ['etcd_cluster_version', 'gauge', "Which version is running. 1 for 'cluster_version' label with current cluster version"],
      ['grpc_server_started_total', 'counter', 'Total number of RPCs started on the server.'],
      ['grpc_server_handled_total', 'counter', 'Total number of RPCs completed on the server, regardless of success or failure.'],
      ['process_cpu_seconds_total', 'counter', 'Total user and system CPU time spent in seconds.'],
      ['process_resident_memory_bytes', 'gauge', 'Resident memory size in bytes.'],
    ];
    for (const [name, t, h] of expected) {
      expect(type.get(name), name).toBe(t);
      expect(help.get(name), name).toBe(h);
    }
    expect(body).toContain('etcd_server_version{server_version="3.6.14"} 1');
    expect(help.has('grpc_server_handling_seconds')).toBe(false);
  });

  it('uses etcd buckets for disk latencies', async () => {
    expect(exponentialBuckets(0.001, 2, 14)).toEqual([0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.256, 0.512, 1.024, 2.048, 4.096, 8.192]);
    const m = createMetrics({ serverVersion: '3.6.14', defaultMetrics: false });
    m.disk.walFsyncDurationSeconds.observe(0.0015);
    const { body } = await m.metricsText();
    expect(body).toContain('etcd_disk_wal_fsync_duration_seconds_bucket{le="0.001"} 0');
    expect(body).toContain('etcd_disk_wal_fsync_duration_seconds_bucket{le="0.002"} 1');
    expect(body).toContain('etcd_disk_wal_fsync_duration_seconds_bucket{le="8.192"} 1');
    expect(body).toContain('etcd_disk_wal_fsync_duration_seconds_count 1');
  });

  it('gRPC counters with go-grpc-prometheus labels, zero series for every etcd method and code', async () => {
    const m = createMetrics({ serverVersion: '3.6.14', defaultMetrics: false, extensive: true });
    const range = m.grpc.method('etcdserverpb.KV', 'Range', 'unary');
    range.started();
    range.handled(0, 0.002);
    range.started();
    range.handled(11, 0.001);
    const { body } = await m.metricsText();
    expect(body).toContain('grpc_server_started_total{grpc_method="Range",grpc_service="etcdserverpb.KV",grpc_type="unary"} 2');
    expect(body).toContain('grpc_server_handled_total{grpc_code="OK",grpc_method="Range",grpc_service="etcdserverpb.KV",grpc_type="unary"} 1');
    expect(body).toContain('grpc_server_handled_total{grpc_code="OutOfRange",grpc_method="Range",grpc_service="etcdserverpb.KV",grpc_type="unary"} 1');
    expect(body).toContain(
      'grpc_server_handled_total{grpc_code="Unavailable",grpc_method="Watch",grpc_service="etcdserverpb.Watch",grpc_type="bidi_stream"} 0',
    );
    const handledLines = body.split('\n').filter((l) => l.startsWith('grpc_server_handled_total{'));
    expect(handledLines.length).toBe(ETCD_GRPC_METHODS.length * 17);
    expect(body).toContain('grpc_server_handling_seconds_count{grpc_method="Range",grpc_service="etcdserverpb.KV",grpc_type="unary"} 2');
  });

  it('server id and cluster version replace their previous values', async () => {
    const m = createMetrics({ serverVersion: '3.6.14', defaultMetrics: false, preRegisterGrpcMethods: false });
    m.setServerId('8e9e05c52164694d');
    m.setServerId('1');
    m.setClusterVersion('3.6');
    let size = 0;
    m.beforeScrape(() => m.mvcc.dbTotalSizeInBytes.set((size += 4096)));
    const { body } = await m.metricsText();
    expect(body).toContain('etcd_server_id{server_id="1"} 1');
    expect(body).not.toContain('8e9e05c52164694d');
    expect(body).toContain('etcd_cluster_version{cluster_version="3.6"} 1');
    expect(body).toContain('etcd_mvcc_db_total_size_in_bytes 4096');
  });

  it("adds etcd's health, slow-apply, peer and fd series, and drops prom-client's *_total gauges", async () => {
    const m = createMetrics({ serverVersion: '3.6.14' });
    m.server.healthSuccess.inc();
    m.network.peerRoundTripTimeSeconds.labels('8e9e05c52164694d').observe(0.0003);
    const { body } = await m.metricsText();
    const { type } = parse(body);
    expect(type.get('etcd_server_health_success')).toBe('counter');
    expect(type.get('etcd_server_health_failures')).toBe('counter');
    expect(type.get('etcd_server_slow_apply_total')).toBe('counter');
    expect(type.get('etcd_network_active_peers')).toBe('gauge');
    expect(type.get('etcd_network_peer_sent_failures_total')).toBe('counter');
    expect(body).toContain('etcd_server_health_success 1');
    expect(body).toContain('etcd_network_peer_round_trip_time_seconds_bucket{le="0.0004",To="8e9e05c52164694d"} 1');
    if (process.platform === 'linux') {
      expect(Number(/^os_fd_used (\d+)$/m.exec(body)?.[1])).toBeGreaterThan(0);
      expect(Number(/^os_fd_limit (\d+)$/m.exec(body)?.[1])).toBeGreaterThan(0);
    }
    expect(type.has('nodejs_active_handles_total')).toBe(false);
    expect(type.get('nodejs_active_handles')).toBe('gauge');
    expect(type.get('process_resident_memory_bytes')).toBe('gauge');
  });
});

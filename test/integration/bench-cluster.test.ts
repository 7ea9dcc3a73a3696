// The benchmark harness's cluster start-up, against our own bin/etcd: etcd's benchmark tool with one
// connection talks to the first endpoint, so the harness must put the leader there.
import { execFileSync } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { startCluster, type Cluster } from '../../scripts/bench/servers';
import { etcdBin } from '../helpers/etcd-process';
import { ETCDCTL_BIN } from '../helpers/etcdctl';
import { testTempDir } from '../helpers/temp_dir';

let cluster: Cluster | null = null;
afterEach(async () => {
  await cluster?.stop();
  cluster = null;
});

describe('bench harness cluster', () => {
  it('lists the leader first among a three-member cluster’s endpoints', async () => {
    cluster = await startCluster(
      { system: 'ours', command: etcdBin(), args: [], env: { ...process.env } },
      { members: 3, workDir: testTempDir('bench-cluster-'), etcdctl: ETCDCTL_BIN, readyTimeoutMs: 60_000 },
    );
    expect(cluster.endpoints).toHaveLength(3);
    const status = execFileSync(ETCDCTL_BIN, [`--endpoints=${cluster.endpoints[0]}`, 'endpoint', 'status'], {
      env: { ...process.env, ETCDCTL_API: '3' },
      timeout: 10_000,
    }).toString();
    // "endpoint, member ID, version, db size, is leader, ..."
    expect(status.split(', ')[4]).toBe('true');
  }, 90_000);
});

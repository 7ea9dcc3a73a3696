// The benchmark harness's cluster start-up, against our own bin/etcd: etcd's benchmark tool with one
// connection talks to the first endpoint, so the harness must put the leader there.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
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

  it('starts again on fresh ports when a member found its port taken, and only then', async () => {
    const dir = testTempDir('bench-cluster-port-');
    const marker = path.join(dir, 'failed-once');
    // The first member started fails as a member does whose port an outgoing connection took.
    const script = `if mkdir "${marker}" 2>/dev/null; then echo 'listen EADDRINUSE: address already in use'; exit 1; fi; exec "$0" "$@"`;
    const launcher = { system: 'ours' as const, command: 'sh', args: ['-c', script, etcdBin()], env: { ...process.env } };
    cluster = await startCluster(launcher, { members: 1, workDir: dir, etcdctl: ETCDCTL_BIN, readyTimeoutMs: 60_000 });
    expect(fs.existsSync(marker)).toBe(true);
    expect(cluster.endpoints).toHaveLength(1);
    await cluster.stop();
    cluster = null;

    // Any other failure is not retried.
    const failing = { system: 'ours' as const, command: 'sh', args: ['-c', 'echo "no such flag"; exit 2'], env: { ...process.env } };
    await expect(startCluster(failing, { members: 1, workDir: dir, etcdctl: ETCDCTL_BIN, readyTimeoutMs: 60_000 })).rejects.toThrow(
      /m1 exited \(2\)/,
    );
  }, 90_000);
});

// One server per data directory: a second server started on a directory in use waits (etcd's waits
// on bbolt's file lock) instead of writing the same WAL and database, and takes over once the first
// is gone, even after kill -9.
import { afterAll, describe, expect, it } from 'vitest';
import { signalGroup, spawnServer, stopGroup, waitExit } from '../helpers/child';
import { etcdBin, REPO_ROOT, startEtcd, type EtcdMember } from '../helpers/etcd-process';
import { EtcdGrpc } from '../helpers/grpc';
import { freePort } from '../helpers/ports';
import { sleepMs, waitFor } from '../helpers/wait';

describe('a data directory in use', () => {
  let first: EtcdMember;
  afterAll(async () => {
    await first?.stop();
  });

  it('makes a second server wait, saying why, until the first is killed; then it serves the same data', async () => {
    first = await startEtcd();
    const c1 = new EtcdGrpc(first.clientHostPort);
    await c1.unary('KV', 'Put', { key: Buffer.from('owner'), value: Buffer.from('first') });
    c1.close();

    const port = await freePort();
    const peer = await freePort();
    const url = `http://127.0.0.1:${port}`;
    const second = spawnServer(etcdBin(), [
      `--name=${first.name}`,
      `--data-dir=${first.dataDir}`,
      `--listen-client-urls=${url}`,
      `--advertise-client-urls=${url}`,
      `--listen-peer-urls=http://127.0.0.1:${peer}`,
      `--initial-advertise-peer-urls=${first.peerUrl}`,
      `--initial-cluster=${first.name}=${first.peerUrl}`,
    ], 120);
    let out = '';
    second.stderr?.on('data', (d: Buffer) => (out += d.toString()));
    second.stdout?.on('data', (d: Buffer) => (out += d.toString()));
    const c2 = new EtcdGrpc(`127.0.0.1:${port}`);
    try {
      if (etcdBin().startsWith(REPO_ROOT)) {
        await waitFor('the second server to say it waits', () => out.includes('data directory is in use by another process; waiting for it to be released'), { timeoutMs: 20_000 });
      } else {
        // etcd waits on bbolt's lock without a word; give it the time a start takes.
        await sleepMs(2_000);
      }
      // Still waiting a moment later: nothing served from the directory in use.
      await sleepMs(500);
      await expect(c2.unary('KV', 'Range', { key: Buffer.from('owner') }, 500)).rejects.toThrow();
      expect(second.exitCode).toBe(null);

      await first.kill9();
      const r = await waitFor('the second server to serve', async () => {
        try {
          return await c2.unary('KV', 'Range', { key: Buffer.from('owner') }, 1_000);
        } catch {
          return undefined;
        }
      }, { timeoutMs: 30_000, intervalMs: 200 });
      const kvs = r['kvs'] as Array<{ value: Buffer }>;
      expect(kvs.map((kv) => kv.value.toString())).toEqual(['first']);
    } finally {
      c2.close();
      await stopGroup(second, 10_000);
      signalGroup(second, 'SIGKILL');
      await waitExit(second, 5_000);
    }
  });
});

// Applied writes share one LMDB transaction for up to --backend-batch-interval (100 ms by default,
// as etcd's batch transaction) or --backend-batch-limit apply batches. A write is acknowledged
// once it is in the WAL and applied, before that commit: kill -9 must not lose it (the restart
// replays the WAL past the backend's consistent index).
import { afterEach, describe, expect, it } from 'vitest';
import { startEtcd, type EtcdMember } from '../helpers/etcd-process';
import { EtcdGrpc } from '../helpers/grpc';
import { sampleValue, scrapeMetrics } from '../helpers/prom';
import { waitFor } from '../helpers/wait';

const COMMITS = 'etcd_disk_backend_commit_duration_seconds_count';
const PUTS = 200;

let m: EtcdMember | undefined;
afterEach(async () => {
  await m?.stop();
  m = undefined;
});

async function commits(member: EtcdMember): Promise<number> {
  return sampleValue(await scrapeMetrics(member.clientUrl), COMMITS) ?? Number.NaN;
}

async function putInTurn(client: EtcdGrpc, prefix: string, n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    await client.unary('KV', 'Put', { key: Buffer.from(`${prefix}${String(i).padStart(4, '0')}`), value: Buffer.from(`v${i}`) }, 10_000);
  }
}

describe('backend batch transaction', () => {
  it('commits the writes of a batch interval together (etcd_disk_backend_commit_duration_seconds counts commits)', async () => {
    m = await startEtcd();
    const client = new EtcdGrpc(m.clientHostPort);
    try {
      await putInTurn(client, 'warm/', 5);
      const before = await commits(m);
      await putInTurn(client, 'batched/', PUTS);
      // The last interval's commit follows within 100 ms.
      await waitFor('a commit after the puts', async () => (await commits(m!)) > before, { timeoutMs: 5_000 });
      const made = (await commits(m)) - before;
      // Each put is its own Raft round and apply batch; 200 of them take well over one interval
      // here but share far fewer commits.
      expect(made).toBeGreaterThanOrEqual(1);
      expect(made).toBeLessThan(PUTS / 4);
    } finally {
      client.close();
    }
  });

  it('with --backend-batch-limit=1 commits every apply batch', async () => {
    m = await startEtcd({ args: ['--backend-batch-limit=1'] });
    const client = new EtcdGrpc(m.clientHostPort);
    try {
      const before = await commits(m);
      await putInTurn(client, 'each/', PUTS);
      expect((await commits(m)) - before).toBeGreaterThanOrEqual(PUTS);
    } finally {
      client.close();
    }
  });

  it('keeps acknowledged writes that kill -9 caught before their commit (--backend-batch-interval=10s)', async () => {
    m = await startEtcd({ args: ['--backend-batch-interval=10s'] });
    let client = new EtcdGrpc(m.clientHostPort);
    const before = await commits(m);
    await putInTurn(client, 'uncommitted/', 50);
    await client.unary('KV', 'DeleteRange', { key: Buffer.from('uncommitted/0007') }, 10_000);
    // Reads of the member see them already.
    const seen = await client.unary('KV', 'Range', { key: Buffer.from('uncommitted/'), range_end: Buffer.from('uncommitted0'), count_only: true }, 10_000);
    expect(Number(seen['count'])).toBe(49);
    // Not one of them is committed to the backend's file yet (10 s, 10000 batches).
    expect((await commits(m)) - before).toBe(0);
    client.close();
    await m.kill9();
    await m.restart();
    client = new EtcdGrpc(m.clientHostPort);
    try {
      const r = await client.unary('KV', 'Range', { key: Buffer.from('uncommitted/'), range_end: Buffer.from('uncommitted0') }, 10_000);
      const kvs = r['kvs'] as { key: Buffer; value: Buffer }[];
      expect(kvs.length).toBe(49);
      expect(kvs.map((kv) => kv.key.toString())).not.toContain('uncommitted/0007');
      expect(kvs.find((kv) => kv.key.toString() === 'uncommitted/0049')?.value.toString()).toBe('v49');
    } finally {
      client.close();
    }
  });
});

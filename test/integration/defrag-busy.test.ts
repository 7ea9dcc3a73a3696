// A defragmentation of a member that keeps taking writes. Writes wait while the file is copied (etcd
// blocks its applies for a defragmentation too); before, a copy overtaken by a write was thrown
// away, and after five such copies Defragment answered OK with the file left as it was: with the
// batch transaction open up to 100 ms after any write, that was every time on a busy member.
import { afterEach, describe, expect, it } from 'vitest';
import { startEtcd, type EtcdMember } from '../helpers/etcd-process';
import { EtcdGrpc } from '../helpers/grpc';

let m: EtcdMember | undefined;
afterEach(async () => {
  await m?.stop();
  m = undefined;
});

const TXNS = 40;
const PUTS_PER_TXN = 100;
const VALUE = Buffer.alloc(2000, 0x61);
const WRITERS = 8;

async function putMany(client: EtcdGrpc, prefix: string): Promise<void> {
  for (let t = 0; t < TXNS; t++) {
    const success = Array.from({ length: PUTS_PER_TXN }, (_, i) => ({
      request_put: { key: Buffer.from(`${prefix}${String(t * PUTS_PER_TXN + i).padStart(5, '0')}`), value: VALUE },
    }));
    await client.unary('KV', 'Txn', { success }, 10_000);
  }
}

async function dbSize(client: EtcdGrpc): Promise<number> {
  const s = await client.unary('Maintenance', 'Status', {}, 10_000);
  return Number(s['dbSize']);
}

describe('defragment under writes', () => {
  it('shrinks the file while a client keeps writing, and every acknowledged write is there after it', async () => {
    m = await startEtcd();
    const client = new EtcdGrpc(m.clientHostPort);
    const writer = new EtcdGrpc(m.clientHostPort);
    try {
      // ~8 MB that stays (so that copying the file takes a while) and ~8 MB deleted and
      // compacted away (free pages a defragmentation gives back).
      await putMany(client, 'live/');
      await putMany(client, 'filler/');
      const del = await client.unary('KV', 'DeleteRange', { key: Buffer.from('filler/'), range_end: Buffer.from('filler0') }, 10_000);
      expect(Number(del['deleted'])).toBe(TXNS * PUTS_PER_TXN);
      const rev = Number((del['header'] as { revision: string }).revision);
      await client.unary('KV', 'Compact', { revision: rev, physical: true }, 10_000);
      const before = await dbSize(client);
      expect(before).toBeGreaterThan(2 * TXNS * PUTS_PER_TXN * VALUE.length);

      // Puts from several writers at once, one after another, for as long as the defragmentation runs.
      const acked: string[] = [];
      let writing = true;
      const writes = Promise.all(
        Array.from({ length: WRITERS }, async (_, w) => {
          for (let i = 0; writing; i++) {
            const key = `busy/${w}/${String(i).padStart(6, '0')}`;
            await writer.unary('KV', 'Put', { key: Buffer.from(key), value: Buffer.from(`v${i}`) }, 10_000);
            acked.push(key);
          }
        }),
      );
      // Let the writes get going first.
      while (acked.length < 20) await new Promise((r) => setTimeout(r, 5));
      const during = acked.length;
      await client.unary('Maintenance', 'Defragment', {}, 30_000);
      const after = await dbSize(client);
      await new Promise((r) => setTimeout(r, 50));
      writing = false;
      await writes;

      expect(acked.length).toBeGreaterThan(during);
      expect(after).toBeLessThan(before * 0.7);
      const live = await client.unary('KV', 'Range', { key: Buffer.from('live/'), range_end: Buffer.from('live0'), count_only: true }, 10_000);
      expect(Number(live['count'])).toBe(TXNS * PUTS_PER_TXN);
      const r = await client.unary('KV', 'Range', { key: Buffer.from('busy/'), range_end: Buffer.from('busy0'), keys_only: true }, 10_000);
      const keys = (r['kvs'] as { key: Buffer }[]).map((kv) => kv.key.toString());
      expect(keys).toEqual([...acked].sort());
    } finally {
      writer.close();
      client.close();
    }
  });
});

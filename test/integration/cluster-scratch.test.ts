import { it } from 'vitest';
import { Cluster } from '../helpers/cluster';
it('latency', async () => {
  const c = await Cluster.start({ size: 3 });
  try {
    const l = await c.waitLeader();
    for (const m of c.members) {
      const t0 = Date.now();
      for (let i = 0; i < 20; i++) await m.client().unary('KV', 'Put', { key: Buffer.from('k'), value: Buffer.from('v') });
      const t1 = Date.now();
      for (let i = 0; i < 20; i++) await m.client().unary('KV', 'Range', { key: Buffer.from('k') });
      const t2 = Date.now();
      for (let i = 0; i < 20; i++) await m.client().unary('KV', 'Range', { key: Buffer.from('k'), serializable: true });
      const t3 = Date.now();
      console.log(`${m.name} leader=${m === l} put ${(t1 - t0) / 20} ms, linread ${(t2 - t1) / 20} ms, serread ${(t3 - t2) / 20} ms`);
    }
  } finally { await c.close(); }
}, 60000);

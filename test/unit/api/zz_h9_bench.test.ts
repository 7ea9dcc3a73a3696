import { it } from 'vitest';
import { createMetrics } from '../../../src/metrics';
import { call, startHarness } from './harness';

async function measure(withMetrics: boolean): Promise<number> {
  const metrics = withMetrics ? createMetrics({ serverVersion: '3.6.0', extensive: true, defaultMetrics: false }) : undefined;
  const h = await startHarness({ grpc: { metrics } });
  const kv = h.client('etcdserverpb.KV');
  const N = 20000, C = 50;
  const one = async (n: number) => { for (let i = 0; i < n; i++) await call(kv, 'Range', { key: Buffer.from('k') }); };
  await Promise.all(Array.from({ length: C }, () => one(40)));
  const c0 = process.cpuUsage();
  await Promise.all(Array.from({ length: C }, () => one(N / C)));
  const c = process.cpuUsage(c0);
  await h.close();
  return (c.user + c.system) / N;
}

it('bench', async () => {
  const r: Record<string, number[]> = { on: [], off: [] };
  for (let i = 0; i < 5; i++) { r.off.push(await measure(false)); r.on.push(await measure(true)); }
  const med = (a: number[]) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)]!;
  console.log('us per call (client+server, one process)', JSON.stringify({ on: r.on.map(Math.round), off: r.off.map(Math.round), medOn: med(r.on), medOff: med(r.off) }));
}, 300_000);

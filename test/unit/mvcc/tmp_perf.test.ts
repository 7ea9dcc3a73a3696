import { it } from 'vitest';
import { applyPut, applyRange, applyTxn } from '../../../src/apply/kv';
import { openStore, closeStore } from './helpers';
import { FakeLeases, putReq, rangeReq, txnReq, op, cmp } from '../apply/kv_helpers';
it('perf', async () => {
  const s = openStore();
  const leases = new FakeLeases();
  let t0 = performance.now();
  const N = 20000;
  for (let i = 0; i < N; i++) {
    s.backend.batch(() => { s.backend.setConsistentIndex(i + 1); const t = s.store.write(); applyPut(t, leases, putReq(`key-${i % 5000}`, 'x'.repeat(100))); t.end(); });
  }
  console.log('single-put batches/s', Math.round(N / ((performance.now() - t0) / 1000)));
  t0 = performance.now();
  for (let i = 0; i < N / 100; i++) {
    s.backend.batch(() => { for (let j = 0; j < 100; j++) { const t = s.store.write(); applyPut(t, leases, putReq(`key-${(i * 100 + j) % 5000}`, 'y'.repeat(100))); t.end(); } });
  }
  console.log('puts/s in batches of 100', Math.round(N / ((performance.now() - t0) / 1000)));
  t0 = performance.now();
  for (let i = 0; i < N; i++) applyRange(s.store, rangeReq(`key-${i % 5000}`));
  console.log('single-key ranges/s', Math.round(N / ((performance.now() - t0) / 1000)));
  t0 = performance.now();
  for (let i = 0; i < 200; i++) applyRange(s.store, rangeReq('key-', { rangeEnd: 'key.', limit: '100' }));
  console.log('prefix(5000) limit 100 ranges/s', Math.round(200 / ((performance.now() - t0) / 1000)));
  t0 = performance.now();
  for (let i = 0; i < 5000; i++) s.backend.batch(() => applyTxn(s.store, leases, txnReq([cmp(`key-${i}`, 'modRevision', '>', '0')], [op.put(putReq(`key-${i}`, 'z'))], [op.range(rangeReq(`key-${i}`))])));
  console.log('txn/s', Math.round(5000 / ((performance.now() - t0) / 1000)));
  t0 = performance.now();
  const ev = s.store.eventsInRange(1, 1e9, 100000, true);
  console.log('eventsInRange', ev.events.length, 'ms', Math.round(performance.now() - t0));
  t0 = performance.now();
  const { done } = s.backend.batch(() => s.store.compact(s.store.currentRevision() - 10));
  console.log('index compact ms', Math.round(performance.now() - t0));
  await done;
  console.log('physical compact total ms', Math.round(performance.now() - t0));
  t0 = performance.now();
  s.store.hashKV(0);
  console.log('hashKV ms', Math.round(performance.now() - t0));
  await closeStore(s);
  t0 = performance.now();
  const s2 = openStore(s.dbPath);
  console.log('restart ms', Math.round(performance.now() - t0), s2.store.keyCount());
  await closeStore(s2);
}, 300000);

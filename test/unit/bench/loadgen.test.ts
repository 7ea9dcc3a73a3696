import { describe, expect, it } from 'vitest';
import { battery, FULL, QUICK, selectCases } from '../../../scripts/bench/cases';
import { keyAfter, prefixEnd } from '../../../scripts/bench/etcd_client';
import { largeStoreKey } from '../../../scripts/bench/large_store';
import { LatencyRecorder, pool, waitFor, withTimeout } from '../../../scripts/bench/latency';
import { extraLabels, extraMedian, renderCaseTable, type Sample } from '../../../scripts/bench/table';

function sample(extra: Record<string, number>, ok = true): Sample {
  return { ok, qps: 100, p50Ms: 1, p99Ms: 2, errors: 0, requests: 100, peakRssMiB: 50, cpuSec: 1, wallSec: 1, extra };
}

describe('custom cases in the battery', () => {
  it('are part of the default battery, with the large store at 100k keys unless told otherwise', () => {
    const names = battery(FULL).map((c) => c.name);
    expect(names).toEqual(expect.arrayContaining(['large-store', 'idle-watchers', 'kube-mix']));
    const large = selectCases(battery(QUICK), 'large-store')[0];
    expect(large.custom).toBe('large-store');
    expect(large.params).toEqual({ keys: 100_000, listPages: 0 });
    const million = selectCases(battery({ ...FULL, largeKeys: 1_000_000 }), 'large-store')[0];
    expect(million.params).toEqual({ keys: 1_000_000, listPages: 0 });
    expect(million.timeoutSec).toBeGreaterThan(large.timeoutSec);
  });
});

describe('keys', () => {
  it('builds 8-20 byte large-store keys that stay distinct at 1M', () => {
    expect(largeStoreKey(7, 100_000).toString()).toBe('lk/00000007');
    expect(largeStoreKey(999_999, 1_000_000).length).toBeLessThanOrEqual(20);
    expect(largeStoreKey(999_999, 1_000_000).toString()).toBe('lk/00999999');
  });

  it('continues a paged list right after the last key, and ends a prefix range at the next prefix', () => {
    expect(keyAfter(Buffer.from('a/b'))).toEqual(Buffer.from('a/b\0'));
    expect(prefixEnd(Buffer.from('/registry/'))).toEqual(Buffer.from('/registry0'));
    expect(prefixEnd(Buffer.from([0x61, 0xff]))).toEqual(Buffer.from([0x62]));
    expect(prefixEnd(Buffer.from([0xff]))).toEqual(Buffer.from([0]));
  });
});

describe('latency and bounded waits', () => {
  it('gives nearest-rank percentiles and counts failures', async () => {
    const r = new LatencyRecorder();
    for (let i = 1; i <= 100; i++) r.record(i);
    expect(r.percentile(50)).toBe(50);
    expect(r.percentile(99)).toBe(99);
    expect(r.percentile(100)).toBe(100);
    await expect(r.time(() => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    expect(r.errors).toBe(1);
    expect(r.lastError).toBe('boom');
    expect(new LatencyRecorder().percentile(50)).toBeNaN();
  });

  it('fails a step that does not finish in time instead of hanging', async () => {
    await expect(withTimeout(new Promise(() => undefined), 20, 'stuck step')).rejects.toThrow('stuck step');
    await expect(waitFor(() => false, 20, 'never')).rejects.toThrow('never');
    expect(await withTimeout(Promise.resolve(5), 1000, 'x')).toBe(5);
  });

  it('runs a pool with bounded concurrency and reports the first failure', async () => {
    let inFlight = 0;
    let maxInFlight = 0;
    const done: number[] = [];
    await pool(50, 4, async (i) => {
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      await new Promise((r) => setTimeout(r, 1));
      done.push(i);
      inFlight--;
    });
    expect(maxInFlight).toBe(4);
    expect(done.sort((a, b) => a - b)).toEqual(Array.from({ length: 50 }, (_, i) => i));
    await expect(pool(10, 2, async (i) => { if (i === 3) throw new Error('third'); })).rejects.toThrow('third');
  });
});

describe('extra rows', () => {
  it('lists extra figures in first-seen order and takes their medians over successful runs', () => {
    const c = {
      name: 'large-store', title: 't', unit: 'keys',
      etcd: [sample({ 'RSS after load MiB': 100, 'load s': 2 }), sample({ 'RSS after load MiB': 120, 'load s': 4 }), sample({ 'RSS after load MiB': 999 }, false)],
      ours: [sample({ 'RSS after load MiB': 150, 'load s': 3, 'restart ms': 10 })],
      targets: [{ metric: 'RSS after load MiB', maxRatio: 1, what: 'resident size after load' }],
    };
    expect(extraLabels(c)).toEqual(['RSS after load MiB', 'load s', 'restart ms']);
    expect(extraMedian(c.etcd, 'RSS after load MiB')).toBe(110);
    expect(extraMedian(c.etcd, 'restart ms')).toBeUndefined();
    const md = renderCaseTable(c);
    expect(md).toContain('| RSS after load MiB | 110 | 150 | 1.36x |');
    expect(md).toContain('| restart ms | - | 10.0 | n/a |');
    expect(md).toContain('**resident size after load: ours/etcd = 1.36x** (target <= 1.00x: NOT met)');
  });
});

import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { IdleGc, type IdleGcOptions } from '../../../src/runtime/idle_gc';

const MiB = 1024 * 1024;
const opts: IdleGcOptions = { checkIntervalMs: 10_000, maxLoopUtilization: 0.01, minGrowthBytes: 16 * MiB, firstCheckAfterRecoveryMs: 2_000, minIdleMs: 6_000 };
/** One of the short windows judged after start-up (the regular ones, 10 s, are longer than minIdleMs). */
const SHORT = opts.firstCheckAfterRecoveryMs;

/** A heap that grows by what the test allocates and drops to `liveBytes` on a collection. */
function fakeHeap(startBytes: number) {
  const h = { used: startBytes, liveBytes: startBytes, utilization: 0, windowMs: opts.checkIntervalMs, spare: 0, collected: 0 };
  const probe = {
    usedHeapBytes: () => h.used,
    spareHeapBytes: () => h.spare,
    loopWindow: () => ({ windowMs: h.windowMs, utilization: h.utilization }),
    collect: () => {
      h.collected++;
      h.used = h.liveBytes;
    },
  };
  return { h, probe };
}

describe('idle GC', () => {
  it('collects once the loop goes idle after the heap grew, and only once for that growth', () => {
    const { h, probe } = fakeHeap(20 * MiB);
    const gc = new IdleGc(probe, opts);
    // A load: busy windows while the heap grows by 60 MiB (25 MiB of it live data).
    h.utilization = 0.6;
    h.used = 80 * MiB;
    h.liveBytes = 45 * MiB;
    expect(gc.check()).toBe(false);
    // Idle: the garbage goes, and the next idle windows leave the heap alone.
    h.utilization = 0.002;
    expect(gc.check()).toBe(true);
    expect(h.used).toBe(45 * MiB);
    expect(gc.check()).toBe(false);
    expect(gc.check()).toBe(false);
    expect(h.collected).toBe(1);
  });

  it('leaves a busy server to V8, however much the heap grew', () => {
    const { h, probe } = fakeHeap(20 * MiB);
    const gc = new IdleGc(probe, opts);
    h.used = 200 * MiB;
    for (const u of [0.05, 0.5, 0.011]) {
      h.utilization = u;
      expect(gc.check()).toBe(false);
    }
    expect(h.collected).toBe(0);
  });

  it('does not collect for small growth, and counts growth from where V8 last left the heap', () => {
    const { h, probe } = fakeHeap(40 * MiB);
    const gc = new IdleGc(probe, opts);
    h.used = 50 * MiB;
    expect(gc.check()).toBe(false);
    // V8 collected by itself down to 22 MiB: growth now counts from there.
    h.used = 22 * MiB;
    expect(gc.check()).toBe(false);
    h.used = 39 * MiB;
    h.liveBytes = 30 * MiB;
    expect(gc.check()).toBe(true);
    expect(h.collected).toBe(1);
  });
});

describe('how long the loop must have been idle', () => {
  it('waits for minIdleMs of idle windows in a row after a load, and a busy window starts the count again', () => {
    // Right after a load V8 still judges its allocation rate high and keeps the young generation
    // the load grew; a collection then frees the garbage but not that memory.
    const { h, probe } = fakeHeap(20 * MiB);
    const gc = new IdleGc(probe, opts);
    h.windowMs = SHORT;
    h.used = 90 * MiB;
    h.liveBytes = 50 * MiB;
    h.utilization = 0.7;
    expect(gc.check()).toBe(false);
    h.utilization = 0;
    expect(gc.check()).toBe(false); // idle 2 s
    expect(gc.check()).toBe(false); // idle 4 s
    h.utilization = 0.3;
    expect(gc.check()).toBe(false); // busy again
    h.utilization = 0;
    expect(gc.check()).toBe(false);
    expect(gc.check()).toBe(false);
    expect(h.collected).toBe(0);
    expect(gc.check()).toBe(true); // idle 6 s in a row
    expect(h.collected).toBe(1);
  });

  it('owes the first collection after start-up to a window idle for minIdleMs too', () => {
    const { h, probe } = fakeHeap(20 * MiB);
    const gc = new IdleGc(probe, opts);
    h.windowMs = SHORT;
    h.utilization = 0.9;
    expect(gc.recovered()).toBe(false);
    h.utilization = 0;
    expect(gc.check()).toBe(false);
    expect(gc.check()).toBe(false);
    expect(gc.check()).toBe(true);
  });
});

describe('when V8 keeps the heap it grew', () => {
  /** A load left 40 MiB of garbage over 40 MiB live, and V8 keeps 30 MiB of heap beyond what it uses after a collection. */
  function keptHeap(): { h: ReturnType<typeof fakeHeap>['h']; gc: IdleGc } {
    const { h, probe } = fakeHeap(20 * MiB);
    const gc = new IdleGc(probe, opts);
    h.used = 80 * MiB;
    h.liveBytes = 40 * MiB;
    h.spare = 30 * MiB; // V8 kept its grown young generation
    return { h, gc };
  }

  it('collects again after more quiet, at most twice in a row, then leaves it until the heap grows again', () => {
    const { h, gc } = keptHeap();
    expect(gc.check()).toBe(true);
    expect(gc.check()).toBe(true); // first follow-up
    expect(gc.check()).toBe(true); // second
    expect(gc.check()).toBe(false);
    expect(gc.check()).toBe(false);
    expect(h.collected).toBe(3);
    // New growth: the same again.
    h.used = 70 * MiB;
    expect(gc.check()).toBe(true);
    expect(h.collected).toBe(4);
  });

  it('stops following up once a collection gave the heap back', () => {
    const { h, gc } = keptHeap();
    expect(gc.check()).toBe(true);
    h.spare = 4 * MiB;
    expect(gc.check()).toBe(true);
    expect(gc.check()).toBe(false);
    expect(h.collected).toBe(2);
  });

  it('needs minIdleMs of fresh quiet before a follow-up', () => {
    const { h, gc } = keptHeap();
    h.windowMs = SHORT;
    for (let i = 0; i < 2; i++) expect(gc.check()).toBe(false);
    expect(gc.check()).toBe(true); // 6 s idle
    for (let i = 0; i < 2; i++) expect(gc.check()).toBe(false);
    expect(gc.check()).toBe(true); // 6 s more
  });
});

describe('collection after start-up has read its state back', () => {
  it('collects at once, busy loop or not, when reading the state back grew the heap', () => {
    const { h, probe } = fakeHeap(20 * MiB);
    const gc = new IdleGc(probe, opts);
    // A WAL replay and an index rebuild: 60 MiB allocated, 20 MiB of it kept.
    h.used = 80 * MiB;
    h.liveBytes = 40 * MiB;
    h.utilization = 0.9;
    expect(gc.recovered()).toBe(true);
    expect(h.used).toBe(40 * MiB);
    // Busy windows leave it; the first idle one collects once more (V8 shrinks its young
    // generation only when allocation is slow), and after that only growth counts again.
    expect(gc.check()).toBe(false);
    h.utilization = 0;
    expect(gc.check()).toBe(true);
    expect(gc.check()).toBe(false);
    expect(gc.check()).toBe(false);
    expect(h.collected).toBe(2);
  });

  it('does not collect a small start-up at once, but still once in its first idle window', () => {
    const { h, probe } = fakeHeap(20 * MiB);
    const gc = new IdleGc(probe, opts);
    h.used = 30 * MiB;
    h.liveBytes = 22 * MiB;
    h.utilization = 0.9;
    expect(gc.recovered()).toBe(false);
    expect(h.collected).toBe(0);
    h.utilization = 0;
    expect(gc.check()).toBe(true);
    expect(gc.check()).toBe(false);
    expect(h.collected).toBe(1);
  });
});

describe('the first idle window after start-up', () => {
  // A quiet start-up (nothing grown, so no collection at once): the collection owed to the first
  // idle window comes after firstCheckAfterRecoveryMs, not after a whole check interval (60 s here).
  const script = (firstMs: number): string => `
    const { PerformanceObserver, constants } = require('node:perf_hooks');
    const { startIdleGc } = require(${JSON.stringify(path.resolve(__dirname, '../../../dist/src/runtime/idle_gc.js'))});
    let majors = 0;
    new PerformanceObserver((l) => {
      for (const e of l.getEntries()) if (e.detail.kind === constants.NODE_PERFORMANCE_GC_MAJOR) majors++;
    }).observe({ entryTypes: ['gc'] });
    setTimeout(() => {
      const handle = startIdleGc({ checkIntervalMs: 60000, maxLoopUtilization: 0.5, minGrowthBytes: 64 * 1024 * 1024, firstCheckAfterRecoveryMs: ${firstMs}, minIdleMs: ${firstMs} });
      const before = majors;
      handle.recovered();
      setTimeout(() => { process.stdout.write(String(majors - before)); process.exit(0); }, 1500);
    }, 300);
  `;
  const run = (firstMs: number): number => {
    const r = spawnSync(process.execPath, ['--initial-old-space-size=64', '--expose-gc', '-e', script(firstMs)], { encoding: 'utf8', timeout: 20_000 });
    expect(r.status, r.stderr).toBe(0);
    return Number(r.stdout);
  };

  it('is judged soon after start-up has read its state back', () => {
    expect(run(200)).toBeGreaterThanOrEqual(1);
    expect(run(60_000)).toBe(0);
  });
});

describe('idle GC in a real process', () => {
  // A burst of garbage that stays below bin/etcd's 64 MiB old-generation floor, then a quiet loop:
  // with --expose-gc the check runs one major collection; without it, it stays off. (Runs the
  // compiled module: `npm test` builds dist first, as bin/etcd needs.)
  const script = `
    const { PerformanceObserver, constants } = require('node:perf_hooks');
    const { startIdleGc } = require(${JSON.stringify(path.resolve(__dirname, '../../../dist/src/runtime/idle_gc.js'))});
    let majors = 0;
    new PerformanceObserver((l) => {
      for (const e of l.getEntries()) if (e.detail.kind === constants.NODE_PERFORMANCE_GC_MAJOR) majors++;
    }).observe({ entryTypes: ['gc'] });
    setTimeout(() => {
      const before = majors;
      const handle = startIdleGc({ checkIntervalMs: 100, maxLoopUtilization: 0.5, minGrowthBytes: 4 * 1024 * 1024, firstCheckAfterRecoveryMs: 60000, minIdleMs: 200 });
      let junk = [];
      for (let i = 0; i < 300000; i++) junk.push({ i, s: 'x' + i });
      junk = null;
      if (process.env.RECOVERED) {
        // Collected synchronously, before the loop could run an idle check.
        const usedBefore = process.memoryUsage().heapUsed;
        handle.recovered();
        const freed = usedBefore - process.memoryUsage().heapUsed;
        process.stdout.write(freed > 4 * 1024 * 1024 ? 'now ' : 'not yet ');
      }
      setTimeout(() => { process.stdout.write(String(majors - before)); process.exit(0); }, 1500);
    }, 300);
  `;
  const run = (flags: string[], env: Record<string, string> = {}): string => {
    const r = spawnSync(process.execPath, [...flags, '-e', script], { encoding: 'utf8', timeout: 20_000, env: { ...process.env, ...env } });
    expect(r.status, r.stderr).toBe(0);
    return r.stdout;
  };

  it('collects after the burst with --expose-gc, and never without it', () => {
    expect(Number(run(['--initial-old-space-size=64', '--expose-gc']))).toBeGreaterThanOrEqual(1);
    expect(run(['--initial-old-space-size=64'])).toBe('0');
  });

  it('collects at the end of start-up when told the state is read back', () => {
    expect(run(['--initial-old-space-size=64', '--expose-gc'], { RECOVERED: '1' })).toMatch(/^now [1-9]/);
    expect(run(['--initial-old-space-size=64'], { RECOVERED: '1' })).toBe('not yet 0');
  });
});

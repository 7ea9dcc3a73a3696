// idle-watchers: many watch streams (one watcher each, on distinct keys) held idle. What each
// costs the server in memory and CPU, and whether a put still reaches exactly the right watcher.
import assert from 'node:assert';
import { budgetMs, generatorCpuSec, type CustomContext, type CustomSample } from './custom_case';
import { EtcdConnection, type WatchStream } from './etcd_client';
import { LatencyRecorder, pool, sleep, withTimeout } from './latency';
import { readProcs } from './procstat';

export const IDLE_WATCHERS_DEFAULTS = {
  watchers: 10_000,
  conns: 100,
  /** Watch creations awaiting their "created" answer at once. */
  createInFlight: 200,
  /** Seconds the watchers are held idle while the server's CPU is sampled. */
  idleSec: 5,
  /** Puts whose event must reach exactly its own watcher. */
  checks: 20,
};

const KEY_PREFIX = 'iw/';
const CREATE_TIMEOUT_MS = 30_000;
const EVENT_TIMEOUT_MS = 10_000;
const PUT_TIMEOUT_MS = 10_000;
/** Time for memory to settle after the last creation (and for stray events to show up after the checks). */
const SETTLE_MS = 2000;
/**
 * Wait before the "no watchers" figure. A fresh server of ours gives back the young generation its
 * start-up grew in its first idle collection (src/runtime/idle_gc.ts): 89 -> 77 MiB ~11 s after
 * it starts, or ~18 s with these 100 connections made at 2 s (94 -> 77). Read 2 s after connecting,
 * the baseline held those ~17 MiB, which went away while the watchers were created, so the bytes
 * per watcher came out too low. etcd waits the same.
 */
const BASELINE_SETTLE_MS = 20_000;

interface Watcher {
  key: Buffer;
  stream?: WatchStream;
  created: boolean;
  ended: boolean;
  endError?: string;
  events: { key: Buffer; value: Buffer }[];
  /** Called on the next created answer or event. */
  notify?: () => void;
}

function watchKey(i: number): Buffer {
  return Buffer.from(KEY_PREFIX + String(i).padStart(6, '0'));
}

function waitNotify(w: Watcher, done: () => boolean, timeoutMs: number, what: string): Promise<void> {
  if (done()) return Promise.resolve();
  return withTimeout(
    new Promise<void>((resolve) => {
      w.notify = () => {
        if (done()) {
          w.notify = undefined;
          resolve();
        }
      };
    }),
    timeoutMs,
    what,
  ).finally(() => {
    w.notify = undefined;
  });
}

export async function runIdleWatchers(ctx: CustomContext, params: Readonly<Record<string, number>>): Promise<CustomSample> {
  const p = { ...IDLE_WATCHERS_DEFAULTS, ...params };
  assert(p.watchers >= p.checks && p.conns >= 1);
  const endpoint = ctx.cluster.endpoints[0];
  const conns = Array.from({ length: p.conns }, () => new EtcdConnection(endpoint));
  const extra: Record<string, number> = {};
  try {
    // Connections first, so the "before" figure holds them and the difference is the watchers alone.
    await withTimeout(Promise.all(conns.map((c) => c.range({ key: Buffer.from(KEY_PREFIX) }, 10_000))), budgetMs(ctx, 60_000), 'connect');
    await sleep(BASELINE_SETTLE_MS);
    const before = readProcs(ctx.cluster.pids);
    extra[`RSS with ${p.conns} conns, no watchers MiB`] = before.rssMiB;

    const watchers: Watcher[] = Array.from({ length: p.watchers }, (_, i) => ({ key: watchKey(i), created: false, ended: false, events: [] }));
    const lat = new LatencyRecorder();
    const genCpu0 = process.cpuUsage();
    const t0 = performance.now();
    ctx.log(`creating ${p.watchers} watch streams over ${p.conns} conns`);
    await withTimeout(
      pool(p.watchers, p.createInFlight, async (i) => {
        const w = watchers[i];
        w.stream = conns[i % conns.length].watchStream(
          (r) => {
            if (r.created) w.created = true;
            for (const e of r.events) w.events.push({ key: e.kv.key, value: e.kv.value });
            w.notify?.();
          },
          (err) => {
            w.ended = true;
            w.endError = err?.message;
            w.notify?.();
          },
        );
        const c0 = performance.now();
        w.stream.create({ key: w.key });
        await waitNotify(w, () => w.created || w.ended, CREATE_TIMEOUT_MS, `watch ${i} created`);
        if (!w.created) throw new Error(`watch stream ${i} ended before "created": ${w.endError ?? 'no error'}`);
        lat.record(performance.now() - c0);
      }),
      budgetMs(ctx, 600_000),
      'watch creation',
    );
    const createSec = (performance.now() - t0) / 1000;
    const genCpuSec = generatorCpuSec(genCpu0);
    const afterCreate = readProcs(ctx.cluster.pids);

    await sleep(SETTLE_MS);
    const idle0 = readProcs(ctx.cluster.pids);
    await sleep(p.idleSec * 1000);
    const idle1 = readProcs(ctx.cluster.pids);
    extra[`RSS with ${p.watchers} watchers MiB`] = idle1.rssMiB;
    extra['bytes per watcher (RSS)'] = ((idle1.rssMiB - before.rssMiB) * 2 ** 20) / p.watchers;
    extra['bytes per watcher (anon RSS)'] = ((idle1.anonRssMiB - before.anonRssMiB) * 2 ** 20) / p.watchers;
    extra['idle server CPU %'] = ((idle1.cpuSec - idle0.cpuSec) / p.idleSec) * 100;

    // Delivery: a put on one watched key must produce one event, on that key's watcher only.
    const delivery = new LatencyRecorder();
    const putConn = conns[0];
    let right = 0;
    for (let k = 0; k < p.checks; k++) {
      const i = (Math.floor((k * p.watchers) / p.checks) + k * 7) % p.watchers;
      const w = watchers[i];
      const value = Buffer.from(`check-${k}`);
      const had = w.events.length;
      const c0 = performance.now();
      await putConn.txn([], [{ put: { key: w.key, value } }], [], PUT_TIMEOUT_MS);
      await waitNotify(w, () => w.events.length > had, EVENT_TIMEOUT_MS, `event for watcher ${i}`);
      delivery.record(performance.now() - c0);
      const e = w.events[w.events.length - 1];
      if (w.events.length === had + 1 && e.key.equals(w.key) && e.value.equals(value)) right++;
    }
    await sleep(SETTLE_MS);
    const totalEvents = watchers.reduce((n, w) => n + w.events.length, 0);
    extra['checks delivered to the right watcher'] = right;
    extra['stray events'] = totalEvents - right;
    extra['delivery p50 ms'] = delivery.percentile(50);
    extra['delivery max ms'] = delivery.percentile(100);
    extra['streams lost'] = watchers.filter((w) => w.ended).length;
    extra['generator CPU s (create)'] = genCpuSec;
    if (right !== p.checks) throw new Error(`only ${right} of ${p.checks} check puts reached their watcher alone`);

    return {
      qps: p.watchers / createSec,
      p50Ms: lat.percentile(50),
      p99Ms: lat.percentile(99),
      requests: p.watchers,
      errors: lat.errors + (totalEvents - right),
      cpuSec: Math.max(0, afterCreate.cpuSec - before.cpuSec),
      peakRssMiB: readProcs(ctx.cluster.pids).peakRssMiB,
      wallSec: createSec,
      extra,
    };
  } finally {
    for (const c of conns) c.close();
  }
}

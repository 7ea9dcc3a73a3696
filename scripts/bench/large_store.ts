// large-store: load N keys as fast as the server takes them, then measure what a big store costs:
// resident size, a count over everything, a paged list, a compaction, and a restart.
import assert from 'node:assert';
import { budgetMs, diskUsageMiB, generatorCpuSec, type CustomContext, type CustomSample } from './custom_case';
import { EtcdConnection, keyAfter, type RequestOp } from './etcd_client';
import { LatencyRecorder, pool, sleep, withTimeout } from './latency';
import { readProcs } from './procstat';

export const LARGE_STORE_DEFAULTS = {
  keys: 100_000,
  valueBytes: 256,
  /** Puts per txn; etcd's default --max-txn-ops is 128. */
  putsPerTxn: 100,
  conns: 8,
  /** Txns in flight at once. */
  inFlight: 32,
  /**
   * Pages the paged list reads at most (0: all). etcd 3.4 collects every revision from the start key
   * to the end of the range before it applies the limit, so paging through 1M keys costs it ~N²/1000
   * index steps (about 45 min on these machines); a cap keeps a 1M run within reach.
   */
  listPages: 0,
  /**
   * Seconds the server sits idle before the "settled" resident sizes are read. Right after a bulk
   * load V8 still holds the heap it grew for it; its memory reducer gives it back once allocation
   * has been low for a while (seen here ~20-30 s after the load ended: 178 -> 129 MiB at 100k keys).
   * Go returns memory on its own schedule. Both systems get the same wait.
   */
  settleSec: 45,
};

const KEY_PREFIX = 'lk/';
const TXN_TIMEOUT_MS = 60_000;
const PAGE = 500;
const PAGE_TIMEOUT_MS = 30_000;
const PROBE_TIMEOUT_MS = 1000;
const PROBE_INTERVAL_MS = 20;
const ALL_KEYS_FROM = Buffer.from([0]);
/** range_end "\0" means every key from `key` on. */
const TO_THE_END = Buffer.from([0]);

/** A stride coprime with n: consecutive batches then write keys spread over the whole key space. */
function strideFor(n: number): number {
  for (const s of [7919, 7907, 7901, 7883]) if (n % s !== 0) return s;
  return 1;
}

export function largeStoreKey(i: number, keys: number): Buffer {
  const digits = Math.max(8, String(keys - 1).length);
  return Buffer.from(KEY_PREFIX + String(i).padStart(digits, '0'));
}

async function fullCount(conn: EtcdConnection, timeoutMs: number): Promise<{ count: number; revision: number }> {
  const r = await conn.range({ key: ALL_KEYS_FROM, rangeEnd: TO_THE_END, countOnly: true }, timeoutMs);
  return { count: r.count, revision: r.revision };
}

/** Pages through every key, 500 at a time, at the revision of the first page (as kube's lists do). */
async function pagedList(conn: EtcdConnection, maxPages: number, budget: number): Promise<{ keys: number; pages: number; revision: number }> {
  const deadline = Date.now() + budget;
  let from: Buffer = ALL_KEYS_FROM;
  let revision = 0;
  let keys = 0;
  let pages = 0;
  for (;;) {
    assert(Date.now() < deadline, `paged list: not done within ${budget} ms`);
    const r = await conn.range({ key: from, rangeEnd: TO_THE_END, limit: PAGE, revision }, PAGE_TIMEOUT_MS);
    if (revision === 0) revision = r.revision;
    pages++;
    keys += r.kvs.length;
    if (!r.more || r.kvs.length === 0 || pages === maxPages) return { keys, pages, revision };
    from = keyAfter(r.kvs[r.kvs.length - 1].key);
  }
}

/** Time from now until a linearizable read answers, each attempt on a fresh connection (no reconnect backoff). */
async function untilReadAnswers(ctx: CustomContext, endpoint: string, budget: number): Promise<number> {
  const t0 = performance.now();
  const deadline = Date.now() + budget;
  let last = '';
  for (;;) {
    const why = ctx.cluster.exitedSinceRestart();
    if (why) throw new Error(`restart: ${why}`);
    const conn = new EtcdConnection(endpoint);
    try {
      await conn.range({ key: Buffer.from(KEY_PREFIX) }, PROBE_TIMEOUT_MS);
      return performance.now() - t0;
    } catch (e) {
      last = (e as Error).message;
    } finally {
      conn.close();
    }
    if (Date.now() > deadline) throw new Error(`restart: no read answered within ${budget} ms (${last})`);
    await sleep(PROBE_INTERVAL_MS);
  }
}

export async function runLargeStore(ctx: CustomContext, params: Readonly<Record<string, number>>): Promise<CustomSample> {
  const p = { ...LARGE_STORE_DEFAULTS, ...params };
  assert(p.keys >= p.putsPerTxn && p.putsPerTxn >= 1 && p.putsPerTxn <= 128);
  const endpoint = ctx.cluster.endpoints[0];
  const conns = Array.from({ length: p.conns }, () => new EtcdConnection(endpoint));
  const extra: Record<string, number> = {};
  /** Resident size after the server has sat idle for settleSec (see LARGE_STORE_DEFAULTS). */
  const settledRss = async (after: string): Promise<void> => {
    if (p.settleSec <= 0) return;
    await sleep(p.settleSec * 1000);
    const settled = readProcs(ctx.cluster.pids);
    extra[`RSS ${p.settleSec} s after ${after} MiB`] = settled.rssMiB;
    extra[`anon RSS ${p.settleSec} s after ${after} MiB`] = settled.anonRssMiB;
  };
  try {
    const value = Buffer.alloc(p.valueBytes, 0x76);
    const stride = strideFor(p.keys);
    const batches = Math.ceil(p.keys / p.putsPerTxn);
    const lat = new LatencyRecorder();

    const before = readProcs(ctx.cluster.pids);
    const genCpu0 = process.cpuUsage();
    const t0 = performance.now();
    ctx.log(`loading ${p.keys} keys (${batches} txns of ${p.putsPerTxn} puts, ${p.inFlight} in flight over ${p.conns} conns)`);
    await withTimeout(
      pool(batches, p.inFlight, async (b) => {
        const ops: RequestOp[] = [];
        for (let j = b * p.putsPerTxn; j < Math.min(p.keys, (b + 1) * p.putsPerTxn); j++) {
          ops.push({ put: { key: largeStoreKey((j * stride) % p.keys, p.keys), value } });
        }
        await lat.time(() => conns[b % conns.length].txn([], ops, [], TXN_TIMEOUT_MS));
      }),
      budgetMs(ctx, Infinity),
      'load',
    );
    const loadSec = (performance.now() - t0) / 1000;
    const genCpuSec = generatorCpuSec(genCpu0);
    const afterLoad = readProcs(ctx.cluster.pids);
    extra['load s'] = loadSec;
    extra['RSS after load MiB'] = afterLoad.rssMiB;
    extra['anon RSS after load MiB'] = afterLoad.anonRssMiB;
    extra['VmHWM after load MiB'] = afterLoad.peakRssMiB;
    extra['data dir MiB'] = diskUsageMiB(ctx.cluster.dataDir);
    if (p.settleSec > 0) ctx.log(`loaded in ${loadSec.toFixed(1)} s; idle ${p.settleSec} s, then resident size`);
    await settledRss('load');

    const conn = conns[0];
    ctx.log(`loaded in ${loadSec.toFixed(1)} s; count, paged list, compaction`);
    let t = performance.now();
    const counted = await fullCount(conn, budgetMs(ctx, 120_000));
    extra['count_only range ms'] = performance.now() - t;
    assert.equal(counted.count, p.keys, `count_only says ${counted.count} keys, loaded ${p.keys}`);

    t = performance.now();
    const allPages = Math.ceil(p.keys / PAGE);
    const pages = p.listPages > 0 ? Math.min(p.listPages, allPages) : allPages;
    const listed = await pagedList(conn, pages, budgetMs(ctx, 3_600_000));
    extra[pages === allPages ? 'paged list ms (limit 500, all pages)' : `paged list ms (limit 500, first ${pages} pages)`] = performance.now() - t;
    assert.equal(listed.keys, pages * PAGE > p.keys ? p.keys : pages * PAGE, `paged list saw ${listed.keys} keys in ${listed.pages} pages, loaded ${p.keys}`);

    t = performance.now();
    await conn.compact(listed.revision, true, budgetMs(ctx, 300_000));
    extra['compaction ms'] = performance.now() - t;
    const peakRssMiB = readProcs(ctx.cluster.pids).peakRssMiB;

    for (const c of conns) c.close();
    conns.length = 0;
    ctx.log('restart');
    const { stopMs } = await withTimeout(ctx.cluster.restart(), budgetMs(ctx, 120_000), 'restart');
    extra['stop ms'] = stopMs;
    extra['restart ms (until a read answers)'] = await untilReadAnswers(ctx, endpoint, budgetMs(ctx, 300_000));
    const afterRestart = readProcs(ctx.cluster.pids);
    extra['RSS after restart MiB'] = afterRestart.rssMiB;
    extra['anon RSS after restart MiB'] = afterRestart.anonRssMiB;
    await settledRss('restart');

    const fresh = new EtcdConnection(endpoint);
    conns.push(fresh);
    t = performance.now();
    const recount = await fullCount(fresh, budgetMs(ctx, 120_000));
    extra['count after restart ms'] = performance.now() - t;
    assert.equal(recount.count, p.keys, `after restart count_only says ${recount.count} keys, loaded ${p.keys}`);
    extra['generator CPU s (load)'] = genCpuSec;

    return {
      qps: p.keys / loadSec,
      p50Ms: lat.percentile(50),
      p99Ms: lat.percentile(99),
      requests: p.keys,
      errors: lat.errors,
      cpuSec: Math.max(0, afterLoad.cpuSec - before.cpuSec),
      peakRssMiB,
      wallSec: loadSec,
      extra,
    };
  } finally {
    for (const c of conns) c.close();
  }
}

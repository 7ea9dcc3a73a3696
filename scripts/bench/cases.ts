// The battery: etcd's performance-guide loads (key 8 B, value 256 B) as `benchmark` tool invocations.
import { numberedKeys, type SeedKey } from './seed';
import { LARGE_STORE_DEFAULTS } from './large_store';
import type { RatioTarget } from './table';

/** Cases the harness drives with its own load generator (etcd's tool has no equivalent). */
export type CustomCaseName = 'large-store' | 'idle-watchers' | 'kube-mix';

export interface BenchCase {
  name: string;
  title: string;
  members: 1 | 3;
  /** What the QPS column counts. */
  unit: 'req' | 'event' | 'key' | 'watch' | 'op';
  /** The tool's arguments, without --endpoints. */
  toolArgs: string[];
  /** Keys put before the load starts. */
  seed: SeedKey[];
  /** The tool's summary block to read (its heading); default the last one. */
  section?: string;
  /** Hard limit on one run of the tool; the run counts as failed beyond it. */
  timeoutSec: number;
  /** What the tool's latency figures mean when it is not request round trip. */
  note?: string;
  /** Run by the harness's own generator instead of the tool (toolArgs then unused). */
  custom?: CustomCaseName;
  /** Parameters of the custom case (see the defaults in its module). */
  params?: Record<string, number>;
  targets?: RatioTarget[];
}

const KEY_BYTES = 8;
const VALUE_BYTES = 256;
/** The put-4k cases' values: a Kubernetes object's size. */
const LARGE_VALUE_BYTES = 4096;
/** Larger than any total: --sequential-keys then writes a distinct key per request. */
const DISTINCT_KEY_SPACE = 100_000_000;
const ONE_KEY = 'benchkey';
const RANGE_KEYS = 1000;

/** Client levels of etcd's performance guide: [clients, connections]. */
const LEVELS: readonly [number, number][] = [
  [1, 1],
  [100, 10],
  [1000, 100],
];

export interface BatteryOptions {
  /** Seconds one run should take at etcd's reference throughput. */
  targetSec: number;
  /** Multiplier on the expected time for the per-run timeout (ours runs up to ~10x slower on a loaded machine). */
  timeoutFactor: number;
  minTimeoutSec: number;
  /** Keys the large-store case loads, and the most pages its paged list reads (0: all). */
  largeKeys: number;
  largeListPages?: number;
  /** How long kube-mix runs its load, and idle-watchers holds its watchers idle. */
  mixSec: number;
  idleSec: number;
}

export const FULL: BatteryOptions = { targetSec: 4, timeoutFactor: 30, minTimeoutSec: 60, largeKeys: 100_000, mixSec: 10, idleSec: 5 };
export const QUICK: BatteryOptions = { targetSec: 1.5, timeoutFactor: 30, minTimeoutSec: 40, largeKeys: 100_000, mixSec: 5, idleSec: 3 };

/**
 * Reference throughput of etcd 3.4.23 on these 2-core machines (the figures), used only
 * to size each run to about `targetSec`; both systems get the same total.
 */
function sized(refQps: number, o: BatteryOptions): { total: number; timeoutSec: number } {
  const total = Math.max(50, Math.round(refQps * o.targetSec));
  return { total, timeoutSec: Math.max(o.minTimeoutSec, Math.ceil(o.targetSec * o.timeoutFactor)) };
}

function levelName(clients: number): string {
  return `${clients}c`;
}

export function battery(o: BatteryOptions): BenchCase[] {
  const cases: BenchCase[] = [];
  const valueArgs = [`--key-size=${KEY_BYTES}`, `--val-size=${VALUE_BYTES}`];
  const oneKeySeed: SeedKey[] = [{ key: ONE_KEY, valueBytes: VALUE_BYTES }];

  const putRef: Record<number, number> = { 1: 1100, 100: 11000, 1000: 12000 };
  const rangeLRef: Record<number, number> = { 1: 1500, 100: 6000, 1000: 6000 };
  const rangeSRef: Record<number, number> = { 1: 2500, 100: 15000, 1000: 15000 };
  const put3Ref: Record<number, number> = { 1: 400, 100: 4000, 1000: 7000 };

  for (const members of [1, 3] as const) {
    const tag = members === 1 ? '' : '-3m';
    const where = members === 1 ? 'single member' : '3 members';
    for (const [clients, conns] of LEVELS) {
      const { total, timeoutSec } = sized((members === 1 ? putRef : put3Ref)[clients], o);
      cases.push({
        name: `put-${levelName(clients)}${tag}`,
        title: `put, ${clients} client(s) / ${conns} conn(s), distinct keys, ${where}`,
        members,
        unit: 'req',
        toolArgs: [
          `--clients=${clients}`, `--conns=${conns}`, ...(members === 3 ? ['--target-leader'] : []),
          'put', `--total=${total}`, ...valueArgs, '--sequential-keys', `--key-space-size=${DISTINCT_KEY_SPACE}`,
        ],
        seed: [],
        timeoutSec: members === 1 ? timeoutSec : timeoutSec * 2,
      });
    }
    {
      // Kubernetes objects are 1-10 KiB (a Pod ~4 KiB), not the guide's 256 B: a store's page
      // layout and write-back costs show at this size and hide at 256 B.
      const { total, timeoutSec } = sized(members === 1 ? 5500 : 2800, o);
      cases.push({
        name: `put-4k-100c${tag}`,
        title: `put of 4 KiB values, 100 clients / 10 conns, distinct keys, ${where}`,
        members,
        unit: 'req',
        toolArgs: [
          '--clients=100', '--conns=10', ...(members === 3 ? ['--target-leader'] : []),
          'put', `--total=${total}`, `--key-size=${KEY_BYTES}`, `--val-size=${LARGE_VALUE_BYTES}`, '--sequential-keys', `--key-space-size=${DISTINCT_KEY_SPACE}`,
        ],
        seed: [],
        timeoutSec: members === 1 ? timeoutSec : timeoutSec * 2,
      });
    }
    for (const consistency of ['l', 's'] as const) {
      for (const [clients, conns] of LEVELS) {
        // Three members read linearizably about as fast as one here (7.8-8.8k/s at 100 and 1000
        // clients); sizing them at half the single-member rate made runs of ~1.3 s, too short for
        // ours to leave V8's warm-up (range-l-100c-3m: 0.74x at 12k requests, 0.90-1.15x at 40k).
        const ref = (consistency === 'l' ? rangeLRef : rangeSRef)[clients];
        const { total, timeoutSec } = sized(ref, o);
        cases.push({
          name: `range-${consistency}-${levelName(clients)}${tag}`,
          title: `range of one key, ${consistency === 'l' ? 'linearizable' : 'serializable'}, ${clients} client(s) / ${conns} conn(s), ${where}`,
          members,
          unit: 'req',
          toolArgs: [`--clients=${clients}`, `--conns=${conns}`, 'range', ONE_KEY, `--consistency=${consistency}`, `--total=${total}`],
          seed: oneKeySeed,
          timeoutSec: members === 1 ? timeoutSec : timeoutSec * 2,
        });
      }
    }
    if (members === 3) break;

    {
      const { total, timeoutSec } = sized(500, o);
      cases.push({
        name: 'range-1000keys',
        title: `linearizable range of ${RANGE_KEYS} keys (256 B values), 10 clients / 10 conns`,
        members: 1,
        unit: 'req',
        toolArgs: ['--clients=10', '--conns=10', 'range', 'r/', 'r0', '--consistency=l', `--total=${total}`],
        seed: numberedKeys('r/', RANGE_KEYS, KEY_BYTES).map((key) => ({ key, valueBytes: VALUE_BYTES })),
        timeoutSec,
      });
    }
    {
      const { total, timeoutSec } = sized(4000, o);
      cases.push({
        name: 'txn-put',
        title: 'txn with one put, 100 clients / 10 conns',
        members: 1,
        unit: 'req',
        toolArgs: ['--clients=100', '--conns=10', 'txn-put', `--total=${total}`, ...valueArgs, '--txn-ops=1', `--key-space-size=${DISTINCT_KEY_SPACE}`],
        seed: [],
        timeoutSec,
      });
    }
    {
      const { total, timeoutSec } = sized(10000, o);
      cases.push({
        name: 'lease-keepalive',
        title: 'lease keepalive (unary KeepAliveOnce), 100 clients / 10 conns',
        members: 1,
        unit: 'req',
        toolArgs: ['--clients=100', '--conns=10', 'lease-keepalive', `--total=${total}`],
        seed: [],
        timeoutSec,
      });
    }
    {
      // 100 watchers x 400 puts/s = 40k events/s, the rate of the reference figure.
      const putRate = 400;
      const total = Math.round(putRate * o.targetSec);
      cases.push({
        name: 'watch-latency',
        title: `watch latency, 100 watchers on one key over 10 conns, ${putRate} puts/s`,
        members: 1,
        unit: 'event',
        note: 'latency is from the put response to the event at each watcher; events/s is capped by the offered 40k/s',
        toolArgs: ['--clients=100', '--conns=10', 'watch-latency', `--total=${total}`, `--put-rate=${putRate}`, ...valueArgs],
        seed: [],
        timeoutSec: Math.max(o.minTimeoutSec, Math.ceil(o.targetSec * o.timeoutFactor)),
      });
    }
    {
      // All 1000 watchers on one key: every put fans out to 1000 events.
      const putRate = 50;
      const putTotal = Math.round(putRate * o.targetSec);
      cases.push({
        name: 'watch-fanout',
        title: `watch fan-out, 1000 watchers (10 streams x 100) on one key, ${putRate} puts/s; events received`,
        members: 1,
        unit: 'event',
        toolArgs: [
          '--clients=10', '--conns=10', 'watch', '--streams=10', '--watch-per-stream=100', '--watched-key-total=1',
          `--put-rate=${putRate}`, `--put-total=${putTotal}`, `--key-size=${KEY_BYTES}`,
        ],
        seed: [],
        section: 'Watch events received summary:',
        note: "the tool's latency here is its own per-event dispatch time, not delivery latency; events/s is capped by the offered 50k/s",
        timeoutSec: Math.max(o.minTimeoutSec, Math.ceil(o.targetSec * o.timeoutFactor)),
      });
    }
  }
  cases.push(...customCases(o));
  return cases;
}

/** Cases etcd's tool lacks, driven by scripts/bench's own generator (issue 6). */
function customCases(o: BatteryOptions): BenchCase[] {
  const base = { members: 1 as const, toolArgs: [], seed: [] };
  const keys = o.largeKeys;
  return [
    {
      ...base,
      name: 'large-store',
      title: `large store: ${keys} keys (11 B, 256 B values) loaded by txns of 100 puts, 32 in flight / 8 conns; then count, paged list, compaction, restart`,
      unit: 'key',
      custom: 'large-store',
      params: { keys, listPages: o.largeListPages ?? 0 },
      note: 'keys/s is the load rate; p50/p99 are per txn of 100 puts; server CPU and CPU µs/op cover the load (per key)',
      targets: [
        { metric: 'RSS after load MiB', maxRatio: 1, what: `resident size after loading ${keys} keys` },
        { metric: 'RSS after restart MiB', maxRatio: 1, what: 'resident size after restart' },
      ],
      // Ours may load far slower than etcd on a loaded machine: a generous cap, scaled with the size.
      timeoutSec: 300 + 2 * LARGE_STORE_DEFAULTS.settleSec + Math.ceil(keys / 200) + (o.largeListPages ? 0 : Math.ceil((keys / 1e5) ** 2 * 30)),
    },
    {
      ...base,
      name: 'idle-watchers',
      title: `idle watchers: 10000 watch streams (one watch each, distinct keys) over 100 conns, held ${o.idleSec} s`,
      unit: 'watch',
      custom: 'idle-watchers',
      params: { idleSec: o.idleSec },
      note: 'watch/s, p50, p99 are watch creation (request to "created"); server CPU covers the creation; 20 puts check delivery',
      targets: [{ metric: 'bytes per watcher (RSS)', maxRatio: 1, what: 'memory per idle watcher' }],
      timeoutSec: 600,
    },
    {
      ...base,
      name: 'kube-mix',
      title: `kube-apiserver-like mix for ${o.mixSec} s on 10000 objects of 1 KiB under /registry/: 16 guarded updaters, 2 creators, 2 deleters, 2 paged listers, 3 prefix watches with prev_kv, 8 conns`,
      unit: 'op',
      custom: 'kube-mix',
      params: { durationSec: o.mixSec },
      note: 'op/s counts updates, creates, deletes and list pages; p50/p99 are of the guarded update; "list" is a whole paged list of one resource',
      timeoutSec: 300 + o.mixSec,
    },
  ];
}

/** Cases whose name matches one of the comma-separated patterns (`*` matches any run of characters). */
export function selectCases(all: readonly BenchCase[], patterns: string | undefined): BenchCase[] {
  if (!patterns) return [...all];
  const res = patterns.split(',').filter(Boolean).map((p) => new RegExp(`^${p.replace(/[.+?^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*')}$`));
  return all.filter((c) => res.some((re) => re.test(c.name)));
}

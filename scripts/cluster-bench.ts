// Write throughput of a 3-member cluster (or --size=N): ours against the real etcd, same machine, same load
// generator (N concurrent grpc-js writers of fresh keys for a fixed time), alternating systems.
//
// Build and run (outside dist/, so a running test suite keeps its server build):
//   out=/tmp/cluster-bench; mkdir -p $out; ln -sfn $PWD/node_modules $out/node_modules; ln -sfn $PWD/bin $out/bin
//   npx tsc scripts/cluster-bench.ts --outDir $out --rootDir . --module commonjs --target ES2022 \
//     --esModuleInterop --skipLibCheck --strict --types node
//   node $out/scripts/cluster-bench.js --seconds=5 --writers=1,16,64 --rounds=2
import assert from 'node:assert';
import { Cluster, ClusterMember, revisionOf } from '../test/helpers/cluster';
import { etcdBin } from '../test/helpers/etcd-process';
import { EtcdGrpc } from '../test/helpers/grpc';
import { median } from './bench/table';

interface Options {
  seconds: number;
  writers: number[];
  /** Client connections (writers share them round-robin). */
  connections: number;
  rounds: number;
  systems: Array<'ours' | 'etcd'>;
  /** Send every put to the leader, or spread writers over all members (followers forward). */
  targets: Array<'leader' | 'all'>;
  valueBytes: number;
  /** Members per cluster (1 shows what the peer path adds). */
  size: number;
}

const MAX_WRITERS = 1_000;
const PUT_DEADLINE_MS = 10_000;

function parseArgs(argv: string[]): Options {
  const o: Options = { seconds: 5, writers: [1, 16, 64], connections: 8, rounds: 2, systems: ['ours', 'etcd'], targets: ['leader', 'all'], valueBytes: 256, size: 3 };
  for (const a of argv) {
    const [k, v] = a.replace(/^--/, '').split('=') as [string, string | undefined];
    assert(v !== undefined, `flag without value: ${a}`);
    if (k === 'seconds') o.seconds = Number(v);
    else if (k === 'writers') o.writers = v.split(',').map(Number);
    else if (k === 'connections') o.connections = Number(v);
    else if (k === 'rounds') o.rounds = Number(v);
    else if (k === 'systems') o.systems = v.split(',') as Options['systems'];
    else if (k === 'targets') o.targets = v.split(',') as Options['targets'];
    else if (k === 'value-bytes') o.valueBytes = Number(v);
    else if (k === 'size') o.size = Number(v);
    else throw new Error(`unknown flag ${a}`);
  }
  assert(o.seconds > 0 && o.rounds > 0 && o.connections > 0 && o.size >= 1 && o.size <= 5);
  assert(o.writers.every((w) => w > 0 && w <= MAX_WRITERS));
  return o;
}

interface Result {
  puts: number;
  errors: number;
  qps: number;
  p50Ms: number;
  p99Ms: number;
}

async function load(members: ClusterMember[], writers: number, connections: number, seconds: number, valueBytes: number, tag: string): Promise<Result> {
  const conns: EtcdGrpc[] = [];
  for (let i = 0; i < Math.min(connections, writers); i++) conns.push(new EtcdGrpc(members[i % members.length]!.clientHostPort));
  const value = Buffer.alloc(valueBytes, 'x');
  // Latencies of a bounded sample (reservoir), enough for p99.
  const maxSamples = 100_000;
  const lat: number[] = [];
  let seen = 0;
  let puts = 0;
  let errors = 0;
  const endAt = Date.now() + seconds * 1_000;
  const run = async (w: number): Promise<void> => {
    const c = conns[w % conns.length]!;
    let seq = 0;
    while (Date.now() < endAt) {
      const key = Buffer.from(`bench/${tag}/${w}/${seq++}`);
      const t0 = process.hrtime.bigint();
      try {
        const r = await c.unary('KV', 'Put', { key, value }, PUT_DEADLINE_MS);
        assert(revisionOf(r) > 0);
        puts++;
        const ms = Number(process.hrtime.bigint() - t0) / 1e6;
        seen++;
        if (lat.length < maxSamples) lat.push(ms);
        else {
          const j = Math.floor(Math.random() * seen);
          if (j < maxSamples) lat[j] = ms;
        }
      } catch {
        errors++;
      }
    }
  };
  const t0 = Date.now();
  await Promise.all(Array.from({ length: writers }, (_, w) => run(w)));
  const elapsedSec = (Date.now() - t0) / 1_000;
  for (const c of conns) c.close();
  lat.sort((a, b) => a - b);
  const pct = (p: number): number => (lat.length === 0 ? NaN : lat[Math.min(lat.length - 1, Math.floor((p / 100) * lat.length))]!);
  return { puts, errors, qps: puts / elapsedSec, p50Ms: pct(50), p99Ms: pct(99) };
}

async function main(): Promise<void> {
  const o = parseArgs(process.argv.slice(2));
  const bins = { ours: process.env['OURS_BIN'] ?? etcdBin(), etcd: process.env['REAL_ETCD_BIN'] ?? '/usr/bin/etcd' };
  const fs = await import('node:fs');
  for (const b of Object.values(bins)) assert(fs.existsSync(b), `no server binary ${b} (set OURS_BIN / REAL_ETCD_BIN)`);
  const results = new Map<string, Result[]>();
  const loadavg = (): string => fs.readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
  console.log(`# ${o.size}-member write throughput, ${o.seconds}s per run, ${o.rounds} rounds, ${o.connections} connections, value ${o.valueBytes} B; load average ${loadavg()}`);
  for (let round = 0; round < o.rounds; round++) {
    // Alternate the order so neither system always runs second.
    const systems = round % 2 === 0 ? o.systems : [...o.systems].reverse();
    for (const sys of systems) {
      // A fresh cluster per system and round: same data size at the start of every run.
      const c = await Cluster.start({ size: o.size, bin: bins[sys], namePrefix: `${sys}-` });
      try {
        const leader = await c.waitLeader();
        for (const target of o.targets) {
          for (const w of o.writers) {
            const ms = target === 'leader' ? [leader] : c.members;
            const r = await load(ms, w, o.connections, o.seconds, o.valueBytes, `${sys}-${round}-${target}-${w}`);
            const key = `${target}\t${w}`;
            const k = `${sys}\t${key}`;
            results.set(k, [...(results.get(k) ?? []), r]);
            console.log(`round ${round} ${sys.padEnd(4)} target=${target.padEnd(6)} writers=${String(w).padStart(4)}: ${r.qps.toFixed(0)} puts/s, p50 ${r.p50Ms.toFixed(1)} ms, p99 ${r.p99Ms.toFixed(1)} ms, ${r.errors} errors (load ${loadavg()})`);
          }
        }
        const leaderNow = await c.waitLeader();
        if (leaderNow !== leader) console.log(`  note: leader changed during the ${sys} runs (${leader.name} -> ${leaderNow.name})`);
      } finally {
        await c.close();
      }
    }
  }
  console.log('\n| target | writers | ours puts/s | etcd puts/s | ratio ours/etcd | ours p50/p99 ms | etcd p50/p99 ms |');
  console.log('|---|---|---|---|---|---|---|');
  for (const target of o.targets) {
    for (const w of o.writers) {
      const get = (sys: string): Result[] => results.get(`${sys}\t${target}\t${w}`) ?? [];
      const ours = get('ours');
      const etcd = get('etcd');
      const q = (rs: Result[]): number => (rs.length ? median(rs.map((r) => r.qps)) : NaN);
      const l = (rs: Result[]): string => (rs.length ? `${median(rs.map((r) => r.p50Ms)).toFixed(1)}/${median(rs.map((r) => r.p99Ms)).toFixed(1)}` : 'n/a');
      console.log(`| ${target} | ${w} | ${q(ours).toFixed(0)} | ${q(etcd).toFixed(0)} | ${(q(ours) / q(etcd)).toFixed(2)} | ${l(ours)} | ${l(etcd)} |`);
    }
  }
}

main().then(
  () => process.exit(0),
  (e: unknown) => {
    console.error(e instanceof Error ? e.stack : String(e));
    process.exit(1);
  },
);

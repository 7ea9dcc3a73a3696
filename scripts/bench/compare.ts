// Prints README's performance table from a battery's results.json, optionally beside an earlier
// run's: per case the median QPS of each system, the median of the per-repeat ratios ours/etcd
// with their range (repeat i of each system ran back to back, so their ratio shares the machine's
// state), the earlier run's median ratio, p99 medians, and CPU per request ours/etcd.
//   node dist/scripts/bench/compare.js NEW/results.json [BEFORE/results.json]
import fs from 'node:fs';
import type { FsyncFloor } from './fsync_floor';
import { type CaseResult, type Sample, extraLabels, fmt, fsyncFloorLines, median, summarize } from './table';

interface Results {
  cases: CaseResult[];
  /** Absent in results written before the harness measured the floor. */
  fsyncFloors?: (FsyncFloor | null)[];
  /** Absent in results written before the harness ran the null server with put-1c. */
  nullPut1cP50Ms?: (number | null)[];
}

/** README's wording for the battery's case names. */
function label(name: string): string {
  const m = /^(put|range-l|range-s)-(\d+)c(-3m)?$/.exec(name);
  if (m) {
    const what = { put: 'put', 'range-l': 'range linearizable', 'range-s': 'range serializable' }[m[1]!]!;
    const clients = m[2] === '1' ? '1 client' : `${m[2]} clients`;
    return `${m[3] ? '3 members: ' : ''}${what}, ${clients}`;
  }
  const fixed: Record<string, string> = {
    'put-4k-100c': 'put, 4 KiB values, 100 clients',
    'put-4k-100c-3m': '3 members: put, 4 KiB values, 100 clients',
    'range-1000keys': 'range of 1000 keys',
    'txn-put': 'txn-put',
    'lease-keepalive': 'lease keepalive',
    'watch-latency': 'watch latency (events/s)',
    'watch-fanout': 'watch fan-out (events/s)',
  };
  return fixed[name] ?? name;
}

/** Ratios ours/etcd of the repeats both systems completed, in repeat order. */
function pairedRatios(c: CaseResult, pick: (s: Sample) => number): number[] {
  const out: number[] = [];
  for (let i = 0; i < Math.min(c.etcd.length, c.ours.length); i++) {
    const e = c.etcd[i]!;
    const o = c.ours[i]!;
    if (e.ok && o.ok && pick(e) > 0) out.push(pick(o) / pick(e));
  }
  return out;
}

const cpuPerOp = (s: Sample): number => (s.requests > 0 ? s.cpuSec / s.requests : 0);

function row(c: CaseResult, before: CaseResult | undefined): string | null {
  const e = summarize(c.etcd);
  const o = summarize(c.ours);
  // The harness's own cases (extra figures of their own) have their own table in README.
  if (e === null || o === null || extraLabels(c).length > 0) return null;
  const qr = pairedRatios(c, (s) => s.qps);
  const ratioCell = qr.length === 0 ? 'n/a' : `${median(qr).toFixed(2)}x (${Math.min(...qr).toFixed(2)}-${Math.max(...qr).toFixed(2)})`;
  const met = qr.length > 0 && median(qr) >= 1;
  const br = before ? pairedRatios(before, (s) => s.qps) : [];
  const beforeCell = br.length === 0 ? 'new' : `${median(br).toFixed(2)}x`;
  const cr = pairedRatios(c, cpuPerOp);
  const cpuCell = cr.length === 0 ? 'n/a' : `${median(cr).toFixed(2)}x`;
  return `| ${label(c.name)} | ${fmt(e.qps)} | ${fmt(o.qps)} | ${met ? `**${ratioCell}**` : ratioCell} | ${beforeCell} | ${fmt(e.p99Ms)} | ${fmt(o.p99Ms)} | ${cpuCell} |`;
}

function main(): void {
  const [newPath, beforePath] = process.argv.slice(2);
  if (!newPath) {
    console.error('usage: compare NEW/results.json [BEFORE/results.json]');
    process.exit(2);
  }
  const now = JSON.parse(fs.readFileSync(newPath, 'utf8')) as Results;
  const before = beforePath ? (JSON.parse(fs.readFileSync(beforePath, 'utf8')) as Results) : undefined;
  console.log('| case | etcd QPS | ours QPS | ours/etcd (range of runs) | before | etcd p99 ms | ours p99 ms | CPU/op ours/etcd |');
  console.log('|---|---:|---:|---:|---:|---:|---:|---:|');
  for (const c of now.cases) {
    const r = row(c, before?.cases.find((b) => b.name === c.name));
    if (r !== null) console.log(r);
  }
  const floor = fsyncFloorLines(now.cases, now.fsyncFloors ?? [], now.nullPut1cP50Ms ?? []);
  if (floor.length > 0) console.log(['', ...floor].join('\n\n'));
}

main();

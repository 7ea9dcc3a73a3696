// Medians of repeated runs and the markdown tables the benchmark prints (pure: no I/O).
import assert from 'node:assert';
import type { FsyncFloor } from './fsync_floor';

export type SystemName = 'etcd' | 'ours';

/** One run of one case against one system. */
export interface Sample {
  ok: boolean;
  /** Why the run produced no figures (timeout, server did not start, tool failed). */
  error?: string;
  qps: number;
  p50Ms: number;
  p99Ms: number;
  /** Requests the tool counted as failed (its "Error distribution"). */
  errors: number;
  /** Requests completed (the tool's result count). */
  requests: number;
  /** Peak resident size of the server (sum over members), from VmHWM. */
  peakRssMiB: number;
  /** CPU time the server (all members) spent during the load, user + system. */
  cpuSec: number;
  /** Wall time of the load itself. */
  wallSec: number;
  /** Further figures of the cases the harness drives itself, by row label (which carries the unit). */
  extra?: Record<string, number>;
}

export interface Summary {
  runs: number;
  failed: number;
  qps: number;
  p50Ms: number;
  p99Ms: number;
  peakRssMiB: number;
  cpuSec: number;
  /** Server CPU per completed request, microseconds (median of per-run values). */
  cpuUsPerOp: number;
  errors: number;
  /** The error of the last failed run, shown when no run succeeded. */
  lastError?: string;
}

export function median(values: readonly number[]): number {
  assert(values.length > 0, 'median of nothing');
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/** Medians over the successful runs; null when none succeeded (the caller shows why). */
export function summarize(samples: readonly Sample[]): Summary | null {
  const ok = samples.filter((s) => s.ok);
  const failed = samples.length - ok.length;
  const lastError = [...samples].reverse().find((s) => !s.ok)?.error;
  if (ok.length === 0) return null;
  return {
    runs: samples.length,
    failed,
    qps: median(ok.map((s) => s.qps)),
    p50Ms: median(ok.map((s) => s.p50Ms)),
    p99Ms: median(ok.map((s) => s.p99Ms)),
    peakRssMiB: median(ok.map((s) => s.peakRssMiB)),
    cpuSec: median(ok.map((s) => s.cpuSec)),
    cpuUsPerOp: median(ok.map((s) => (s.requests > 0 ? (s.cpuSec * 1e6) / s.requests : 0))),
    errors: median(ok.map((s) => s.errors)),
    lastError,
  };
}

/** ours / etcd, or null when either side is missing or etcd's figure is zero. */
export function ratio(ours: number | undefined, etcd: number | undefined): number | null {
  if (ours === undefined || etcd === undefined || !Number.isFinite(ours) || !Number.isFinite(etcd) || etcd === 0) return null;
  return ours / etcd;
}

/** Three significant digits, without exponent notation for the ranges we print. */
export function fmt(value: number): string {
  if (!Number.isFinite(value)) return String(value);
  const abs = Math.abs(value);
  if (abs >= 1000) return Math.round(value).toString();
  if (abs >= 100) return value.toFixed(0);
  if (abs >= 10) return value.toFixed(1);
  if (abs >= 1) return value.toFixed(2);
  if (abs === 0) return '0';
  return value.toPrecision(3);
}

function fmtRatio(r: number | null): string {
  return r === null ? 'n/a' : `${r.toFixed(2)}x`;
}

export interface CaseResult {
  name: string;
  title: string;
  /** What the QPS column counts (requests, events). */
  unit: string;
  etcd: Sample[];
  ours: Sample[];
  /** Shown instead of ours' figures when ours was not run (e.g. no 3-member support). */
  oursNote?: string;
  /** How to read the figures of this case. */
  note?: string;
  /** Rows whose ours/etcd ratio is a target (e.g. resident size no larger than etcd's): stated under the table. */
  targets?: RatioTarget[];
}

export interface RatioTarget {
  /** An extra row label, or 'peak RSS MiB'. */
  metric: string;
  /** The ratio ours/etcd must not exceed. */
  maxRatio: number;
  what: string;
}

/** Row labels of the extra figures, in first-seen order over all runs of both systems. */
export function extraLabels(c: CaseResult): string[] {
  const labels = new Set<string>();
  for (const s of [...c.etcd, ...c.ours]) for (const k of Object.keys(s.extra ?? {})) labels.add(k);
  return [...labels];
}

/** Median of one extra figure over the successful runs that have it; undefined when none has. */
export function extraMedian(samples: readonly Sample[], label: string): number | undefined {
  const xs = samples.filter((s) => s.ok && s.extra && label in s.extra).map((s) => (s.extra as Record<string, number>)[label]);
  const finite = xs.filter((x) => Number.isFinite(x));
  return finite.length > 0 ? median(finite) : xs.length > 0 ? NaN : undefined;
}

interface Row {
  label: string;
  pick: (s: Summary) => number;
}

const ROWS: Row[] = [
  { label: 'QPS', pick: (s) => s.qps },
  { label: 'p50 ms', pick: (s) => s.p50Ms },
  { label: 'p99 ms', pick: (s) => s.p99Ms },
  { label: 'peak RSS MiB', pick: (s) => s.peakRssMiB },
  { label: 'server CPU s', pick: (s) => s.cpuSec },
  { label: 'CPU µs/op', pick: (s) => s.cpuUsPerOp },
];

function cell(s: Summary | null, samples: readonly Sample[], note: string | undefined, pick: (s: Summary) => number): string {
  if (s) return fmt(pick(s));
  if (note) return note;
  if (samples.length === 0) return 'not run';
  return 'failed';
}

/** One markdown table for one case: a row per metric, a column per system and the ratio. */
export function renderCaseTable(c: CaseResult): string {
  const e = summarize(c.etcd);
  const o = summarize(c.ours);
  const runs = (xs: readonly Sample[], s: Summary | null): string =>
    xs.length === 0 ? '0 runs' : `${xs.length} run${xs.length === 1 ? '' : 's'}${s && s.failed > 0 ? `, ${s.failed} failed` : !s ? ', all failed' : ''}`;
  const lines = [
    `### ${c.name}: ${c.title}`,
    '',
    `| metric | etcd 3.4.23 (${runs(c.etcd, e)}) | ours (${runs(c.ours, o)}) | ours/etcd |`,
    '|---|---:|---:|---:|',
  ];
  for (const row of ROWS) {
    const label = row.label === 'QPS' ? `${c.unit}/s` : row.label;
    const r = e && o ? ratio(row.pick(o), row.pick(e)) : null;
    lines.push(`| ${label} | ${cell(e, c.etcd, undefined, row.pick)} | ${cell(o, c.ours, c.oursNote, row.pick)} | ${fmtRatio(r)} |`);
  }
  for (const label of extraLabels(c)) {
    const ev = extraMedian(c.etcd, label);
    const ov = extraMedian(c.ours, label);
    const show = (v: number | undefined, s: Summary | null, samples: readonly Sample[], note?: string): string =>
      v !== undefined ? fmt(v) : s ? '-' : cell(s, samples, note, () => 0);
    lines.push(`| ${label} | ${show(ev, e, c.etcd)} | ${show(ov, o, c.ours, c.oursNote)} | ${fmtRatio(ratio(ov, ev))} |`);
  }
  const notes: string[] = [];
  if (c.note) notes.push(c.note);
  for (const t of c.targets ?? []) {
    const pick = (xs: readonly Sample[], s: Summary | null): number | undefined =>
      t.metric === 'peak RSS MiB' ? s?.peakRssMiB : extraMedian(xs, t.metric);
    const r = ratio(pick(c.ours, o), pick(c.etcd, e));
    notes.push(
      r === null
        ? `**${t.what}: ours/etcd n/a** (target <= ${t.maxRatio.toFixed(2)}x)`
        : `**${t.what}: ours/etcd = ${r.toFixed(2)}x** (target <= ${t.maxRatio.toFixed(2)}x: ${r <= t.maxRatio ? 'met' : 'NOT met'})`,
    );
  }
  if (!e && c.etcd.length > 0) notes.push(`etcd: ${c.etcd[c.etcd.length - 1].error ?? 'failed'}`);
  if (!o && c.ours.length > 0) notes.push(`ours: ${c.ours[c.ours.length - 1].error ?? 'failed'}`);
  if (e && e.errors > 0) notes.push(`etcd: ${e.errors} failed requests (median)`);
  if (o && o.errors > 0) notes.push(`ours: ${o.errors} failed requests (median)`);
  if (e && e.failed > 0 && e.lastError) notes.push(`etcd failed run: ${e.lastError}`);
  if (o && o.failed > 0 && o.lastError) notes.push(`ours failed run: ${o.lastError}`);
  if (notes.length > 0) lines.push('', ...notes.map((n) => `- ${n}`));
  return lines.join('\n');
}

/** One line per case: the headline figures side by side (for README). */
export function renderSummaryTable(cases: readonly CaseResult[]): string {
  const lines = [
    '| case | etcd QPS | ours QPS | QPS ours/etcd | etcd p99 ms | ours p99 ms | p99 ours/etcd | RSS ours/etcd | CPU/op ours/etcd |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const c of cases) {
    const e = summarize(c.etcd);
    const o = summarize(c.ours);
    const oursCell = (pick: (s: Summary) => number): string => cell(o, c.ours, c.oursNote, pick);
    const r = (pick: (s: Summary) => number): string => fmtRatio(e && o ? ratio(pick(o), pick(e)) : null);
    lines.push(
      `| ${c.name} | ${cell(e, c.etcd, undefined, (s) => s.qps)} | ${oursCell((s) => s.qps)} | ${r((s) => s.qps)} | ` +
        `${cell(e, c.etcd, undefined, (s) => s.p99Ms)} | ${oursCell((s) => s.p99Ms)} | ${r((s) => s.p99Ms)} | ` +
        `${r((s) => s.peakRssMiB)} | ${r((s) => s.cpuUsPerOp)} |`,
    );
  }
  return lines.join('\n');
}

/** The issue's bound on one client's put: p50 within this many times the fdatasync floor's p50. */
export const PUT_1C_FLOOR_TARGET = 2;

/**
 * Lines under the tables: the fdatasync floor of each repeat, and one client's put p50 (case
 * put-1c) over the floor measured in the same repeat, per system (median and range). Sample i of
 * a case is repeat i: the battery pushes one sample per repeat and system, failed ones included.
 * `nullServerP50Ms[i]` is repeat i's put-1c p50 of scripts/bench/null_put_server (null where it
 * was not run or failed): a server doing nothing but the append and its fdatasync, the nearest
 * any server gets to the floor with the same client.
 */
export function fsyncFloorLines(
  cases: readonly CaseResult[],
  floors: readonly (FsyncFloor | null)[],
  nullServerP50Ms: readonly (number | null)[] = [],
): string[] {
  const measured = floors.filter((f): f is FsyncFloor => f !== null);
  if (measured.length === 0) return [];
  const us = (pick: (f: FsyncFloor) => number): string => floors.map((f) => (f ? fmt(pick(f)) : 'failed')).join(', ');
  const first = measured[0]!;
  const lines = [
    `fdatasync floor (${first.writes} appends of ${first.recordBytes} B, each followed by fdatasync, in a zero-filled file ` +
      `beside the data directories), per repeat: p50 ${us((f) => f.p50Us)} µs, p99 ${us((f) => f.p99Us)} µs`,
  ];
  const put = cases.find((c) => c.name === 'put-1c');
  if (!put) return lines;
  const over = (p50Ms: readonly (number | null)[]): number[] => {
    const out: number[] = [];
    p50Ms.forEach((ms, i) => {
      const f = floors[i];
      if (ms !== null && f && f.p50Us > 0) out.push((ms * 1000) / f.p50Us);
    });
    return out;
  };
  const p50s = (samples: readonly Sample[]): (number | null)[] => samples.map((s) => (s.ok ? s.p50Ms : null));
  const show = (xs: number[]): string =>
    xs.length === 0 ? 'n/a' : `${median(xs).toFixed(2)}x (${Math.min(...xs).toFixed(2)}-${Math.max(...xs).toFixed(2)})`;
  const o = over(p50s(put.ours));
  const verdict = o.length === 0 ? '' : median(o) <= PUT_1C_FLOOR_TARGET ? ': met' : ': NOT met';
  lines.push(
    `put-1c p50 over its repeat's fdatasync floor p50: etcd ${show(over(p50s(put.etcd)))}, ours **${show(o)}** ` +
      `(target for ours <= ${PUT_1C_FLOOR_TARGET}x${verdict})`,
  );
  const n = over(nullServerP50Ms);
  if (n.length > 0) {
    const oursOverNull: number[] = [];
    put.ours.forEach((s, i) => {
      const ms = nullServerP50Ms[i];
      if (s.ok && ms !== null && ms !== undefined && ms > 0) oursOverNull.push(s.p50Ms / ms);
    });
    lines.push(
      `put-1c p50 over the same floor for a server that only appends each put to a file and fdatasyncs it ` +
        `(scripts/bench/null_put_server, grpc-go; the same tool and client): ${show(n)}; ` +
        `ours' p50 over that server's in the same repeat: ${show(oursOverNull)}`,
    );
  }
  return lines;
}

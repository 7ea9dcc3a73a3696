// The contract between run.ts and the cases the harness drives with its own load generator
// (large-store, idle-watchers, kube-mix): what a case gets, and what one run of it returns.
import { spawnSync } from 'node:child_process';
import type { Cluster } from './servers';

export interface CustomContext {
  cluster: Cluster;
  /** Wall-clock budget of the whole run (ms since epoch); steps size their own timeouts within it. */
  deadlineMs: number;
  /** Progress lines (stderr). */
  log(msg: string): void;
}

/** One run of a custom case; the headline fields fill the common table rows, `extra` adds rows. */
export interface CustomSample {
  qps: number;
  p50Ms: number;
  p99Ms: number;
  /** Operations the headline rate and the CPU-per-op figure count. */
  requests: number;
  errors: number;
  /** Server CPU (user + system) during the measured phase. */
  cpuSec: number;
  /** VmHWM of the server at the end of the run. */
  peakRssMiB: number;
  wallSec: number;
  /** Further figures, by row label (the label carries the unit); shown in this order. */
  extra: Record<string, number>;
}

export type CustomRunner = (ctx: CustomContext, params: Readonly<Record<string, number>>) => Promise<CustomSample>;

/** Milliseconds left before the run's deadline, capped at `capMs` (never below 1 s: the step then fails fast). */
export function budgetMs(ctx: CustomContext, capMs: number): number {
  return Math.max(1000, Math.min(capMs, ctx.deadlineMs - Date.now()));
}

/** Disk use of a directory in MiB (du), or NaN when du fails. */
export function diskUsageMiB(dir: string): number {
  const r = spawnSync('du', ['-sk', dir], { encoding: 'utf8', timeout: 30_000 });
  const kib = Number(r.stdout?.split(/\s/)[0]);
  return r.status === 0 && Number.isFinite(kib) ? kib / 1024 : NaN;
}

/** CPU seconds this process (the load generator) used since `from` (a process.cpuUsage() value). */
export function generatorCpuSec(from: NodeJS.CpuUsage): number {
  const d = process.cpuUsage(from);
  return (d.user + d.system) / 1e6;
}

// Side-by-side benchmark: the real etcd and ours, same battery, fresh servers, alternating; medians.
// Entry point of scripts/bench/bench.sh (which builds the tool and a snapshot of ours first).
import assert from 'node:assert';
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { battery, FULL, QUICK, selectCases, type BenchCase, type CustomCaseName } from './cases';
import type { CustomRunner } from './custom_case';
import { runIdleWatchers } from './idle_watchers';
import { runKubeMix } from './kube_mix';
import { runLargeStore } from './large_store';
import { withTimeout } from './latency';
import { parseToolOutput } from './parse';
import { readProcs } from './procstat';
import { measureFsyncFloor, type FsyncFloor } from './fsync_floor';
import { startNullServer, type NullServer } from './null_server';
import { seedKeys } from './seed';
import { startCluster, type Cluster, type Launcher } from './servers';
import { fsyncFloorLines, renderCaseTable, renderSummaryTable, fmt, type CaseResult, type Sample, type SystemName } from './table';

/** The tool's progress bars are long; only the tail (where the summary is) is kept. */
const MAX_TOOL_OUTPUT_BYTES = 256 * 1024;
const READY_TIMEOUT_PER_MEMBER_MS = 30_000;
const SEED_TIMEOUT_MS = 60_000;

interface Options {
  quick: boolean;
  repeats: number;
  cases?: string;
  systems: SystemName[];
  benchmark: string;
  etcdBin: string;
  etcdctl: string;
  oursMain: string;
  oursBin?: string;
  /** Extra node flags for ours (e.g. --cpu-prof --cpu-prof-dir=...). */
  oursNodeFlags: string[];
  ours3m: 'auto' | 'no';
  outDir: string;
  workDir: string;
  list: boolean;
  /** Keys of the large-store case (default FULL.largeKeys). */
  largeKeys?: number;
  largeListPages?: number;
  /** Unmeasured runs of the same tool command on the same server before the measured one. */
  warmups: number;
  /** scripts/bench/null_put_server's binary, run with put-1c when it exists. */
  nullServer: string;
}

const CUSTOM_RUNNERS: Record<CustomCaseName, CustomRunner> = {
  'large-store': runLargeStore,
  'idle-watchers': runIdleWatchers,
  'kube-mix': runKubeMix,
};

const UNIT_NAMES: Record<BenchCase['unit'], string> = { req: 'requests', event: 'events', key: 'keys', watch: 'watches', op: 'ops' };

const USAGE = `usage: scripts/bench/bench.sh [options]
  --quick               one repeat, short runs (a first look)
  --repeats=N           repeats per case and system (default 3; medians are reported)
  --cases=a,b*          only these cases (names as in --list; * is a wildcard)
  --systems=etcd,ours   which systems to run (default both)
  --ours-bin=PATH       run ours through this executable (e.g. /work/main/bin/etcd) instead of the snapshot
  --ours-main=FILE      main.js of ours (default: the snapshot beside this script)
  --cpu-prof=DIR        write a V8 CPU profile of every ours process into DIR
  --large-keys=N        keys the large-store case loads (default 100000; e.g. 1000000)
  --large-list-pages=N  large-store's paged list reads at most N pages of 500 (default: all; etcd 3.4
                        pages through 1M keys in ~45 min, its limit is applied after a full index scan)
  --warmup=N            run each tool case N times, unmeasured, on the same fresh server before the
                        measured run (default 0). Ours compiles its hot code while it serves
                        (V8's JIT): a run of 1.5 s right after start measures mostly that warm-up.
  --no-ours-3m          do not try 3-member clusters of ours (shown as n/a)
  --etcd=PATH           the real etcd (default /usr/bin/etcd)
  --benchmark=PATH      etcd's benchmark tool (default $BENCH_WORK/benchmark)
  --null-server=PATH    the server that only appends and fdatasyncs each put, run with put-1c
                        (default $BENCH_WORK/null-put-server, built by build-benchmark.sh; skipped if absent)
  --out=DIR             where tables, raw tool output and JSON go (default $BENCH_WORK/results/<time>)
  --list                print the cases and exit`;

function parseArgs(argv: string[]): Options {
  const work = process.env.BENCH_WORK ?? path.join(os.tmpdir(), 'etcd-bench-build');
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  const o: Options = {
    quick: false,
    repeats: 3,
    systems: ['etcd', 'ours'],
    benchmark: path.join(work, 'benchmark'),
    etcdBin: '/usr/bin/etcd',
    etcdctl: '/usr/bin/etcdctl',
    oursMain: path.resolve(__dirname, '../../src/main.js'),
    oursNodeFlags: [],
    ours3m: 'auto',
    outDir: path.join(work, 'results', stamp),
    workDir: path.join(work, 'data'),
    list: false,
    warmups: 0,
    nullServer: path.join(work, 'null-put-server'),
  };
  let repeatsGiven = false;
  for (const a of argv) {
    const [flag, ...rest] = a.split('=');
    const v = rest.join('=');
    switch (flag) {
      case '--quick': o.quick = true; break;
      case '--repeats': o.repeats = Number(v); repeatsGiven = true; break;
      case '--cases': o.cases = v; break;
      case '--systems': o.systems = v.split(',') as SystemName[]; break;
      case '--ours-bin': o.oursBin = path.resolve(v); break;
      case '--ours-main': o.oursMain = path.resolve(v); break;
      case '--cpu-prof': {
        const dir = path.resolve(v);
        fs.mkdirSync(dir, { recursive: true });
        o.oursNodeFlags.push('--cpu-prof', `--cpu-prof-dir=${dir}`);
        break;
      }
      case '--no-ours-3m': o.ours3m = 'no'; break;
      case '--etcd': o.etcdBin = v; break;
      case '--benchmark': o.benchmark = v; break;
      case '--null-server': o.nullServer = path.resolve(v); break;
      case '--out': o.outDir = path.resolve(v); break;
      case '--list': o.list = true; break;
      case '--large-keys': o.largeKeys = Number(v); break;
      case '--large-list-pages': o.largeListPages = Number(v); break;
      case '--warmup': o.warmups = Number(v); break;
      case '-h': case '--help': process.stdout.write(`${USAGE}\n`); process.exit(0); break;
      default: throw new Error(`unknown option ${a}\n${USAGE}`);
    }
  }
  if (o.quick && !repeatsGiven) o.repeats = 1;
  assert(Number.isInteger(o.repeats) && o.repeats >= 1 && o.repeats <= 20, '--repeats must be 1..20');
  assert(o.largeListPages === undefined || (Number.isInteger(o.largeListPages) && o.largeListPages >= 1), '--large-list-pages must be >= 1');
  assert(o.largeKeys === undefined || (Number.isInteger(o.largeKeys) && o.largeKeys >= 1000 && o.largeKeys <= 10_000_000), '--large-keys must be 1000..10000000');
  assert(Number.isInteger(o.warmups) && o.warmups >= 0 && o.warmups <= 5, '--warmup must be 0..5');
  for (const s of o.systems) assert(s === 'etcd' || s === 'ours', `unknown system ${s}`);
  return o;
}

/**
 * The node flags bin/etcd starts ours with (its `exec node <flags> "$main"` line), so a run that
 * must launch node itself (--cpu-prof is refused in NODE_OPTIONS) measures the same process.
 */
function launcherNodeFlags(binEtcd: string): string[] {
  if (!fs.existsSync(binEtcd)) return [];
  const m = /^exec node (.*?) ?"\$main"/m.exec(fs.readFileSync(binEtcd, 'utf8'));
  return m && m[1] ? m[1].split(/\s+/).filter((f) => f.startsWith('--')) : [];
}

function launcherFor(system: SystemName, o: Options): Launcher {
  if (system === 'etcd') return { system, command: o.etcdBin, args: [], env: { ...process.env } };
  // The snapshot carries bin/etcd: ours runs as users run it, with its node flags.
  const snapBin = path.resolve(path.dirname(o.oursMain), '..', '..', 'bin', 'etcd');
  const oursBin = o.oursBin ?? (o.oursNodeFlags.length === 0 && fs.existsSync(snapBin) ? snapBin : undefined);
  if (oursBin) {
    const nodeOptions = [process.env.NODE_OPTIONS ?? '', ...o.oursNodeFlags].join(' ').trim();
    return { system, command: oursBin, args: [], env: { ...process.env, NODE_OPTIONS: nodeOptions } };
  }
  return { system, command: process.execPath, args: [...launcherNodeFlags(snapBin), ...o.oursNodeFlags, o.oursMain], env: { ...process.env } };
}

interface ToolRun {
  output: string;
  timedOut: boolean;
  exitCode: number | null;
  wallSec: number;
}

/** What is running now, so an interrupt can stop it instead of leaving servers behind. */
const live: { tool: ChildProcess | null; cluster: Cluster | null } = { tool: null, cluster: null };

function onInterrupt(signal: NodeJS.Signals): void {
  process.stderr.write(`bench: ${signal}: stopping the running case\n`);
  live.tool?.kill('SIGKILL');
  const c = live.cluster;
  void (c ? c.stop() : Promise.resolve()).finally(() => process.exit(130));
}

/** A bug in the generator must not leave servers running: stop what runs, then exit. */
function onCrash(e: unknown): void {
  process.stderr.write(`bench: crashed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
  live.tool?.kill('SIGKILL');
  const c = live.cluster;
  void (c ? c.stop(true) : Promise.resolve()).finally(() => process.exit(3));
}

function runTool(bin: string, args: string[], timeoutSec: number): Promise<ToolRun> {
  return new Promise((resolve) => {
    const started = process.hrtime.bigint();
    const child = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    live.tool = child;
    let out = '';
    const keep = (chunk: Buffer): void => {
      out += chunk.toString('utf8');
      if (out.length > MAX_TOOL_OUTPUT_BYTES) out = out.slice(out.length - MAX_TOOL_OUTPUT_BYTES);
    };
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, timeoutSec * 1000);
    child.once('close', (code) => {
      clearTimeout(timer);
      live.tool = null;
      resolve({ output: out, timedOut, exitCode: code, wallSec: Number(process.hrtime.bigint() - started) / 1e9 });
    });
  });
}

function failed(error: string, wallSec = 0): Sample {
  return { ok: false, error, qps: 0, p50Ms: 0, p99Ms: 0, errors: 0, requests: 0, peakRssMiB: 0, cpuSec: 0, wallSec };
}

/** A case the harness drives with its own generator, in this process, under the case's time limit. */
async function runCustom(c: BenchCase, cluster: Cluster, rawFile: string): Promise<Sample> {
  assert(c.custom);
  const log: string[] = [];
  const t0 = performance.now();
  const say = (msg: string): void => {
    const line = `${((performance.now() - t0) / 1000).toFixed(1)}s ${c.name} ${cluster.system}: ${msg}`;
    log.push(line);
    process.stderr.write(`  ${line}\n`);
  };
  const deadlineMs = Date.now() + c.timeoutSec * 1000;
  try {
    const s = await withTimeout(CUSTOM_RUNNERS[c.custom]({ cluster, deadlineMs, log: say }, c.params ?? {}), c.timeoutSec * 1000, c.name);
    fs.writeFileSync(rawFile, `${log.join('\n')}\n${JSON.stringify(s, null, 2)}\n`);
    return { ok: true, ...s };
  } catch (e) {
    say(`failed: ${(e as Error).message}`);
    fs.writeFileSync(rawFile, `${log.join('\n')}\n`);
    return failed((e as Error).message, (performance.now() - t0) / 1000);
  }
}

/**
 * The case's tool command against `endpoints`: its unmeasured warm-ups, then the measured run,
 * its output kept in rawFile, with the CPU time and peak RSS of the processes `pids` around it.
 */
async function measureTool(c: BenchCase, o: Options, endpoints: string[], pids: number[], rawFile: string): Promise<Sample> {
  const args = [`--endpoints=${endpoints.join(',')}`, '--precise', ...c.toolArgs];
  for (let i = 0; i < o.warmups; i++) {
    const w = await runTool(o.benchmark, args, c.timeoutSec);
    if (w.timedOut || w.exitCode !== 0) return failed(`warm-up run ${i + 1} failed (${w.timedOut ? 'timeout' : `exit ${w.exitCode}`})`, w.wallSec);
  }
  const before = readProcs(pids);
  const run = await runTool(o.benchmark, args, c.timeoutSec);
  const after = readProcs(pids);
  fs.writeFileSync(rawFile, `# ${o.benchmark} ${args.join(' ')}\n${run.output}`);
  if (run.timedOut) return failed(`timeout: no result within ${c.timeoutSec} s`, run.wallSec);
  const s = parseToolOutput(run.output, c.section);
  if (!s || run.exitCode !== 0) {
    const tail = run.output.trim().split('\n').slice(-2).join(' ').slice(0, 300);
    return failed(`tool exit ${run.exitCode}: ${tail}`, run.wallSec);
  }
  return {
    ok: true,
    qps: s.qps,
    p50Ms: s.p50Ms,
    p99Ms: s.p99Ms,
    errors: s.errors,
    requests: s.requests,
    peakRssMiB: after.peakRssMiB,
    cpuSec: Math.max(0, after.cpuSec - before.cpuSec),
    wallSec: run.wallSec,
  };
}

async function runOnce(c: BenchCase, system: SystemName, o: Options, rawFile: string): Promise<Sample> {
  const cluster = await startCluster(launcherFor(system, o), {
    members: c.members,
    workDir: o.workDir,
    etcdctl: o.etcdctl,
    readyTimeoutMs: READY_TIMEOUT_PER_MEMBER_MS * c.members,
  });
  live.cluster = cluster;
  let keepData = false;
  try {
    if (c.custom) {
      const s = await runCustom(c, cluster, rawFile);
      keepData = !s.ok;
      return s;
    }
    if (c.seed.length > 0) await seedKeys(cluster.endpoints[0], c.seed, SEED_TIMEOUT_MS);
    const s = await measureTool(c, o, cluster.endpoints, cluster.pids, rawFile);
    keepData = !s.ok;
    return s;
  } finally {
    live.cluster = null;
    await cluster.stop(keepData);
  }
}

/** put-1c's tool command, warm-ups included, against scripts/bench/null_put_server. */
async function runNullServer(c: BenchCase, o: Options, rawFile: string): Promise<Sample> {
  let server: NullServer;
  try {
    server = await startNullServer(o.nullServer, o.workDir);
  } catch (e) {
    return failed((e as Error).message);
  }
  try {
    return await measureTool(c, o, [server.endpoint], [server.pid], rawFile);
  } finally {
    await server.stop();
  }
}

function machineDescription(etcdBin: string): string {
  const cpus = os.cpus();
  let etcdVersion = '';
  try {
    etcdVersion = execFileSync(etcdBin, ['--version'], { encoding: 'utf8' }).split('\n')[0];
  } catch {
    etcdVersion = 'etcd --version failed';
  }
  return [
    `${cpus.length} x ${cpus[0]?.model ?? 'unknown CPU'}, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB RAM, Linux ${os.release()}`,
    `node ${process.version}; ${etcdVersion}; load average at start ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}`,
  ].join('\n');
}

async function main(): Promise<number> {
  const o = parseArgs(process.argv.slice(2));
  process.once('SIGINT', onInterrupt);
  process.once('SIGTERM', onInterrupt);
  process.once('uncaughtException', onCrash);
  process.once('unhandledRejection', onCrash);
  const base = o.quick ? QUICK : FULL;
  const cases = selectCases(battery({ ...base, largeKeys: o.largeKeys ?? base.largeKeys, largeListPages: o.largeListPages }), o.cases);
  if (o.list) {
    for (const c of cases) process.stdout.write(`${c.name.padEnd(22)} ${c.title}\n`);
    return 0;
  }
  assert(cases.length > 0, 'no case matches --cases');
  assert(cases.every((c) => c.custom) || fs.existsSync(o.benchmark), `benchmark tool missing: ${o.benchmark} (run scripts/bench/build-benchmark.sh)`);
  fs.mkdirSync(o.outDir, { recursive: true });
  fs.mkdirSync(o.workDir, { recursive: true });
  const command = `scripts/bench/bench.sh ${process.argv.slice(2).join(' ')}`.trim();
  const machine = machineDescription(o.etcdBin);
  process.stderr.write(`bench: ${cases.length} cases x ${o.systems.join('+')} x ${o.repeats} repeat(s); output in ${o.outDir}\n${machine}\n`);

  const results = new Map<string, CaseResult>();
  for (const c of cases) results.set(c.name, { name: c.name, title: c.title, unit: UNIT_NAMES[c.unit], note: c.note, targets: c.targets, etcd: [], ours: [] });
  let ours3mBroken: string | undefined = o.ours3m === 'no' ? 'n/a (not run)' : undefined;
  /** The disk's fdatasync floor, one measurement per repeat (null where it failed). */
  const fsyncFloors: (FsyncFloor | null)[] = [];
  /** The null server's put-1c p50 per repeat (null where it was not run or failed). */
  const nullPut1cP50Ms: (number | null)[] = [];

  /** Rewritten after every run, so an interrupted battery still leaves its tables. */
  const writeResults = (): string => {
    const all = cases.map((c) => results.get(c.name)).filter((x): x is CaseResult => x !== undefined);
    const md = [
      `## Benchmark: ours vs etcd 3.4.23 (${o.quick ? 'quick, ' : ''}median of ${o.repeats} run(s)${o.warmups > 0 ? `, after ${o.warmups} unmeasured warm-up run(s) per case` : ''})`,
      '',
      `Command: \`${command}\``,
      '',
      '```',
      machine,
      '```',
      '',
      'Load generator: etcd 3.4.23 `tools/benchmark` (key 8 B, value 256 B), and for large-store, idle-watchers and',
      'kube-mix the harness\'s own (scripts/bench, grpc-js + protobufjs); fresh data directory per run.',
      'CPU is the servers\' own user+system time during the load (all members). Shared, noisy machine.',
      '',
      renderSummaryTable(all),
      '',
      ...fsyncFloorLines(all, fsyncFloors, nullPut1cP50Ms).flatMap((line) => [line, '']),
      ...all.map((c) => `${renderCaseTable(c)}\n`),
    ].join('\n');
    fs.writeFileSync(path.join(o.outDir, 'results.md'), md);
    fs.writeFileSync(path.join(o.outDir, 'results.json'), JSON.stringify({ command, machine, quick: o.quick, repeats: o.repeats, warmups: o.warmups, fsyncFloors, nullPut1cP50Ms, cases: all }, null, 2));
    return md;
  };

  for (let r = 0; r < o.repeats; r++) {
    // The floor one client's put is held to; measured per repeat because these VMs' disks drift.
    try {
      const f = measureFsyncFloor(o.workDir);
      fsyncFloors.push(f);
      process.stderr.write(`[${r + 1}/${o.repeats}] fdatasync floor: p50 ${fmt(f.p50Us)} µs, p99 ${fmt(f.p99Us)} µs\n`);
    } catch (e) {
      fsyncFloors.push(null);
      process.stderr.write(`[${r + 1}/${o.repeats}] fdatasync floor: FAILED: ${(e as Error).message}\n`);
    }
    nullPut1cP50Ms.push(null);
    for (const [ci, c] of cases.entries()) {
      const res = results.get(c.name);
      assert(res);
      // Alternate which system goes first, so drift in the machine's load does not favour one side.
      const order: SystemName[] = (r + ci) % 2 === 0 ? ['etcd', 'ours'] : ['ours', 'etcd'];
      for (const system of order) {
        if (!o.systems.includes(system)) continue;
        if (system === 'ours' && c.members === 3 && ours3mBroken) {
          res.oursNote = ours3mBroken;
          continue;
        }
        const raw = path.join(o.outDir, `${c.name}.${system}.r${r + 1}.txt`);
        let sample: Sample;
        try {
          sample = await runOnce(c, system, o, raw);
        } catch (e) {
          sample = failed((e as Error).message);
          if (system === 'ours' && c.members === 3) {
            ours3mBroken = 'n/a (3-member cluster did not start)';
            res.oursNote = ours3mBroken;
          }
        }
        res[system].push(sample);
        const line = sample.ok
          ? `${fmt(sample.qps)} ${res.unit}/s, p50 ${fmt(sample.p50Ms)} ms, p99 ${fmt(sample.p99Ms)} ms, peak RSS ${fmt(sample.peakRssMiB)} MiB, CPU ${fmt(sample.cpuSec)} s`
          : `FAILED: ${sample.error}`;
        process.stderr.write(`[${r + 1}/${o.repeats}] ${c.name} ${system}: ${line}\n`);
        writeResults();
      }
      if (c.name === 'put-1c' && fs.existsSync(o.nullServer)) {
        const raw = path.join(o.outDir, `${c.name}.null.r${r + 1}.txt`);
        const s = await runNullServer(c, o, raw);
        nullPut1cP50Ms[r] = s.ok ? s.p50Ms : null;
        process.stderr.write(`[${r + 1}/${o.repeats}] ${c.name} null server: ${s.ok ? `${fmt(s.qps)} ${res.unit}/s, p50 ${fmt(s.p50Ms)} ms` : `FAILED: ${s.error}`}\n`);
        writeResults();
      }
    }
  }

  const md = writeResults();
  process.stdout.write(`${md}\n`);
  process.stderr.write(`bench: wrote ${path.join(o.outDir, 'results.md')}\n`);
  return 0;
}

main().then(
  (code) => process.exit(code),
  (e) => {
    process.stderr.write(`bench: ${(e as Error).stack ?? String(e)}\n`);
    process.exit(2);
  },
);

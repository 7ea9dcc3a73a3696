// Resident memory of ours vs the real etcd for the same data (issue 6: "resident size no larger
// than etcd's at 100k and 1M keys").
//
// Usage (after `npx tsc -p tsconfig.json`):
//   node dist/scripts/memory-bench.js                        # both systems, 100k keys
//   node dist/scripts/memory-bench.js --keys=1000000 --systems=ours
//   node dist/scripts/memory-bench.js --ours-bin=/tmp/etcd-bench-build/ours/bin/etcd --node-flags='--max-semi-space-size=2'
// Options: --keys=N (distinct keys, ~10 B each), --value-bytes=256, --concurrency=200 (requests in
// flight), --connections=8, --systems=etcd,ours, --ours-bin=bin/etcd, --etcd-bin=/usr/bin/etcd,
// --node-flags='...' (NODE_OPTIONS for ours), --no-restart (skip the restart measurement),
// --work-dir=/tmp/etcd-mem-bench;
// --benchmark-tool=/tmp/etcd-bench-build/benchmark loads through etcd's Go tool instead (sequential
// keys; a fraction of grpc-js's client CPU, which matters for 1M keys on 2 shared cores);
// --endpoint=127.0.0.1:2379 --pid=PID loads a server you started yourself and leaves it running
// (to inspect its heap or /proc/PID/smaps afterwards).
//
// Per system: start a fresh single member, read VmRSS when idle, put N keys through grpc-js with
// many requests in flight (sampling VmRSS every 100 ms), read VmRSS after load settles and VmHWM
// (peak), then restart on the same data and read VmRSS once it serves again (index rebuilt, no
// load). Keys are written in a scrambled order so ordered indexes see realistic splits.
import assert from 'node:assert';
import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { readProc } from './bench/procstat';
import { freePort, type Launcher } from './bench/servers';
import type { SystemName } from './bench/table';

interface Options {
  keys: number;
  valueBytes: number;
  concurrency: number;
  connections: number;
  systems: SystemName[];
  oursBin: string;
  etcdBin: string;
  etcdctl: string;
  nodeFlags: string;
  restart: boolean;
  workDir: string;
  /** Load an already running server instead (host:port and its pid), for inspecting it afterwards. */
  endpoint: string;
  pid: number;
  /** Path of etcd's `benchmark` tool to load with instead of grpc-js (far less client CPU); '' = grpc-js. */
  benchmarkTool: string;
}

const MAX_CONCURRENCY = 10_000;
const MAX_CONNECTIONS = 64;
const SAMPLE_INTERVAL_MS = 100;
const SETTLE_MS = 3000;
const READY_TIMEOUT_MS = 600_000;
const PUT_DEADLINE_MS = 30_000;

function parseArgs(argv: string[]): Options {
  const root = path.resolve(__dirname, '..', '..');
  const o: Options = {
    keys: 100_000,
    valueBytes: 256,
    concurrency: 200,
    connections: 8,
    systems: ['etcd', 'ours'],
    oursBin: path.join(root, 'bin', 'etcd'),
    etcdBin: '/usr/bin/etcd',
    etcdctl: '/usr/bin/etcdctl',
    nodeFlags: '',
    restart: true,
    workDir: '/tmp/etcd-mem-bench',
    endpoint: '',
    pid: 0,
    benchmarkTool: '',
  };
  for (const a of argv) {
    const [k, v = ''] = a.split(/=(.*)/s);
    switch (k) {
      case '--keys': o.keys = Number(v); break;
      case '--value-bytes': o.valueBytes = Number(v); break;
      case '--concurrency': o.concurrency = Number(v); break;
      case '--connections': o.connections = Number(v); break;
      case '--systems': o.systems = v.split(',') as SystemName[]; break;
      case '--ours-bin': o.oursBin = path.resolve(v); break;
      case '--etcd-bin': o.etcdBin = v; break;
      case '--node-flags': o.nodeFlags = v; break;
      case '--no-restart': o.restart = false; break;
      case '--work-dir': o.workDir = v; break;
      case '--endpoint': o.endpoint = v; break;
      case '--pid': o.pid = Number(v); break;
      case '--benchmark-tool': o.benchmarkTool = v; break;
      default: throw new Error(`unknown option ${a} (see the usage comment in scripts/memory-bench.ts)`);
    }
  }
  assert(Number.isSafeInteger(o.keys) && o.keys >= 1 && o.keys <= 100_000_000, '--keys');
  assert(Number.isSafeInteger(o.valueBytes) && o.valueBytes >= 0 && o.valueBytes <= 1 << 20, '--value-bytes');
  assert(Number.isSafeInteger(o.concurrency) && o.concurrency >= 1 && o.concurrency <= MAX_CONCURRENCY, '--concurrency');
  assert(Number.isSafeInteger(o.connections) && o.connections >= 1 && o.connections <= MAX_CONNECTIONS, '--connections');
  for (const s of o.systems) assert(s === 'etcd' || s === 'ours', `unknown system ${s}`);
  return o;
}

function launcherFor(system: SystemName, o: Options): Launcher {
  if (system === 'etcd') return { system, command: o.etcdBin, args: [], env: { ...process.env } };
  const nodeOptions = [process.env.NODE_OPTIONS ?? '', o.nodeFlags].join(' ').trim();
  return { system, command: o.oursBin, args: [], env: { ...process.env, NODE_OPTIONS: nodeOptions } };
}

function varint(n: number, out: number[]): void {
  while (n > 0x7f) {
    out.push((n & 0x7f) | 0x80);
    n >>>= 7;
  }
  out.push(n);
}

/** PutRequest{key=1, value=2}, hand-encoded so the client spends its CPU on sending, not encoding. */
function encodePut(key: Buffer, value: Buffer): Buffer {
  const head: number[] = [0x0a];
  varint(key.length, head);
  const mid: number[] = [0x12];
  varint(value.length, mid);
  return Buffer.concat([Buffer.from(head), key, Buffer.from(mid), value]);
}

/** Key i of n: 10 bytes, visited in a scrambled (but complete) order. */
function keyAt(i: number, n: number): Buffer {
  // i * stride mod n is a permutation of 0..n-1 when gcd(stride, n) = 1.
  let stride = 2_654_435_761 % n || 1;
  while (gcd(stride, n) !== 1) stride++;
  const k = Number((BigInt(i) * BigInt(stride)) % BigInt(n));
  return Buffer.from(`k${k.toString().padStart(9, '0')}`, 'latin1');
}

function gcd(a: number, b: number): number {
  while (b) [a, b] = [b, a % b];
  return a;
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

interface LoadResult {
  seconds: number;
  /** Server CPU (user + system) per put: a throughput proxy that the shared machine's noise affects less than puts/s. */
  serverCpuUsPerPut: number;
  peakSampledMiB: number;
}

async function load(endpoint: string, pid: number, o: Options): Promise<LoadResult> {
  if (o.benchmarkTool) return loadWithTool(endpoint, pid, o);
  const clients: grpc.Client[] = [];
  for (let c = 0; c < o.connections; c++) {
    // A local subchannel pool per client: otherwise every client shares one TCP connection.
    clients.push(new grpc.Client(endpoint, grpc.credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 }));
  }
  const value = Buffer.alloc(o.valueBytes, 0x61);
  let next = 0;
  let peak = 0;
  const sampler = setInterval(() => {
    const p = readProc(pid);
    if (p && p.rssMiB > peak) peak = p.rssMiB;
  }, SAMPLE_INTERVAL_MS);
  const started = process.hrtime.bigint();
  const cpuBefore = readProc(pid)?.cpuSec ?? 0;
  const worker = async (w: number): Promise<void> => {
    const client = clients[w % clients.length];
    for (;;) {
      const i = next++;
      if (i >= o.keys) return;
      const req = encodePut(keyAt(i, o.keys), value);
      await new Promise<void>((resolve, reject) => {
        client.makeUnaryRequest(
          '/etcdserverpb.KV/Put',
          (b: Buffer) => b,
          (b: Buffer) => b,
          req,
          new grpc.Metadata(),
          { deadline: Date.now() + PUT_DEADLINE_MS },
          (err) => (err ? reject(err) : resolve()),
        );
      });
    }
  };
  try {
    await Promise.all(Array.from({ length: o.concurrency }, (_, w) => worker(w)));
  } finally {
    clearInterval(sampler);
    for (const c of clients) c.close();
  }
  const cpuSec = (readProc(pid)?.cpuSec ?? cpuBefore) - cpuBefore;
  return { seconds: Number(process.hrtime.bigint() - started) / 1e9, serverCpuUsPerPut: (cpuSec * 1e6) / o.keys, peakSampledMiB: peak };
}

/** Loads through etcd's Go `benchmark` tool: sequential 10-byte keys, each written once. */
async function loadWithTool(endpoint: string, pid: number, o: Options): Promise<LoadResult> {
  let peak = 0;
  const sampler = setInterval(() => {
    const p = readProc(pid);
    if (p && p.rssMiB > peak) peak = p.rssMiB;
  }, SAMPLE_INTERVAL_MS);
  const started = process.hrtime.bigint();
  const cpuBefore = readProc(pid)?.cpuSec ?? 0;
  const args = [`--endpoints=${endpoint}`, `--clients=${o.concurrency}`, `--conns=${o.connections}`, 'put', `--total=${o.keys}`, '--key-size=10', `--val-size=${o.valueBytes}`, '--sequential-keys', `--key-space-size=${o.keys}`];
  try {
    await new Promise<void>((resolve, reject) => {
      execFile(o.benchmarkTool, args, { maxBuffer: 1 << 24 }, (err) => (err ? reject(err) : resolve()));
    });
  } finally {
    clearInterval(sampler);
  }
  const cpuSec = (readProc(pid)?.cpuSec ?? cpuBefore) - cpuBefore;
  return { seconds: Number(process.hrtime.bigint() - started) / 1e9, serverCpuUsPerPut: (cpuSec * 1e6) / o.keys, peakSampledMiB: peak };
}

interface Row {
  system: SystemName;
  idleMiB: number;
  loadSec: number;
  putsPerSec: number;
  cpuUsPerPut: number;
  peakDuringLoadMiB: number;
  afterLoadMiB: number;
  vmHwmMiB: number;
  restartSec: number | null;
  afterRestartMiB: number | null;
  dataMiB: number;
}

function dirBytes(dir: string): number {
  let total = 0;
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) total += dirBytes(p);
    else if (e.isFile()) total += fs.statSync(p).blocks * 512;
  }
  return total;
}

function mib(n: number): string {
  return n.toFixed(1);
}

interface Member {
  pid: number;
  endpoint: string;
  stop(): Promise<void>;
}

/** One `etcdctl endpoint health` (a quorum Get through the real client). */
function healthy(o: Options, endpoint: string): Promise<boolean> {
  return new Promise((resolve) => {
    execFile(o.etcdctl, [`--endpoints=${endpoint}`, '--command-timeout=2s', '--dial-timeout=1s', 'endpoint', 'health'], { env: { ...process.env, ETCDCTL_API: '3' }, timeout: 4000 }, (err) => resolve(!err));
  });
}

/** Starts a single member on dataDir (fresh or existing) and waits until it serves. */
async function startMember(l: Launcher, dataDir: string, o: Options): Promise<Member> {
  const clientPort = await freePort();
  const peerPort = await freePort();
  const client = `http://127.0.0.1:${clientPort}`;
  const peer = `http://127.0.0.1:${peerPort}`;
  const args = [...l.args, '--name=m1', `--data-dir=${dataDir}`, `--listen-client-urls=${client}`, `--advertise-client-urls=${client}`, `--listen-peer-urls=${peer}`, `--initial-advertise-peer-urls=${peer}`, `--initial-cluster=m1=${peer}`];
  const log = fs.openSync(`${dataDir}.log`, 'a');
  const child = spawn(l.command, args, { env: l.env, stdio: ['ignore', log, log] });
  fs.closeSync(log);
  let exited = false;
  const exit = new Promise<void>((r) => child.once('exit', () => { exited = true; r(); }));
  const stop = async (): Promise<void> => {
    if (exited) return;
    child.kill('SIGTERM');
    const t = setTimeout(() => child.kill('SIGKILL'), 30_000);
    await exit;
    clearTimeout(t);
  };
  const deadline = Date.now() + READY_TIMEOUT_MS;
  while (!(await healthy(o, client))) {
    if (exited) throw new Error(`${l.system} exited; log in ${dataDir}.log`);
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`${l.system} not healthy in time; log in ${dataDir}.log`);
    }
    await sleep(200);
  }
  assert(typeof child.pid === 'number');
  return { pid: child.pid, endpoint: `127.0.0.1:${clientPort}`, stop };
}

async function measure(system: SystemName, o: Options): Promise<Row> {
  const launcher = launcherFor(system, o);
  const dir = fs.mkdtempSync(path.join(o.workDir, `${system}-`));
  const dataDir = path.join(dir, 'data');
  let member = await startMember(launcher, dataDir, o);
  try {
    await sleep(SETTLE_MS);
    const idle = readProc(member.pid);
    assert(idle, `${system} exited`);
    process.stderr.write(`${system}: idle ${mib(idle.rssMiB)} MiB; loading ${o.keys} keys\n`);
    const r = await load(member.endpoint, member.pid, o);
    await sleep(SETTLE_MS);
    const after = readProc(member.pid);
    assert(after, `${system} exited`);
    const row: Row = {
      system,
      idleMiB: idle.rssMiB,
      loadSec: r.seconds,
      putsPerSec: o.keys / r.seconds,
      cpuUsPerPut: r.serverCpuUsPerPut,
      peakDuringLoadMiB: r.peakSampledMiB,
      afterLoadMiB: after.rssMiB,
      vmHwmMiB: after.peakRssMiB,
      restartSec: null,
      afterRestartMiB: null,
      dataMiB: 0,
    };
    process.stderr.write(`${system}: loaded in ${r.seconds.toFixed(1)} s; after ${mib(after.rssMiB)} MiB, peak ${mib(after.peakRssMiB)} MiB\n`);
    if (o.restart) {
      await member.stop();
      row.dataMiB = dirBytes(dataDir) / (1 << 20);
      const t0 = Date.now();
      member = await startMember(launcher, dataDir, o);
      row.restartSec = (Date.now() - t0) / 1000;
      await sleep(SETTLE_MS);
      const rs = readProc(member.pid);
      assert(rs, `${system} exited after restart`);
      row.afterRestartMiB = rs.rssMiB;
      process.stderr.write(`${system}: restarted in ${row.restartSec.toFixed(1)} s; RSS ${mib(rs.rssMiB)} MiB\n`);
    }
    return row;
  } finally {
    await member.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const o = parseArgs(process.argv.slice(2));
  if (o.endpoint) {
    assert(o.pid > 0, '--endpoint needs --pid');
    const r = await load(o.endpoint, o.pid, o);
    const p = readProc(o.pid);
    process.stdout.write(`loaded ${o.keys} keys in ${r.seconds.toFixed(1)} s (server CPU ${r.serverCpuUsPerPut.toFixed(0)} µs/put); RSS ${mib(p?.rssMiB ?? 0)} MiB, VmHWM ${mib(p?.peakRssMiB ?? 0)} MiB\n`);
    return;
  }
  fs.mkdirSync(o.workDir, { recursive: true });
  const rows: Row[] = [];
  for (const s of o.systems) rows.push(await measure(s, o));
  const out: string[] = [];
  out.push(`loader=${o.benchmarkTool ? 'benchmark' : 'grpc-js'} keys=${o.keys} value=${o.valueBytes} B concurrency=${o.concurrency} connections=${o.connections} node-flags='${o.nodeFlags}'`);
  out.push('| system | idle RSS MiB | peak during load (sampled) | VmHWM | RSS after load | puts/s | server CPU µs/put | data on disk MiB | restart s | RSS after restart |');
  out.push('|---|---|---|---|---|---|---|---|---|---|');
  for (const r of rows) {
    out.push(
      `| ${r.system} | ${mib(r.idleMiB)} | ${mib(r.peakDuringLoadMiB)} | ${mib(r.vmHwmMiB)} | ${mib(r.afterLoadMiB)} | ${r.putsPerSec.toFixed(0)} | ${r.cpuUsPerPut.toFixed(0)} | ${mib(r.dataMiB)} | ${r.restartSec?.toFixed(1) ?? '-'} | ${r.afterRestartMiB === null ? '-' : mib(r.afterRestartMiB)} |`,
    );
  }
  process.stdout.write(`${out.join('\n')}\n`);
}

main().catch((e: unknown) => {
  process.stderr.write(`${e instanceof Error ? e.stack : String(e)}\n`);
  process.exit(1);
});

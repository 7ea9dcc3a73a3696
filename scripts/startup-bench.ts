// Start-up time of ours vs the real etcd: a single member spawned on an empty data directory until
// it logs "ready to serve client requests", stopped, then spawned again on the same directory (a
// restart) until the same line. Runs alternate between the systems; medians per system.
//
// Usage (after `npx tsc -p tsconfig.json`):
//   node dist/scripts/startup-bench.js                     # 8 rounds, both systems
//   node dist/scripts/startup-bench.js --rounds=4 --systems=ours --ours-bin=/path/to/bin/etcd
// Options: --rounds=N (1..100), --systems=etcd,ours, --ours-bin=bin/etcd, --etcd-bin=/usr/bin/etcd,
// --work-dir=$TMPDIR/etcd-startup-bench (made and removed), --timeout-ms=30000 per start.
import assert from 'node:assert';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort } from './bench/servers';
import { median, type SystemName } from './bench/table';

interface Options {
  rounds: number;
  systems: SystemName[];
  oursBin: string;
  etcdBin: string;
  workDir: string;
  timeoutMs: number;
}

const MAX_ROUNDS = 100;
/** What both log once they serve clients (etcd 3.4's capnslog and our JSON lines alike). */
const READY_LINE = 'ready to serve client requests';
/** Bound on the log text kept per start (for the error when a start fails). */
const MAX_LOG_BYTES = 64 * 1024;

function parseArgs(argv: string[]): Options {
  const o: Options = {
    rounds: 8,
    systems: ['etcd', 'ours'],
    oursBin: path.resolve(__dirname, '../../bin/etcd'),
    etcdBin: '/usr/bin/etcd',
    workDir: path.join(os.tmpdir(), 'etcd-startup-bench'),
    timeoutMs: 30_000,
  };
  for (const a of argv) {
    const [k, v = ''] = a.split(/=(.*)/s, 2);
    if (k === '--rounds') o.rounds = Number(v);
    else if (k === '--systems') o.systems = v.split(',').filter(Boolean) as SystemName[];
    else if (k === '--ours-bin') o.oursBin = path.resolve(v);
    else if (k === '--etcd-bin') o.etcdBin = v;
    else if (k === '--work-dir') o.workDir = path.resolve(v);
    else if (k === '--timeout-ms') o.timeoutMs = Number(v);
    else throw new Error(`unknown option ${a}`);
  }
  assert(Number.isInteger(o.rounds) && o.rounds >= 1 && o.rounds <= MAX_ROUNDS, `--rounds must be 1..${MAX_ROUNDS}`);
  assert(o.systems.length > 0 && o.systems.every((s) => s === 'etcd' || s === 'ours'), '--systems takes etcd and/or ours');
  assert(Number.isInteger(o.timeoutMs) && o.timeoutMs > 0, '--timeout-ms must be a positive integer');
  return o;
}

/** Milliseconds from spawn to the ready line; the member is stopped (SIGTERM) before this resolves. */
async function timeStart(bin: string, dataDir: string, timeoutMs: number): Promise<number> {
  const client = await freePort();
  const peer = await freePort();
  const url = (port: number): string => `http://127.0.0.1:${port}`;
  const args = ['--data-dir', dataDir, '--listen-client-urls', url(client), '--advertise-client-urls', url(client)];
  args.push('--listen-peer-urls', url(peer), '--initial-advertise-peer-urls', url(peer), '--initial-cluster', `default=${url(peer)}`);
  const startedMs = performance.now();
  const child = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  try {
    return await new Promise<number>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${bin}: not ready within ${timeoutMs} ms:\n${log.slice(-2000)}`)), timeoutMs);
      const onData = (chunk: Buffer): void => {
        if (log.length < MAX_LOG_BYTES) log += chunk.toString('utf8');
        if (log.includes(READY_LINE)) {
          clearTimeout(timer);
          resolve(performance.now() - startedMs);
        }
      };
      child.stdout.on('data', onData);
      child.stderr.on('data', onData);
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`${bin} exited (${code}) before it was ready:\n${log.slice(-2000)}`));
      });
    });
  } finally {
    child.kill('SIGTERM');
    await exited;
  }
}

async function main(): Promise<void> {
  const o = parseArgs(process.argv.slice(2));
  const bins: Record<SystemName, string> = { etcd: o.etcdBin, ours: o.oursBin };
  const times: Record<SystemName, { fresh: number[]; restart: number[] }> = { etcd: { fresh: [], restart: [] }, ours: { fresh: [], restart: [] } };
  fs.mkdirSync(o.workDir, { recursive: true });
  try {
    for (let round = 0; round < o.rounds; round++) {
      // Alternate which system goes first, so neither always starts on a cooler machine.
      const order = round % 2 === 0 ? o.systems : [...o.systems].reverse();
      for (const system of order) {
        const dir = fs.mkdtempSync(path.join(o.workDir, `${system}-`));
        try {
          const fresh = await timeStart(bins[system], dir, o.timeoutMs);
          const restart = await timeStart(bins[system], dir, o.timeoutMs);
          times[system].fresh.push(fresh);
          times[system].restart.push(restart);
          process.stderr.write(`[${round + 1}/${o.rounds}] ${system}: fresh ${fresh.toFixed(0)} ms, restart ${restart.toFixed(0)} ms\n`);
        } finally {
          fs.rmSync(dir, { recursive: true, force: true });
        }
      }
    }
  } finally {
    fs.rmSync(o.workDir, { recursive: true, force: true });
  }
  console.log('| system | fresh start, median ms (range) | restart, median ms (range) |');
  console.log('|---|---:|---:|');
  for (const s of o.systems) {
    const t = times[s];
    const range = (xs: number[]): string => `${Math.min(...xs).toFixed(0)}-${Math.max(...xs).toFixed(0)}`;
    console.log(`| ${s} | ${median(t.fresh).toFixed(0)} (${range(t.fresh)}) | ${median(t.restart).toFixed(0)} (${range(t.restart)}) |`);
  }
  if (o.systems.length === 2) {
    const ratio = (k: 'fresh' | 'restart'): string => (median(times.ours[k]) / median(times.etcd[k])).toFixed(2);
    console.log(`\nours/etcd: fresh ${ratio('fresh')}x, restart ${ratio('restart')}x`);
  }
}

main().catch((e: unknown) => {
  process.stderr.write(`${e instanceof Error ? e.message : String(e)}\n`);
  process.exit(1);
});

// Fault-injection soak of a real 3-member cluster of our server (bin/etcd), run by hand to find bugs
// before users do (not part of `npm test`). For --minutes, concurrent clients put unique keys,
// compare-and-swap a few shared counters, delete some of their keys, read linearizably and use
// leases, against random members, while a seeded schedule kill -9s members (the leader among
// them, sometimes two at once, sometimes again while one restarts) and SIGSTOPs them. Then the
// faults stop, the cluster must heal, and the run checks what the clients were told against what
// the cluster kept:
//   1. kv:         every acknowledged put not later deleted is there with its value, written once;
//                  every acknowledged delete's key is gone; nothing is there that nobody wrote
//                  (plus online read-your-writes checks while the faults run);
//   2. counters:   acked increments <= final value <= acked + unknown increments (and online reads);
//   3. revisions:  header revisions of linearizable ops never go back, per client and in real time;
//   4. replicas:   the same HashKV at one revision on all members, the same Status raft index;
//   5. watch:      a watch from revision 1 on every member replays revisions 2..R without a gap,
//                  in order, and rebuilds exactly what Range reports at R;
//   6. processes:  no member died on its own; no panic/assert/invariant/fatal lines in their logs.
// Exit status 0 only if every check passes. On failure the data dirs, full member logs, the fault
// log and the report are kept in the printed directory.
//
// Build and run (outside dist/, so a running test suite keeps its server build):
//   out=/tmp/soak-cluster; mkdir -p $out; ln -sfn $PWD/node_modules $out/node_modules; ln -sfn $PWD/bin $out/bin
//   npx tsc scripts/soak-cluster.ts --outDir $out --rootDir . --module commonjs --target ES2022 \
//     --esModuleInterop --skipLibCheck --strict --types node
//   node $out/scripts/soak-cluster.js --minutes=10 --seed=42
// bin/etcd runs this checkout's dist/ (`npx tsc -p tsconfig.json` first). Options: --minutes=10,
// --seed=<uint32> (default: from the clock, printed), --clients=8, --deadline-ms=5000 (every
// request), --think-ms=2 (max pause between a client's ops), --counters=4, --defrag-ms=5000 (a
// Defragment of a random running member every 1 s to that, while the clients write; 0: none; writes
// wait for each copy, so it exercises the applies deferred behind it), --keep (keep the output
// directory even when every check passes), --member-args='--snapshot-count=1000
// --snapshot-catchup-entries=200' (extra flags for every member; these make restarted members
// catch up by snapshot), --member-env=ETCDTS_RAFT_LOG_RESIDENT_BYTES=0 (an environment variable for
// every member, repeatable; this one makes every catch-up read entries back from the WAL). OURS_BIN=/path/to/bin/etcd runs another build. OURS_BIN=/usr/bin/etcd runs
// the real etcd, which checks the script's own expectations: etcd 3.4.23 passes every check but one
// line of check 5, its known bug of answering a progress request for a watcher still catching up
// (etcd issue 15220, fixed by etcd PR 15237 in later 3.4 and 3.5 releases).
//
// Replaying: every random choice comes from one mulberry32 PRNG seeded with --seed. The fault
// schedule and each client draw from their own streams forked from it at start, so the same seed
// gives the same sequence of fault kinds, targets (by role: "the leader" is resolved at run time),
// durations and gaps, and the same op sequence per client, whatever the timing; only the
// interleaving differs between runs.
import assert from 'node:assert';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Cluster, ClusterMember, revisionOf } from '../test/helpers/cluster';
import { etcdBin } from '../test/helpers/etcd-process';
import { EtcdGrpc, isRpcError, Msg } from '../test/helpers/grpc';
import { mulberry32 } from '../test/helpers/random';
import { sleepMs, waitFor, withTimeout } from '../test/helpers/wait';

// ---------------------------------------------------------------------------------------- options

interface Options {
  minutes: number;
  seed: number;
  clients: number;
  deadlineMs: number;
  thinkMs: number;
  counters: number;
  /** Longest pause between two Defragment calls on a random running member (0: none). */
  defragMs: number;
  keep: boolean;
  /** Extra flags for every member, e.g. a small --snapshot-count so restarted members catch up by snapshot. */
  memberArgs: string[];
  /** Environment variables for every member (NAME=VALUE), e.g. ETCDTS_RAFT_LOG_RESIDENT_BYTES=0. */
  memberEnv: Record<string, string>;
}

const MAX_CLIENTS = 64;
const MAX_COUNTERS = 64;

function parseArgs(argv: string[]): Options {
  const o: Options = {
    minutes: 10,
    seed: Date.now() % 0x1_0000_0000,
    clients: 8,
    deadlineMs: 5_000,
    thinkMs: 2,
    counters: 4,
    defragMs: 5_000,
    keep: false,
    memberArgs: [],
    memberEnv: {},
  };
  for (const a of argv) {
    if (a === '--keep') {
      o.keep = true;
      continue;
    }
    if (a.startsWith('--member-args=')) {
      o.memberArgs = a.slice('--member-args='.length).split(/\s+/).filter((x) => x !== '');
      continue;
    }
    if (a.startsWith('--member-env=')) {
      const m = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(a.slice('--member-env='.length));
      assert(m, `--member-env wants NAME=VALUE: ${a}`);
      o.memberEnv[m[1]!] = m[2]!;
      continue;
    }
    const [k, v] = a.replace(/^--/, '').split('=') as [string, string | undefined];
    assert(v !== undefined, `flag without value: ${a}`);
    const n = Number(v);
    if (k === 'minutes') o.minutes = n;
    else if (k === 'seed') o.seed = n;
    else if (k === 'clients') o.clients = n;
    else if (k === 'deadline-ms') o.deadlineMs = n;
    else if (k === 'think-ms') o.thinkMs = n;
    else if (k === 'counters') o.counters = n;
    else if (k === 'defrag-ms') o.defragMs = n;
    else throw new Error(`unknown flag ${a}`);
  }
  assert(o.minutes > 0 && o.minutes <= 24 * 60, '--minutes out of range');
  assert(Number.isInteger(o.seed) && o.seed >= 0 && o.seed < 0x1_0000_0000, '--seed must be a uint32');
  assert(Number.isInteger(o.clients) && o.clients > 0 && o.clients <= MAX_CLIENTS, `--clients must be 1..${MAX_CLIENTS}`);
  assert(o.deadlineMs >= 100 && o.deadlineMs <= 60_000, '--deadline-ms out of range');
  assert(o.thinkMs >= 0 && o.thinkMs <= 10_000, '--think-ms out of range');
  assert(Number.isInteger(o.counters) && o.counters > 0 && o.counters <= MAX_COUNTERS, `--counters must be 1..${MAX_COUNTERS}`);
  assert(o.defragMs === 0 || (o.defragMs >= 1_000 && o.defragMs <= 600_000), '--defrag-ms must be 0 or 1000..600000');
  return o;
}

// ------------------------------------------------------------------------------- small utilities

class Rng {
  private readonly next: () => number;
  constructor(seed: number) {
    this.next = mulberry32(seed);
  }
  float(): number {
    return this.next();
  }
  /** Integer in [lo, hi). */
  int(lo: number, hi: number): number {
    assert(hi > lo);
    return lo + Math.floor(this.next() * (hi - lo));
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
  pick<T>(xs: readonly T[]): T {
    assert(xs.length > 0);
    return xs[this.int(0, xs.length)]!;
  }
  /** An independent stream, so one consumer's draws do not shift another's. */
  fork(): Rng {
    return new Rng(Math.floor(this.next() * 0x1_0000_0000));
  }
}

const T0 = performance.now();
/** Milliseconds since the script started (monotonic; op start/end times use it). */
function now(): number {
  return performance.now() - T0;
}
function stamp(): string {
  return `[${(now() / 1_000).toFixed(1).padStart(6)}s ${new Date().toISOString()}]`;
}

type Outcome = 'acked' | 'failed' | 'unknown';

/**
 * What an error says about whether the request was applied. Only errors that etcd returns for a
 * request it rejected as a whole (validation, a missing lease, permissions) or that grpc-js returns
 * for a call it never sent (no connection) are "failed"; anything else (deadline, unavailable,
 * leader changed, request timed out, too many requests, a dropped connection) may have applied.
 */
const NOT_SENT = '14 No connection established';

function classify(e: unknown): { outcome: 'failed' | 'unknown'; kind: string } {
  if (!isRpcError(e)) throw e; // not an RPC outcome: a bug in this script
  // Numbers (ports, durations) and grpc-js's timing notes would make every error its own kind.
  const details = e.code === 4 ? 'Deadline exceeded' : e.details.replace(/\d{2,}/g, 'N').replace(/\. Resolution note:.*$/, '');
  const kind = `${e.code} ${details.slice(0, 100)}`;
  // grpc-js's answer for a call it could not start on any connection (the member is down).
  if (kind.startsWith(NOT_SENT)) return { outcome: 'failed', kind };
  // INVALID_ARGUMENT, NOT_FOUND, PERMISSION_DENIED, FAILED_PRECONDITION, OUT_OF_RANGE, UNAUTHENTICATED
  if ([3, 5, 7, 9, 11, 16].includes(e.code)) return { outcome: 'failed', kind };
  return { outcome: 'unknown', kind };
}

interface KvMsg {
  key: Buffer;
  value: Buffer;
  create_revision: string;
  mod_revision: string;
  version: string;
  lease: string;
}

function kvsOf(res: Msg): KvMsg[] {
  return (res['kvs'] as KvMsg[] | undefined) ?? [];
}

/** A key's stored state, as Range reports it or a watch replay rebuilds it. */
interface StoredKv {
  value: string;
  create: number;
  mod: number;
  version: number;
  lease: string;
}

function storedOf(kv: KvMsg): StoredKv {
  return {
    value: kv.value.toString('latin1'),
    create: Number(kv.create_revision),
    mod: Number(kv.mod_revision),
    version: Number(kv.version),
    lease: String(kv.lease),
  };
}

function fmtKv(kv: StoredKv | undefined): string {
  return kv === undefined ? 'absent' : `value=${kv.value} create=${kv.create} mod=${kv.mod} version=${kv.version} lease=${kv.lease}`;
}

// -------------------------------------------------------------------------------------- findings

const CHECKS = ['kv', 'counters', 'revisions', 'replicas', 'watch', 'processes', 'leases', 'health'] as const;
type Check = (typeof CHECKS)[number];
const CHECK_TITLES: Record<Check, string> = {
  kv: '1 acknowledged puts/deletes survive, nothing unwritten appears',
  counters: '2 counters within [acked, acked + unknown] increments',
  revisions: '3 linearizable header revisions never go back (per client, real time)',
  replicas: '4 same HashKV at one revision and same raft index on all members',
  watch: '5 watch from revision 1 replays every revision in order and matches Range',
  processes: '6 no member died on its own; no panic/assert/invariant/fatal log lines',
  leases: '+ acked lease revokes remove keys and leases; granted leases do not vanish',
  health: '+ cluster healthy after the faults (all up, one leader)',
};
const MAX_SAMPLES_PER_CHECK = 25;

class Findings {
  private readonly byCheck = new Map<Check, { count: number; samples: string[] }>();
  add(check: Check, msg: string): void {
    let f = this.byCheck.get(check);
    if (f === undefined) {
      f = { count: 0, samples: [] };
      this.byCheck.set(check, f);
    }
    f.count++;
    if (f.samples.length < MAX_SAMPLES_PER_CHECK) f.samples.push(msg);
    // The first few also go to stdout at once: the time of a violation helps to find it in the logs.
    if (f.count <= 3) console.log(`${stamp()} VIOLATION ${check}: ${msg}`);
  }
  count(check?: Check): number {
    if (check !== undefined) return this.byCheck.get(check)?.count ?? 0;
    let n = 0;
    for (const f of this.byCheck.values()) n += f.count;
    return n;
  }
  report(): string[] {
    const out: string[] = [];
    for (const c of CHECKS) {
      const f = this.byCheck.get(c);
      out.push(`${f === undefined ? 'PASS' : 'FAIL'}  ${CHECK_TITLES[c]}${f === undefined ? '' : ` (${f.count} violations)`}`);
      if (f !== undefined) for (const s of f.samples) out.push(`        - ${s}`);
      if (f !== undefined && f.count > f.samples.length) out.push(`        ... ${f.count - f.samples.length} more`);
    }
    return out;
  }
}

// ----------------------------------------------------------------------------------------- stats

const OP_KINDS = ['put', 'delete', 'range', 'serializable', 'cas', 'counter-read', 'lease-grant', 'lease-put', 'lease-revoke'] as const;
type OpKind = (typeof OP_KINDS)[number];
const MAX_ERROR_KINDS = 60;

class Stats {
  readonly byKind = new Map<OpKind, Record<Outcome, number>>(OP_KINDS.map((k) => [k, { acked: 0, failed: 0, unknown: 0 }]));
  /** "kind code details" -> count (bounded number of distinct kinds). */
  readonly errors = new Map<string, number>();
  /** Failed ops that never left the client (no connection to a member that is down): most failures. */
  readonly notSent = new Map<OpKind, number>(OP_KINDS.map((k) => [k, 0]));
  note(kind: OpKind, outcome: Outcome, error?: string): void {
    this.byKind.get(kind)![outcome]++;
    if (error?.startsWith(NOT_SENT)) this.notSent.set(kind, this.notSent.get(kind)! + 1);
    if (error !== undefined) {
      const k = `${kind}: ${error}`;
      if (this.errors.has(k) || this.errors.size < MAX_ERROR_KINDS) this.errors.set(k, (this.errors.get(k) ?? 0) + 1);
    }
  }
  total(): Record<Outcome, number> {
    const t = { acked: 0, failed: 0, unknown: 0 };
    for (const r of this.byKind.values()) {
      t.acked += r.acked;
      t.failed += r.failed;
      t.unknown += r.unknown;
    }
    return t;
  }
  line(): string {
    const t = this.total();
    let notSent = 0;
    for (const n of this.notSent.values()) notSent += n;
    return `ops acked=${t.acked} unknown=${t.unknown} failed=${t.failed} (${notSent} of them not sent)`;
  }
  table(): string[] {
    const out = ['kind            acked  unknown   failed  (not sent)'];
    for (const [k, r] of this.byKind) {
      out.push(`${k.padEnd(14)} ${String(r.acked).padStart(7)} ${String(r.unknown).padStart(8)} ${String(r.failed).padStart(8)}  ${String(this.notSent.get(k)).padStart(10)}`);
    }
    return out;
  }
}

// ----------------------------------------------------------------------- linearizable op history

/**
 * Header revisions of acknowledged linearizable ops (writes, linearizable ranges, compare-and-swap
 * txns), for check 3. Parallel number arrays: hundreds of thousands of entries stay compact.
 */
class History {
  readonly start: number[] = [];
  readonly end: number[] = [];
  readonly rev: number[] = [];
  /** client * 32 + kind index * 2 + (write ? 1 : 0). */
  readonly meta: number[] = [];
  add(client: number, kind: OpKind, startMs: number, endMs: number, rev: number, write: boolean): void {
    this.start.push(startMs);
    this.end.push(endMs);
    this.rev.push(rev);
    this.meta.push(client * 32 + OP_KINDS.indexOf(kind) * 2 + (write ? 1 : 0));
  }
  describe(i: number): string {
    const m = this.meta[i]!;
    const kind = OP_KINDS[(m % 32) >> 1]!;
    return `c${Math.floor(m / 32)} ${kind} [${this.start[i]!.toFixed(1)}..${this.end[i]!.toFixed(1)} ms] rev ${this.rev[i]}`;
  }
  isWrite(i: number): boolean {
    return this.meta[i]! % 2 === 1;
  }
  /**
   * Real-time order: an op that started after another ended must see at least its revision (a
   * write: a newer one). Sweep the ops by start time over the ops sorted by end time.
   */
  check(findings: Findings): void {
    const n = this.rev.length;
    const byEnd = Array.from({ length: n }, (_, i) => i).sort((a, b) => this.end[a]! - this.end[b]!);
    const byStart = Array.from({ length: n }, (_, i) => i).sort((a, b) => this.start[a]! - this.start[b]!);
    let j = 0;
    let maxRev = 0;
    let maxAt = -1;
    for (const i of byStart) {
      while (j < n && this.end[byEnd[j]!]! < this.start[i]!) {
        const k = byEnd[j]!;
        if (this.rev[k]! > maxRev) {
          maxRev = this.rev[k]!;
          maxAt = k;
        }
        j++;
      }
      const r = this.rev[i]!;
      if (r < maxRev || (this.isWrite(i) && r <= maxRev)) {
        findings.add('revisions', `real-time order: ${this.describe(i)} started after ${this.describe(maxAt)} ended`);
      }
    }
  }
}

// -------------------------------------------------------------------------------- client channels

/**
 * One channel per (client, member), replaced when the member restarts: a grpc-js channel that saw
 * the port refused sits in its reconnect backoff (up to minutes) and fails calls at once after the
 * member is back. The old channel is closed only after a deadline has passed, so calls in flight on
 * it end by their own outcome, not by a cancel of ours.
 */
class Channels {
  private readonly gen = new Map<string, number>();
  private readonly conns = new Map<string, { gen: number; c: EtcdGrpc }>();
  private readonly retired = new Set<EtcdGrpc>();
  constructor(private readonly deadlineMs: number) {}
  restarted(member: ClusterMember): void {
    this.gen.set(member.name, (this.gen.get(member.name) ?? 0) + 1);
  }
  get(client: number, m: ClusterMember): EtcdGrpc {
    const key = `${client}/${m.name}`;
    const g = this.gen.get(m.name) ?? 0;
    const cur = this.conns.get(key);
    if (cur !== undefined && cur.gen === g) return cur.c;
    if (cur !== undefined) {
      const old = cur.c;
      this.retired.add(old);
      setTimeout(() => {
        old.close();
        this.retired.delete(old);
      }, this.deadlineMs + 1_000).unref();
    }
    const c = new EtcdGrpc(m.clientHostPort);
    this.conns.set(key, { gen: g, c });
    return c;
  }
  closeAll(): void {
    for (const { c } of this.conns.values()) c.close();
    for (const c of this.retired) c.close();
    this.conns.clear();
    this.retired.clear();
  }
}

// ------------------------------------------------------------------------------------ the model

const PREFIX = '/soak/';
const counterKey = (i: number): string => `${PREFIX}counter/${i}`;
const putKey = (c: number, n: number): string => `${PREFIX}c${c}/${n}`;
const leaseKey = (c: number, n: number): string => `${PREFIX}lease/c${c}/${n}`;

interface PutRec {
  value: string;
  outcome: Outcome;
  /** The delete of this key, if one was sent (only acknowledged puts are deleted, at most once). */
  del: Outcome | null;
}

interface LeaseRec {
  key: string;
  value: string;
  id: string;
  ttlSec: number;
  put: Outcome;
  revoke: Outcome | null;
}

class Counter {
  /** Increment txns acknowledged with succeeded=true. */
  acked = 0;
  /** Increment txns that ended in an error that may have applied. */
  unknown = 0;
  /** Increment txns sent (an upper bound of what may have applied so far). */
  sent = 0;
  /** Txns whose compare failed (someone else incremented first). */
  lostRaces = 0;
}

const MAX_CAS_ATTEMPTS = 5;
const MAX_DELETABLE = 100_000;

interface Shared {
  cluster: Cluster;
  channels: Channels;
  counters: Counter[];
  history: History;
  stats: Stats;
  findings: Findings;
  opts: Options;
  stopping: { now: boolean };
}

/** One client: ops one at a time, each against a random member, all choices from its own PRNG. */
class SoakClient {
  readonly puts: PutRec[] = [];
  readonly leases: LeaseRec[] = [];
  /** Indexes of acknowledged puts not yet sent a delete (bounded: deletes are rarer than puts). */
  private readonly deletable: number[] = [];
  private lastRev = 0;
  private lastRevOp = '';
  private avoid: ClusterMember | null = null;

  constructor(
    readonly id: number,
    private readonly rng: Rng,
    private readonly s: Shared,
  ) {}

  async run(): Promise<void> {
    while (!this.s.stopping.now) {
      const r = this.rng.float();
      if (r < 0.35) await this.put();
      else if (r < 0.6) await this.increment();
      else if (r < 0.7) await this.del();
      else if (r < 0.85) await this.readOwn(false);
      else if (r < 0.9) await this.readOwn(true);
      else if (r < 0.96) await this.readCounter();
      else await this.lease();
      if (this.s.opts.thinkMs > 0) await sleepMs(this.rng.int(0, this.s.opts.thinkMs + 1));
    }
  }

  /** A random member; after a failure, one of the others (as a client with several endpoints does). */
  private member(): ClusterMember {
    const ms = this.s.cluster.members.filter((m) => m !== this.avoid);
    return this.rng.pick(ms);
  }

  private async call(m: ClusterMember, service: 'KV' | 'Lease', method: string, req: Msg): Promise<{ res: Msg } | { outcome: 'failed' | 'unknown'; kind: string; code: number }> {
    try {
      const res = await this.s.channels.get(this.id, m).unary(service, method, req, this.s.opts.deadlineMs);
      this.avoid = null;
      return { res };
    } catch (e) {
      this.avoid = m;
      const c = classify(e);
      return { ...c, code: isRpcError(e) ? e.code : -1 };
    }
  }

  /** Per-client check of check 3 plus the record for the real-time check. */
  private linearizable(kind: OpKind, startMs: number, res: Msg, write: boolean, m: ClusterMember): void {
    const rev = revisionOf(res);
    const endMs = now();
    this.s.history.add(this.id, kind, startMs, endMs, rev, write);
    const desc = `${kind} on ${m.name} at ${startMs.toFixed(0)} ms -> rev ${rev}`;
    if (rev < this.lastRev || (write && rev <= this.lastRev)) {
      this.s.findings.add('revisions', `client c${this.id}: ${desc} after ${this.lastRevOp}`);
    }
    if (rev >= this.lastRev) {
      this.lastRev = rev;
      this.lastRevOp = desc;
    }
  }

  private async put(): Promise<void> {
    const n = this.puts.length;
    const key = putKey(this.id, n);
    // Unique per key; a random length so values are not all one size.
    const value = `c${this.id}:n${n}:${'v'.repeat(this.rng.int(0, 120))}`;
    const rec: PutRec = { value, outcome: 'unknown', del: null };
    this.puts.push(rec);
    const m = this.member();
    const t = now();
    const r = await this.call(m, 'KV', 'Put', { key: Buffer.from(key), value: Buffer.from(value) });
    if ('res' in r) {
      rec.outcome = 'acked';
      this.s.stats.note('put', 'acked');
      this.linearizable('put', t, r.res, true, m);
      if (this.deletable.length < MAX_DELETABLE) this.deletable.push(n);
    } else {
      rec.outcome = r.outcome;
      this.s.stats.note('put', r.outcome, r.kind);
    }
  }

  private async del(): Promise<void> {
    if (this.deletable.length === 0) return this.put();
    const i = this.rng.int(0, this.deletable.length);
    const n = this.deletable[i]!;
    this.deletable[i] = this.deletable[this.deletable.length - 1]!;
    this.deletable.pop();
    const rec = this.puts[n]!;
    assert(rec.outcome === 'acked' && rec.del === null);
    rec.del = 'unknown';
    const m = this.member();
    const t = now();
    const key = putKey(this.id, n);
    const r = await this.call(m, 'KV', 'DeleteRange', { key: Buffer.from(key), prev_kv: true });
    if ('res' in r) {
      rec.del = 'acked';
      this.s.stats.note('delete', 'acked');
      // The key was put (acknowledged) and nobody else deletes it: exactly it must go.
      const deleted = Number(r.res['deleted']);
      const prev = (r.res['prev_kvs'] as KvMsg[] | undefined) ?? [];
      if (deleted !== 1 || prev.length !== 1 || prev[0]!.value.toString('latin1') !== rec.value) {
        this.s.findings.add('kv', `delete of acked ${key} on ${m.name} at ${t.toFixed(0)} ms: deleted=${deleted}, prev_kvs=${prev.map((p) => fmtKv(storedOf(p))).join('; ') || 'none'}, expected value ${rec.value}`);
      }
      this.linearizable('delete', t, r.res, deleted > 0, m);
    } else {
      this.s.stats.note('delete', r.outcome, r.kind);
      if (r.outcome === 'failed') {
        rec.del = null; // not applied: the key is still there, and may be deleted later
        this.deletable.push(n);
      } else {
        rec.del = 'unknown';
      }
    }
  }

  /** Read back one of this client's own keys; what it must see follows from its own acked ops. */
  private async readOwn(serializable: boolean): Promise<void> {
    if (this.puts.length === 0) return this.put();
    const n = this.rng.int(0, this.puts.length);
    const rec = this.puts[n]!;
    // The expectation as of the read's start: this client is the only writer of the key.
    const outcome = rec.outcome;
    const del = rec.del;
    const key = putKey(this.id, n);
    const m = this.member();
    const t = now();
    const kind: OpKind = serializable ? 'serializable' : 'range';
    const r = await this.call(m, 'KV', 'Range', { key: Buffer.from(key), serializable });
    if (!('res' in r)) {
      this.s.stats.note(kind, r.outcome, r.kind);
      return;
    }
    this.s.stats.note(kind, 'acked');
    const kvs = kvsOf(r.res);
    const got = kvs.length === 0 ? undefined : storedOf(kvs[0]!);
    if (got !== undefined && (got.value !== rec.value || got.version !== 1 || got.create !== got.mod)) {
      this.s.findings.add('kv', `${kind} of ${key} on ${m.name} at ${t.toFixed(0)} ms: ${fmtKv(got)}, expected value ${rec.value} written once`);
    }
    if (serializable) return; // may be stale: nothing more to expect
    this.linearizable('range', t, r.res, false, m);
    if (got === undefined && outcome === 'acked' && del === null) {
      this.s.findings.add('kv', `linearizable range of ${key} on ${m.name} at ${t.toFixed(0)} ms (rev ${revisionOf(r.res)}): absent, but its put was acked and never deleted`);
    }
    if (got !== undefined && (outcome === 'failed' || del === 'acked')) {
      this.s.findings.add('kv', `linearizable range of ${key} on ${m.name} at ${t.toFixed(0)} ms (rev ${revisionOf(r.res)}): present, but put=${outcome} delete=${del}`);
    }
  }

  /** Value of a counter, checked against the increments acked before and sent until the answer. */
  private checkCounter(i: number, what: string, kv: KvMsg | undefined, ackedBefore: number, m: ClusterMember, t: number): { value: number; mod: string } {
    const value = kv === undefined ? 0 : Number(kv.value.toString('latin1'));
    const version = kv === undefined ? 0 : Number(kv.version);
    const c = this.s.counters[i]!;
    if (!Number.isInteger(value) || value < ackedBefore || value > c.sent || version !== value) {
      this.s.findings.add('counters', `${what} of ${counterKey(i)} on ${m.name} at ${t.toFixed(0)} ms: value ${value} version ${version}, expected a value in [${ackedBefore} acked before, ${c.sent} sent] equal to its version`);
    }
    return { value, mod: kv === undefined ? '0' : String(kv.mod_revision) };
  }

  private async readCounter(): Promise<void> {
    const i = this.rng.int(0, this.s.counters.length);
    const m = this.member();
    const ackedBefore = this.s.counters[i]!.acked;
    const t = now();
    const r = await this.call(m, 'KV', 'Range', { key: Buffer.from(counterKey(i)) });
    if (!('res' in r)) {
      this.s.stats.note('counter-read', r.outcome, r.kind);
      return;
    }
    this.s.stats.note('counter-read', 'acked');
    this.linearizable('counter-read', t, r.res, false, m);
    this.checkCounter(i, 'linearizable range', kvsOf(r.res)[0], ackedBefore, m, t);
  }

  /** Compare-and-swap increment: read, then Txn(mod_revision == seen) put value+1, else re-read. */
  private async increment(): Promise<void> {
    const i = this.rng.int(0, this.s.counters.length);
    const c = this.s.counters[i]!;
    const key = Buffer.from(counterKey(i));
    let m = this.member();
    let ackedBefore = c.acked;
    let t = now();
    const r0 = await this.call(m, 'KV', 'Range', { key });
    if (!('res' in r0)) {
      this.s.stats.note('counter-read', r0.outcome, r0.kind);
      return;
    }
    this.s.stats.note('counter-read', 'acked');
    this.linearizable('counter-read', t, r0.res, false, m);
    let seen = this.checkCounter(i, 'linearizable range', kvsOf(r0.res)[0], ackedBefore, m, t);
    for (let attempt = 0; attempt < MAX_CAS_ATTEMPTS && !this.s.stopping.now; attempt++) {
      m = this.member();
      ackedBefore = c.acked;
      t = now();
      c.sent++;
      const r = await this.call(m, 'KV', 'Txn', {
        compare: [{ result: 0 /* Equal */, target: 2 /* Mod */, key, mod_revision: seen.mod }],
        success: [{ request_put: { key, value: Buffer.from(String(seen.value + 1)) } }],
        failure: [{ request_range: { key } }],
      });
      if (!('res' in r)) {
        this.s.stats.note('cas', r.outcome, r.kind);
        // Unknown: it may still apply, so a retry would be a second increment; stop here.
        if (r.outcome === 'unknown') c.unknown++;
        return;
      }
      const succeeded = r.res['succeeded'] === true;
      this.linearizable('cas', t, r.res, succeeded, m);
      if (succeeded) {
        c.acked++;
        this.s.stats.note('cas', 'acked');
        return;
      }
      // A failed compare is etcd's "not applied": someone else incremented; retry from its value.
      c.lostRaces++;
      this.s.stats.note('cas', 'failed', 'compare failed');
      const responses = (r.res['responses'] as Array<{ response_range?: Msg | null }> | undefined) ?? [];
      const rr = responses[0]?.response_range;
      if (rr == null) {
        this.s.findings.add('counters', `failed-compare txn on ${counterKey(i)} on ${m.name} at ${t.toFixed(0)} ms without its range response`);
        return;
      }
      seen = this.checkCounter(i, 'txn failure range', kvsOf(rr)[0], ackedBefore, m, t);
    }
  }

  /** Grant, put a key with the lease, revoke: the key must go with the lease. */
  private async lease(): Promise<void> {
    const ttlSec = this.rng.int(20, 61);
    let m = this.member();
    const tGrant = now();
    const g = await this.call(m, 'Lease', 'LeaseGrant', { TTL: String(ttlSec), ID: '0' });
    if (!('res' in g)) {
      this.s.stats.note('lease-grant', g.outcome, g.kind);
      return;
    }
    const id = String(g.res['ID']);
    if (g.res['error']) {
      this.s.stats.note('lease-grant', 'failed', String(g.res['error']));
      return;
    }
    this.s.stats.note('lease-grant', 'acked');
    const n = this.leases.length;
    const key = leaseKey(this.id, n);
    const rec: LeaseRec = { key, value: `c${this.id}:l${n}:${id}`, id, ttlSec, put: 'unknown', revoke: null };
    this.leases.push(rec);
    m = this.member();
    const tPut = now();
    const p = await this.call(m, 'KV', 'Put', { key: Buffer.from(key), value: Buffer.from(rec.value), lease: id });
    // A lease cannot expire before its TTL has passed since its grant (a new leader extends it).
    const young = (t: number): boolean => t - tGrant < (ttlSec * 1_000) / 2;
    if ('res' in p) {
      rec.put = 'acked';
      this.s.stats.note('lease-put', 'acked');
      this.linearizable('lease-put', tPut, p.res, true, m);
    } else {
      rec.put = p.outcome;
      this.s.stats.note('lease-put', p.outcome, p.kind);
      if (p.code === 5 && young(tPut)) this.s.findings.add('leases', `put with lease ${id} (granted ${((tPut - tGrant) / 1_000).toFixed(1)} s before, TTL ${ttlSec} s) on ${m.name}: ${p.kind}`);
    }
    if (this.rng.chance(0.1)) return; // leave some leases to expire on their own
    m = this.member();
    const tRevoke = now();
    const rv = await this.call(m, 'Lease', 'LeaseRevoke', { ID: id });
    if ('res' in rv) {
      rec.revoke = 'acked';
      this.s.stats.note('lease-revoke', 'acked');
    } else {
      rec.revoke = rv.outcome;
      this.s.stats.note('lease-revoke', rv.outcome, rv.kind);
      if (rv.code === 5 && young(tRevoke)) this.s.findings.add('leases', `revoke of lease ${id} (granted ${((tRevoke - tGrant) / 1_000).toFixed(1)} s before, TTL ${ttlSec} s) on ${m.name}: ${rv.kind}`);
    }
  }
}

// ------------------------------------------------------------------------------------- faults

type FaultKind = 'kill' | 'stop' | 'kill2' | 'kill-again';
const MAX_SELF_RESTARTS = 5;

/**
 * The fault schedule: one episode at a time, each ending with every member it touched running
 * and resumed (so the cluster is never left without quorum for longer than an episode), then a gap.
 */
class Faults {
  count = 0;
  readonly byKind = new Map<FaultKind, number>();
  /** Members we took down on purpose (kill -9 until restarted): the monitor ignores their exits. */
  private readonly ours = new Set<string>();
  private readonly selfRestarts = new Map<string, number>();
  private monitorTimer: NodeJS.Timeout | null = null;
  /** Members that exited on their own and are about to be started again. */
  private readonly relaunching = new Set<string>();

  constructor(
    private readonly cluster: Cluster,
    private readonly channels: Channels,
    private readonly rng: Rng,
    private readonly findings: Findings,
    private readonly log: (line: string) => void,
  ) {}

  /** Watch for members that exit without us: report, and start them again (bounded). */
  startMonitor(): void {
    this.monitorTimer = setInterval(() => {
      for (const m of this.cluster.members) {
        if (m.running() || this.ours.has(m.name) || this.relaunching.has(m.name)) continue;
        // The exit line and the two lines before it (usually the reason).
        const lines = m.logs().trimEnd().split('\n');
        let at = lines.length - 1;
        while (at >= 0 && !(lines[at]!.startsWith('--- ') && lines[at]!.includes(' exit '))) at--;
        const exitLine = at < 0 ? '(no exit line)' : lines.slice(Math.max(0, at - 2), at + 1).map((l) => l.slice(0, 300)).join(' | ');
        this.findings.add('processes', `${m.name} exited on its own: ${exitLine}`);
        this.log(`${stamp()} ${m.name} EXITED ON ITS OWN: ${exitLine}`);
        const n = (this.selfRestarts.get(m.name) ?? 0) + 1;
        this.selfRestarts.set(m.name, n);
        if (n > MAX_SELF_RESTARTS) {
          this.ours.add(m.name); // leave it down: stop reporting the same crash loop
          this.log(`${stamp()} ${m.name} left down after ${MAX_SELF_RESTARTS} restarts`);
          continue;
        }
        this.relaunching.add(m.name);
        setTimeout(() => {
          this.relaunching.delete(m.name);
          if (m.running()) return;
          this.log(`${stamp()} restart ${m.name} (after exiting on its own)`);
          this.relaunch(m);
        }, 1_000);
      }
    }, 200);
  }

  stopMonitor(): void {
    if (this.monitorTimer !== null) clearInterval(this.monitorTimer);
    this.monitorTimer = null;
  }

  private relaunch(m: ClusterMember): void {
    this.channels.restarted(m);
    m.relaunch();
  }

  async run(endAtMs: number): Promise<void> {
    for (;;) {
      // Draw everything an episode needs up front, whatever happens: the schedule stays the same
      // for a seed even when an episode is skipped or the leader is not where it was last time.
      const gapMs = this.rng.int(1_000, 6_000);
      const r = this.rng.float();
      const kind: FaultKind = r < 0.4 ? 'kill' : r < 0.8 ? 'stop' : r < 0.92 ? 'kill2' : 'kill-again';
      const wantLeader = this.rng.chance(0.4);
      const idx = this.rng.int(0, this.cluster.members.length);
      const other = (idx + this.rng.int(1, this.cluster.members.length)) % this.cluster.members.length;
      const d1 = this.rng.int(500, 5_001);
      const d2 = this.rng.int(500, 5_001);
      const againMs = this.rng.int(100, 2_001);
      if (now() + gapMs >= endAtMs) {
        await sleepMs(Math.max(0, endAtMs - now()));
        return;
      }
      await sleepMs(gapMs);
      if (!this.cluster.members.every((m) => m.up())) {
        this.log(`${stamp()} fault skipped: not every member is up (${this.cluster.members.filter((m) => !m.up()).map((m) => m.name).join(',')})`);
        continue;
      }
      let target = this.cluster.members[idx]!;
      let role = 'random';
      if (wantLeader) {
        const l = await this.leader();
        if (l !== undefined) {
          target = l;
          role = 'leader';
        } else role = 'random (no leader found)';
      }
      const second = this.cluster.members[other === this.cluster.members.indexOf(target) ? idx : other]!;
      this.count++;
      this.byKind.set(kind, (this.byKind.get(kind) ?? 0) + 1);
      const tag = `fault #${this.count}`;
      if (kind === 'kill') {
        this.log(`${stamp()} ${tag} kill -9 ${target.name} (${role}), restart after ${d1} ms`);
        await this.kill(target);
        await sleepMs(d1);
        this.restart(target, tag);
      } else if (kind === 'stop') {
        this.log(`${stamp()} ${tag} SIGSTOP ${target.name} (${role}) for ${d1} ms`);
        if (target.up()) target.pause(); // (it may have fallen over while we asked for the leader)
        await sleepMs(d1);
        if (target.isPaused()) target.resume();
        this.log(`${stamp()} ${tag} SIGCONT ${target.name}`);
      } else if (kind === 'kill2') {
        this.log(`${stamp()} ${tag} kill -9 ${target.name} (${role}) and ${second.name}, restarts after ${d1} / ${d2} ms (no quorum meanwhile)`);
        await Promise.all([this.kill(target), this.kill(second)]);
        const [first, firstMs, last, lastMs] = d1 <= d2 ? [target, d1, second, d2] : [second, d2, target, d1];
        await sleepMs(firstMs);
        this.restart(first, tag);
        await sleepMs(lastMs - firstMs);
        this.restart(last, tag);
      } else {
        this.log(`${stamp()} ${tag} kill -9 ${target.name} (${role}), restart after ${d1} ms, kill -9 again ${againMs} ms into its start, restart after ${d2} ms`);
        await this.kill(target);
        await sleepMs(d1);
        this.restart(target, tag);
        await sleepMs(againMs);
        this.log(`${stamp()} ${tag} kill -9 ${target.name} again (restarting)`);
        await this.kill(target);
        await sleepMs(d2);
        this.restart(target, tag);
      }
    }
  }

  private async kill(m: ClusterMember): Promise<void> {
    this.ours.add(m.name);
    if (m.running()) await m.kill9();
  }

  private restart(m: ClusterMember, tag: string): void {
    this.log(`${stamp()} ${tag} restart ${m.name}`);
    this.relaunch(m);
    this.ours.delete(m.name);
  }

  /** The leader most up members name (Status), if any. */
  private async leader(): Promise<ClusterMember | undefined> {
    const votes = new Map<string, number>();
    await Promise.all(
      this.cluster.members.map(async (m) => {
        try {
          const s = await m.status(1_000);
          if (s.leader !== '0') votes.set(s.leader, (votes.get(s.leader) ?? 0) + 1);
        } catch {
          // down or slow: no vote
        }
      }),
    );
    const best = [...votes.entries()].sort((a, b) => b[1] - a[1])[0];
    return best === undefined ? undefined : this.cluster.byId(best[0]);
  }

  /** Before the final checks: everything we or a crash stopped runs again. */
  ensureAllUp(): void {
    for (const m of this.cluster.members) {
      if (m.isPaused()) m.resume();
      if (!m.running()) {
        this.log(`${stamp()} restart ${m.name} before the final checks`);
        this.relaunch(m);
      }
      this.ours.delete(m.name);
    }
  }

  /** Stop counting exits as crashes (the final SIGTERM). */
  expectAllDown(): void {
    for (const m of this.cluster.members) this.ours.add(m.name);
  }

  summary(): string {
    return `faults ${this.count} (${[...this.byKind.entries()].map(([k, v]) => `${k} ${v}`).join(', ') || 'none'})`;
  }
}

// ------------------------------------------------------------------------------- final checks

const PAGE_KEYS = 2_000;
const MAX_PAGES = 10_000;
const ALL_KEYS = Buffer.from([0]);

/** Every key at `rev` (paged), as stored. */
async function readAllAt(c: EtcdGrpc, rev: number): Promise<Map<string, StoredKv>> {
  const out = new Map<string, StoredKv>();
  let from = ALL_KEYS;
  for (let page = 0; page < MAX_PAGES; page++) {
    const res = await c.unary('KV', 'Range', { key: from, range_end: ALL_KEYS, revision: String(rev), limit: String(PAGE_KEYS) }, 30_000);
    const kvs = kvsOf(res);
    for (const kv of kvs) out.set(kv.key.toString('latin1'), storedOf(kv));
    if (res['more'] !== true || kvs.length === 0) return out;
    from = Buffer.concat([kvs[kvs.length - 1]!.key, Buffer.from([0])]);
  }
  throw new Error(`more than ${MAX_PAGES} pages of ${PAGE_KEYS} keys`);
}

function checkKv(clients: SoakClient[], counters: Counter[], kvs: Map<string, StoredKv>, f: Findings): void {
  const expected = new Set<string>();
  for (const cl of clients) {
    cl.puts.forEach((rec, n) => {
      const key = putKey(cl.id, n);
      expected.add(key);
      const got = kvs.get(key);
      const desc = `${key} (put ${rec.outcome}, delete ${rec.del ?? 'not sent'})`;
      if (got !== undefined && (got.value !== rec.value || got.version !== 1 || got.create !== got.mod || got.lease !== '0')) {
        f.add('kv', `${desc}: ${fmtKv(got)}, expected value ${rec.value} written once`);
        return;
      }
      const mustBeThere = rec.outcome === 'acked' && rec.del === null;
      const mustBeGone = rec.outcome === 'failed' || rec.del === 'acked';
      if (mustBeThere && got === undefined) f.add('kv', `${desc}: lost`);
      if (mustBeGone && got !== undefined) f.add('kv', `${desc}: present (${fmtKv(got)})`);
    });
  }
  counters.forEach((c, i) => {
    const key = counterKey(i);
    expected.add(key);
    const got = kvs.get(key);
    const value = got === undefined ? 0 : Number(got.value);
    const version = got?.version ?? 0;
    if (!Number.isInteger(value) || value < c.acked || value > c.acked + c.unknown || version !== value) {
      f.add('counters', `${key}: value ${got?.value ?? 'absent'} version ${version}, expected a value in [${c.acked}, ${c.acked + c.unknown}] (acked ${c.acked}, unknown ${c.unknown}) equal to its version`);
    }
  });
  for (const cl of clients) {
    for (const l of cl.leases) {
      expected.add(l.key);
      const got = kvs.get(l.key);
      const desc = `${l.key} (lease ${l.id} put ${l.put}, revoke ${l.revoke ?? 'not sent'})`;
      if (got !== undefined && (got.value !== l.value || got.lease !== l.id || got.version !== 1 || l.put === 'failed')) {
        f.add('leases', `${desc}: ${fmtKv(got)}, expected value ${l.value} with lease ${l.id}`);
      } else if (got !== undefined && l.revoke === 'acked') {
        f.add('leases', `${desc}: present after its lease's revoke was acked (${fmtKv(got)})`);
      }
    }
  }
  let phantoms = 0;
  for (const [k, v] of kvs) {
    if (expected.has(k)) continue;
    phantoms++;
    f.add('kv', `unexpected key ${k}: ${fmtKv(v)} (no client wrote it)`);
  }
  if (phantoms > 0) console.log(`${stamp()} ${phantoms} unexpected keys`);
}

/** After acked revokes, the leases must be gone everywhere (a sample; TTL -1 means not found). */
async function checkRevokedLeases(clients: SoakClient[], members: ClusterMember[], rng: Rng, f: Findings): Promise<void> {
  const revoked = clients.flatMap((c) => c.leases.filter((l) => l.revoke === 'acked'));
  const sample: LeaseRec[] = [];
  for (let i = 0; i < Math.min(100, revoked.length); i++) sample.push(revoked[rng.int(0, revoked.length)]!);
  for (const m of members) {
    const c = new EtcdGrpc(m.clientHostPort);
    try {
      for (const l of sample) {
        const res = await c.unary('Lease', 'LeaseTimeToLive', { ID: l.id }, 10_000);
        if (String(res['TTL']) !== '-1') f.add('leases', `lease ${l.id} (revoke acked) on ${m.name}: TimeToLive TTL ${String(res['TTL'])}, expected -1`);
      }
    } finally {
      c.close();
    }
  }
}

/** Check 4: the same HashKV at `rev` everywhere (retried until every member applied `rev`). */
async function checkReplicas(members: ClusterMember[], rev: number, f: Findings): Promise<void> {
  const conns = members.map((m) => new EtcdGrpc(m.clientHostPort));
  try {
    let last = '';
    let agreed = false;
    const deadline = Date.now() + 60_000;
    while (!agreed && Date.now() < deadline) {
      try {
        const hs = await Promise.all(conns.map((c) => c.unary('Maintenance', 'HashKV', { revision: String(rev) }, 10_000)));
        last = hs.map((h, i) => `${members[i]!.name}: hash ${String(h['hash'])} compact ${String(h['compact_revision'])} at rev ${revisionOf(h)}`).join('; ');
        agreed = hs.every((h) => String(h['hash']) === String(hs[0]!['hash']) && String(h['compact_revision']) === String(hs[0]!['compact_revision']));
      } catch (e) {
        last = `error ${e instanceof Error ? e.message : String(e)}`;
      }
      if (!agreed) await sleepMs(500);
    }
    console.log(`${stamp()} HashKV at ${rev}: ${last}`);
    if (!agreed) f.add('replicas', `HashKV at revision ${rev} never agreed within 60 s: ${last}`);
  } finally {
    for (const c of conns) c.close();
  }
  let statusLine = '';
  const ok = await waitFor(
    'the same raft index on every member',
    async () => {
      const sts = await Promise.all(members.map((m) => m.status(5_000)));
      statusLine = sts.map((s, i) => `${members[i]!.name}: index ${s.raftIndex} applied ${s.raftAppliedIndex} rev ${s.revision} leader ${s.leader} term ${s.raftTerm}`).join('; ');
      const s0 = sts[0]!;
      return sts.every((s) => s.raftIndex === s0.raftIndex && s.raftAppliedIndex === s0.raftAppliedIndex && s.revision === s0.revision && s.leader === s0.leader);
    },
    { timeoutMs: 60_000, intervalMs: 500 },
  ).catch((e: unknown) => (e instanceof Error ? e.message : String(e)));
  console.log(`${stamp()} status: ${statusLine}`);
  if (ok !== true) f.add('replicas', `members did not agree on raft index/applied index/revision within 60 s: ${statusLine} (${String(ok)})`);
}

interface WatchEvent {
  type: string;
  kv: KvMsg;
}

/**
 * Check 5 on one member: watch every key from revision 1 and rebuild the store from the events.
 * Revisions must come in order, each of 2..rev at least once (every revision is a write with an
 * event), no key twice in one revision, puts with the right create/mod/version, deletes of keys
 * that exist; then the rebuilt state must equal Range at `rev`.
 */
async function checkWatch(m: ClusterMember, rev: number, expected: Map<string, StoredKv>, f: Findings): Promise<void> {
  const c = new EtcdGrpc(m.clientHostPort);
  const stream = c.bidi('Watch', 'Watch');
  const state = new Map<string, StoredKv>();
  let lastRev = 1;
  let keysThisRev = new Set<string>();
  let events = 0;
  let problems = 0;
  const problem = (msg: string): void => {
    problems++;
    f.add('watch', `${m.name}: ${msg}`);
  };
  try {
    await withTimeout(
      `watch replay on ${m.name}`,
      new Promise<void>((resolve, reject) => {
        let created = false;
        let earlyProgress = false;
        const progress = setInterval(() => {
          if (created) stream.write({ progress_request: {} });
        }, 1_000);
        const finish = (e?: Error): void => {
          clearInterval(progress);
          if (e) reject(e);
          else resolve();
        };
        stream.on('error', (e: Error) => finish(e));
        stream.on('end', () => finish(new Error('watch stream ended')));
        stream.on('data', (msg: Msg) => {
          if (msg['created'] === true) {
            created = true;
            return;
          }
          if (msg['canceled'] === true) {
            finish(new Error(`watch canceled: ${String(msg['cancel_reason'])} compact_revision ${String(msg['compact_revision'])}`));
            return;
          }
          const evs = (msg['events'] as WatchEvent[] | undefined) ?? [];
          for (const ev of evs) {
            const r = Number(ev.kv.mod_revision);
            if (r > rev) continue; // unknown ops applied after the checks' revision
            events++;
            const key = ev.kv.key.toString('latin1');
            if (r < lastRev) problem(`event at revision ${r} after revision ${lastRev} (${ev.type} ${key})`);
            else if (r > lastRev) {
              if (r !== lastRev + 1) problem(`revisions ${lastRev + 1}..${r - 1} missing (next event ${ev.type} ${key} at ${r})`);
              lastRev = r;
              keysThisRev = new Set();
            }
            if (keysThisRev.has(key)) problem(`${key} twice in revision ${r}`);
            keysThisRev.add(key);
            const prev = state.get(key);
            if (ev.type === 'Put') {
              const got = storedOf(ev.kv);
              const want = { create: prev?.create ?? r, version: (prev?.version ?? 0) + 1 };
              if (got.create !== want.create || got.version !== want.version) {
                problem(`put ${key} at ${r}: create ${got.create} version ${got.version}, expected create ${want.create} version ${want.version} (previous ${fmtKv(prev)})`);
              }
              state.set(key, got);
            } else {
              if (prev === undefined) problem(`delete of absent key ${key} at ${r}`);
              state.delete(key);
            }
          }
          // A progress response (no events) promises every event up to its revision was sent. Done
          // once the events reached `rev` and a progress response confirms the tail of `rev`. One
          // at or past `rev` before the events got there breaks that promise (the real etcd 3.4.23
          // does this for a watcher still catching up: etcd issue 15220): report it, read on.
          if (evs.length === 0 && created) {
            const pr = revisionOf(msg);
            if (pr >= rev && lastRev >= rev) finish();
            else if (pr > lastRev && !earlyProgress) {
              earlyProgress = true;
              problem(`progress response at revision ${pr} while events were delivered only up to revision ${lastRev}`);
            }
          }
        });
        stream.write({ create_request: { key: ALL_KEYS, range_end: ALL_KEYS, start_revision: '1' } });
      }),
      180_000,
    );
  } catch (e) {
    problem(`replay did not complete: ${e instanceof Error ? e.message : String(e)} (last revision ${lastRev}, ${events} events)`);
  } finally {
    stream.cancel();
    c.close();
  }
  if (lastRev !== rev) problem(`replay ended at revision ${lastRev}, Range reports ${rev}`);
  for (const [k, want] of expected) {
    const got = state.get(k);
    if (got === undefined || got.value !== want.value || got.create !== want.create || got.mod !== want.mod || got.version !== want.version || got.lease !== want.lease) {
      problem(`${k}: Range at ${rev} has ${fmtKv(want)}, the replay ${fmtKv(got)}`);
    }
  }
  for (const [k, got] of state) if (!expected.has(k)) problem(`${k}: the replay has ${fmtKv(got)}, Range at ${rev} has nothing`);
  console.log(`${stamp()} watch replay on ${m.name}: ${events} events up to revision ${lastRev}, ${state.size} keys, ${problems} problems`);
}

/** Check 6, the log half: lines that speak of a panic, an assertion, an invariant or a fatal error. */
function checkLogs(logDir: string, members: ClusterMember[], f: Findings): void {
  const bad = /panic|assert|invariant|fatal/i;
  for (const m of members) {
    const file = path.join(logDir, `${m.name}.log`);
    const lines = fs.readFileSync(file, 'utf8').split('\n');
    let hits = 0;
    for (const l of lines) {
      if (!bad.test(l)) continue;
      hits++;
      f.add('processes', `${m.name}.log: ${l.slice(0, 400)}`);
    }
    console.log(`${stamp()} ${m.name}.log: ${lines.length} lines, ${hits} matching /panic|assert|invariant|fatal/i`);
  }
}

// ------------------------------------------------------------------------------------------ main

async function main(): Promise<number> {
  const o = parseArgs(process.argv.slice(2));
  const bin = process.env['OURS_BIN'] ?? etcdBin();
  assert(fs.existsSync(bin), `no server binary ${bin} (set OURS_BIN)`);
  const outDir = fs.mkdtempSync(path.join(os.tmpdir(), `soak-seed${o.seed}-`));
  const logDir = path.join(outDir, 'logs');
  fs.mkdirSync(logDir);
  const faultLog = fs.createWriteStream(path.join(outDir, 'faults.log'));
  const memberLogs = new Map<string, fs.WriteStream>();
  const log = (line: string): void => {
    console.log(line);
    faultLog.write(line + '\n');
  };
  log(`${stamp()} soak: seed ${o.seed}, ${o.minutes} min, ${o.clients} clients, deadline ${o.deadlineMs} ms, think ${o.thinkMs} ms, ${o.counters} counters, server ${bin}, output ${outDir}`);
  const memberArgsFlag =
    (o.memberArgs.length > 0 ? ` '--member-args=${o.memberArgs.join(' ')}'` : '') +
    Object.entries(o.memberEnv)
      .map(([k, v]) => ` '--member-env=${k}=${v}'`)
      .join('');
  log(`${stamp()} replay: node ${process.argv[1]} --minutes=${o.minutes} --seed=${o.seed} --clients=${o.clients} --deadline-ms=${o.deadlineMs} --think-ms=${o.thinkMs} --counters=${o.counters} --defrag-ms=${o.defragMs}${memberArgsFlag}`);

  const master = new Rng(o.seed);
  const faultRng = master.fork();
  const checkRng = master.fork();
  const clientRngs = Array.from({ length: o.clients }, () => master.fork());
  // Forked last, so the streams above are the same as before this option existed.
  const defragRng = master.fork();

  const cluster = await Cluster.start({
    size: 3,
    bin,
    args: o.memberArgs,
    env: o.memberEnv,
    // Members that are never killed must outlive the run and its checks (the helper's `timeout`).
    lifetimeSec: Math.ceil(o.minutes * 60) + 1_800,
    onLog: (member, chunk) => {
      let w = memberLogs.get(member);
      if (w === undefined) {
        w = fs.createWriteStream(path.join(logDir, `${member}.log`));
        memberLogs.set(member, w);
      }
      // Output that arrives after the final stop (the streams are ended then) is dropped.
      if (!w.writableEnded) w.write(chunk);
    },
  });
  log(`${stamp()} cluster up: ${cluster.members.map((m) => `${m.name} ${m.clientHostPort} id ${m.id} data ${m.dataDir}`).join('; ')}`);

  const findings = new Findings();
  const stats = new Stats();
  const channels = new Channels(o.deadlineMs);
  const shared: Shared = {
    cluster,
    channels,
    counters: Array.from({ length: o.counters }, () => new Counter()),
    history: new History(),
    stats,
    findings,
    opts: o,
    stopping: { now: false },
  };
  const faults = new Faults(cluster, channels, faultRng, findings, log);
  faults.startMonitor();
  const clients = clientRngs.map((rng, i) => new SoakClient(i, rng, shared));
  // A client that throws has hit a bug of this script (RPC outcomes are values): report it loudly
  // but let the run finish, so the cluster's state is still checked.
  const runs = clients.map((c) =>
    c.run().catch((e: unknown) => findings.add('health', `client c${c.id} crashed (script bug): ${e instanceof Error ? e.stack : String(e)}`)),
  );

  // Defragments while the clients write and the faults run: an answer is counted, not checked
  // (the member may be killed or stopped under it); the checks after the run judge the data.
  const defrags = { ok: 0, failed: 0, errors: new Map<string, number>() };
  const defragging = (async () => {
    if (o.defragMs === 0) return;
    while (!shared.stopping.now) {
      await sleepMs(defragRng.int(1_000, o.defragMs + 1));
      if (shared.stopping.now) return;
      const running = cluster.members.filter((m) => m.up());
      if (running.length === 0) continue;
      const m = defragRng.pick(running);
      try {
        await channels.get(MAX_CLIENTS, m).unary('Maintenance', 'Defragment', {}, 30_000);
        defrags.ok++;
      } catch (e) {
        defrags.failed++;
        const kind = isRpcError(e) ? `${e.code} ${String(e.details).slice(0, 80)}` : String(e).slice(0, 80);
        if (defrags.errors.size < 20 || defrags.errors.has(kind)) defrags.errors.set(kind, (defrags.errors.get(kind) ?? 0) + 1);
      }
    }
  })().catch((e: unknown) => findings.add('health', `defragmenter crashed (script bug): ${e instanceof Error ? e.stack : String(e)}`));

  const progress = setInterval(() => {
    const down = cluster.members.filter((m) => !m.up()).map((m) => `${m.name}${m.isPaused() ? '(stopped)' : '(down)'}`);
    console.log(`${stamp()} progress: ${stats.line()} | ${faults.summary()} | down ${down.join(',') || 'none'} | violations ${findings.count()}`);
  }, 10_000);

  const endAt = now() + o.minutes * 60_000;
  await faults.run(endAt);
  log(`${stamp()} faults over: ${faults.summary()}; stopping clients`);
  shared.stopping.now = true;
  // Each op has a deadline and retries are bounded, so the clients stop within about a minute.
  await withTimeout('clients to stop', Promise.all(runs), 120_000);
  await withTimeout('the defragmenter to stop', defragging, 120_000);
  log(`${stamp()} defragments: ${defrags.ok} ok, ${defrags.failed} failed${[...defrags.errors].map(([k, n]) => `; ${n} x ${k}`).join('')}`);
  clearInterval(progress);
  channels.closeAll();
  console.log(`${stamp()} clients stopped: ${stats.line()}`);

  // ---- heal
  faults.ensureAllUp();
  let rev = 0;
  try {
    const leader = await cluster.waitLeader({ among: cluster.members, timeoutMs: 60_000 });
    await Promise.all(cluster.members.map((m) => m.waitReady(60_000)));
    await cluster.waitConverged(cluster.members, 60_000);
    const c = new EtcdGrpc(leader.clientHostPort);
    try {
      rev = revisionOf(await c.unary('KV', 'Range', { key: Buffer.from(PREFIX), limit: '1' }, 10_000));
    } finally {
      c.close();
    }
    log(`${stamp()} healed: leader ${leader.name}, revision ${rev}`);
  } catch (e) {
    findings.add('health', `cluster did not heal: ${e instanceof Error ? e.message : String(e)}`);
  }

  // ---- checks
  if (rev > 0) {
    const reader = new EtcdGrpc(cluster.members[0]!.clientHostPort);
    let kvs: Map<string, StoredKv> | undefined;
    try {
      kvs = await readAllAt(reader, rev);
      console.log(`${stamp()} ${kvs.size} keys at revision ${rev}`);
    } catch (e) {
      findings.add('health', `reading every key at ${rev} failed: ${e instanceof Error ? e.message : String(e)}`);
    } finally {
      reader.close();
    }
    if (kvs !== undefined) {
      checkKv(clients, shared.counters, kvs, findings);
      await checkRevokedLeases(clients, cluster.members, checkRng, findings);
      console.log(`${stamp()} checking ${shared.history.rev.length} linearizable ops in real-time order`);
      shared.history.check(findings);
      await checkReplicas(cluster.members, rev, findings);
      for (const m of cluster.members) await checkWatch(m, rev, kvs, findings);
    }
  }
  // Counted as crashes until here: a member may fall over while the checks run.
  faults.stopMonitor();
  faults.expectAllDown();

  // ---- stop, then the logs are complete
  await Promise.all(cluster.members.map((m) => m.stop()));
  await Promise.all([...memberLogs.values()].map((w) => new Promise<void>((resolve) => w.end(resolve))));
  checkLogs(logDir, cluster.members, findings);

  const ok = findings.count() === 0;
  const report = [
    '',
    `==== soak report: seed ${o.seed}, ${o.minutes} min, ${o.clients} clients`,
    `${stats.line()}; ${faults.summary()}; final revision ${rev}; linearizable ops checked ${shared.history.rev.length}`,
    ...stats.table(),
    `counters: ${shared.counters.map((c, i) => `#${i} acked ${c.acked} unknown ${c.unknown} lost races ${c.lostRaces}`).join('; ')}`,
    'errors seen by clients:',
    ...[...stats.errors.entries()].sort((a, b) => b[1] - a[1]).map(([k, n]) => `  ${String(n).padStart(7)}  ${k}`),
    'checks:',
    ...findings.report(),
    ok ? 'RESULT: PASS' : `RESULT: FAIL (${findings.count()} violations); data dirs, logs, faults.log and report.txt kept in ${outDir}`,
  ];
  for (const l of report) log(l);
  await new Promise<void>((resolve) => faultLog.end(resolve));
  fs.writeFileSync(path.join(outDir, 'report.txt'), report.join('\n') + '\n');

  if (!ok || o.keep) {
    // The cluster's temp dir goes with close(); move the data dirs out of it first (a rename: the
    // LMDB file of an older build is a sparse 8 GiB map, too big to copy).
    for (const m of cluster.members) fs.renameSync(m.dataDir, path.join(outDir, m.name));
  }
  await cluster.close();
  if (ok && !o.keep) fs.rmSync(outDir, { recursive: true, force: true });
  return ok ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (e: unknown) => {
    console.error(e instanceof Error ? e.stack : String(e));
    process.exit(2);
  },
);

// Starts a multi-member etcd cluster (ours or the real one) as child processes on loopback, with
// an optional fault-injecting proxy in front of every member's peer URL, and the operations the
// cluster tests need: find the leader, kill/pause/restart members, partition and heal, join new
// members with etcdctl, and record acknowledged writes under load.
import assert from 'node:assert';
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { exited, releaseTempDir, signalGroup, spawnServer, stopGroup, trackTempDir, waitExit } from './child';
import { etcdBin, REPO_ROOT } from './etcd-process';
import { EtcdGrpc, isRpcError, Msg } from './grpc';
import { freePort } from './ports';
import { childPids, pidHoldsSocket, socketInode, TcpProxy } from './proxy';
import { sleepMs, waitFor } from './wait';

const MAX_LOG_BYTES = 4 * 1024 * 1024;
// A leaked member must not outlive a hung test run for long.
const MAX_LIFETIME_SEC = 600;
const STOP_GRACE_MS = 10_000;
const MAX_MEMBERS = 7;

export interface MemberStatus {
  /** Member IDs as decimal strings (they use all 64 bits). */
  memberId: string;
  leader: string;
  raftTerm: number;
  raftIndex: number;
  raftAppliedIndex: number;
  revision: number;
  isLearner: boolean;
}

/** What a member process does beyond serving: how long it may live, where its output also goes. */
export interface MemberHooks {
  /** Seconds before `timeout` kills the process (a leaked member must not outlive a hung run for long). */
  lifetimeSec: number;
  /** Every chunk of the member's output and of the start/exit lines logs() holds, as it arrives. */
  onLog: ((member: string, chunk: string) => void) | null;
  /** Environment variables for the member process (the test's own ETCD* ones are never passed). */
  env?: Readonly<Record<string, string>>;
  /** A user to ask Status as when auth is on (etcd 3.6 answers no anonymous Status then). */
  statusUser?: { name: string; password: string } | null;
}

export class ClusterMember {
  /** Set by the first status call (IDs are derived by the server). */
  id = '';
  private proc: ChildProcess | null = null;
  private logChunks: string[] = [];
  private logBytes = 0;
  private paused = false;
  private lastArgs: string[] = [];
  private grpc: EtcdGrpc | null = null;

  constructor(
    readonly name: string,
    readonly bin: string,
    readonly dataDir: string,
    readonly clientPort: number,
    readonly listenPeerPort: number,
    /** Peers dial this (the proxy when there is one). */
    readonly peerUrl: string,
    readonly proxy: TcpProxy | null,
    private readonly hooks: MemberHooks = { lifetimeSec: MAX_LIFETIME_SEC, onLog: null },
  ) {}

  get clientHostPort(): string {
    return `127.0.0.1:${this.clientPort}`;
  }
  get clientUrl(): string {
    return `http://127.0.0.1:${this.clientPort}`;
  }

  /** Spawn the server with the cluster flags; does not wait for it to serve. */
  launch(initialCluster: string, state: 'new' | 'existing', token: string, extraArgs: string[]): void {
    assert(this.proc === null || exited(this.proc), `${this.name} is already running`);
    const listenPeer = `http://127.0.0.1:${this.listenPeerPort}`;
    this.lastArgs = [
      `--name=${this.name}`,
      `--data-dir=${this.dataDir}`,
      `--listen-client-urls=${this.clientUrl}`,
      `--advertise-client-urls=${this.clientUrl}`,
      `--listen-peer-urls=${listenPeer}`,
      `--initial-advertise-peer-urls=${this.peerUrl}`,
      `--initial-cluster=${initialCluster}`,
      `--initial-cluster-state=${state}`,
      `--initial-cluster-token=${token}`,
      ...extraArgs,
    ];
    this.spawnProc();
  }

  /** Start again on the same data dir and flags (the WAL decides the membership); `env` adds to the cluster's environment for this run. */
  relaunch(env?: Readonly<Record<string, string>>): void {
    assert(this.lastArgs.length > 0 && (this.proc === null || exited(this.proc)));
    // A channel that saw the port refused while the member was down sits in grpc-js's reconnect
    // backoff and fails calls fast ("No connection established") after the member is back.
    this.closeClient();
    this.spawnProc(env);
  }

  private spawnProc(env?: Readonly<Record<string, string>>): void {
    const envText = env ? Object.entries(env).map(([k, v]) => `${k}=${v} `).join('') : '';
    this.appendLog(`--- ${new Date().toISOString()} start ${envText}${this.bin} ${this.lastArgs.join(' ')}\n`);
    const p = spawnServer(this.bin, this.lastArgs, this.hooks.lifetimeSec, env ? { ...this.hooks.env, ...env } : this.hooks.env);
    p.stdout?.on('data', (c: Buffer) => this.appendLog(c.toString('utf8')));
    p.stderr?.on('data', (c: Buffer) => this.appendLog(c.toString('utf8')));
    p.on('exit', (code, sig) => {
      this.appendLog(`--- ${new Date().toISOString()} exit code=${code} signal=${sig}\n`);
    });
    p.on('error', (e) => this.appendLog(`--- spawn error ${e.message}\n`));
    this.proc = p;
    this.paused = false;
  }

  private appendLog(s: string): void {
    this.hooks.onLog?.(this.name, s);
    this.logChunks.push(s);
    this.logBytes += s.length;
    while (this.logBytes > MAX_LOG_BYTES && this.logChunks.length > 1) {
      this.logBytes -= this.logChunks[0]!.length;
      this.logChunks.shift();
    }
  }

  logs(): string {
    return this.logChunks.join('');
  }

  running(): boolean {
    return this.proc !== null && !exited(this.proc);
  }

  isPaused(): boolean {
    return this.paused;
  }

  /** Serving and not stopped: a member a test expects answers from. */
  up(): boolean {
    return this.running() && !this.paused;
  }

  /** The server process (child of `timeout`), for telling its sockets apart. */
  serverPids(): number[] {
    if (!this.proc?.pid || exited(this.proc)) return [];
    const kids = childPids(this.proc.pid);
    return [...kids, ...kids.flatMap((k) => childPids(k))];
  }

  /** One shared gRPC channel to this member's client URL. */
  client(): EtcdGrpc {
    if (this.grpc === null) this.grpc = new EtcdGrpc(this.clientHostPort);
    return this.grpc;
  }

  /** Resolve when a linearizable Range succeeds (the member serves and knows a leader). */
  async waitReady(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    const c = new EtcdGrpc(this.clientHostPort);
    try {
      for (;;) {
        const p = this.proc;
        if (p === null || exited(p)) {
          throw new Error(`${this.name} exited during startup\n--- logs:\n${this.logs().slice(-6000)}`);
        }
        try {
          await c.unary('KV', 'Range', { key: Buffer.from('readiness-probe') }, 2_000);
          return;
        } catch (e) {
          // A member with auth enabled serves, and refuses a request without a user.
          if (isRpcError(e) && e.details === 'etcdserver: user name is empty') return;
          // not serving yet
        }
        if (Date.now() >= deadline) {
          throw new Error(`${this.name} not ready within ${timeoutMs} ms\n--- logs:\n${this.logs().slice(-6000)}`);
        }
        await sleepMs(100);
      }
    } finally {
      c.close();
    }
  }

  async status(deadlineMs = 2_000): Promise<MemberStatus> {
    let r: Msg;
    try {
      r = await this.client().unary('Maintenance', 'Status', {}, deadlineMs);
    } catch (e) {
      const user = this.hooks.statusUser;
      if (!user || !isRpcError(e) || e.details !== 'etcdserver: user name is empty') throw e;
      const auth = await this.client().unary('Auth', 'Authenticate', { name: user.name, password: user.password }, deadlineMs);
      r = await this.client().unary('Maintenance', 'Status', {}, deadlineMs, { token: String(auth['token']) });
    }
    const h = r['header'] as Msg;
    const s: MemberStatus = {
      memberId: String(h['member_id']),
      leader: String(r['leader']),
      raftTerm: Number(r['raftTerm']),
      raftIndex: Number(r['raftIndex']),
      raftAppliedIndex: Number(r['raftAppliedIndex']),
      revision: Number(h['revision']),
      isLearner: Boolean(r['isLearner']),
    };
    this.id = s.memberId;
    return s;
  }

  /** SIGKILL (a crash); resolves when the process is gone. */
  async kill9(): Promise<void> {
    const p = this.proc;
    assert(p !== null);
    signalGroup(p, 'SIGKILL');
    assert(await waitExit(p, 5_000), `${this.name} did not exit after SIGKILL`);
    this.paused = false;
  }

  /** SIGTERM, then SIGKILL after a bounded grace period. */
  async stop(): Promise<void> {
    const p = this.proc;
    if (p === null || exited(p)) return;
    if (this.paused) this.resume();
    await stopGroup(p, STOP_GRACE_MS);
  }

  /** Wait for the process to exit by itself (e.g. after removal from the cluster). */
  waitExited(timeoutMs: number): Promise<boolean> {
    const p = this.proc;
    assert(p !== null);
    return waitExit(p, timeoutMs);
  }

  pause(): void {
    const p = this.proc;
    assert(p !== null && !exited(p) && !this.paused);
    signalGroup(p, 'SIGSTOP');
    this.paused = true;
  }

  resume(): void {
    const p = this.proc;
    assert(p !== null && this.paused);
    signalGroup(p, 'SIGCONT');
    this.paused = false;
  }

  closeClient(): void {
    this.grpc?.close();
    this.grpc = null;
  }
}

export interface ClusterOptions {
  size?: number;
  /** Server binary: `ETCD_BIN` / ours by default. */
  bin?: string;
  /** Extra flags for every member. */
  args?: string[];
  /** Put a TcpProxy in front of every peer URL (needed for partitions). */
  proxy?: boolean;
  readyTimeoutMs?: number;
  /** Name prefix of members (m0, m1, ...). */
  namePrefix?: string;
  /** Lifetime of each member process in seconds (default 600; a soak runs longer). */
  lifetimeSec?: number;
  /** Environment variables for every member, e.g. ETCDTS_RAFT_LOG_RESIDENT_BYTES. */
  env?: Readonly<Record<string, string>>;
  /** Sees every chunk of every member's output (logs() keeps only the last 4 MiB). */
  onLog?: ((member: string, chunk: string) => void) | null;
  /** Runs for each member before its first launch, e.g. to restore a snapshot into its (empty) data dir. */
  beforeLaunch?: ((member: ClusterMember, initialCluster: string, token: string) => void) | null;
  /** Where member `name` keeps its data (created if absent); default: a directory of the cluster's own. */
  memberDataDir?: ((name: string) => string) | null;
  /** A user Status is asked as once auth is on (etcd 3.6 refuses an anonymous Status then). */
  statusUser?: { name: string; password: string } | null;
}

/** Starts of a cluster retried when a member's port was taken before it could bind it. */
const MAX_START_ATTEMPTS = 3;

export class Cluster {
  readonly members: ClusterMember[] = [];
  readonly token: string;
  private readonly baseDir: string;
  private nextIndex = 0;

  private constructor(readonly opts: Required<ClusterOptions>) {
    this.baseDir = fs.mkdtempSync(path.join(os.tmpdir(), 'etcd-cluster-'));
    trackTempDir(this.baseDir);
    this.token = `tok-${path.basename(this.baseDir)}`;
  }

  static async start(options: ClusterOptions = {}): Promise<Cluster> {
    const opts: Required<ClusterOptions> = {
      size: options.size ?? 3,
      bin: options.bin ?? etcdBin(),
      args: options.args ?? [],
      proxy: options.proxy ?? false,
      readyTimeoutMs: options.readyTimeoutMs ?? 30_000,
      namePrefix: options.namePrefix ?? 'm',
      lifetimeSec: options.lifetimeSec ?? MAX_LIFETIME_SEC,
      env: options.env ?? {},
      onLog: options.onLog ?? null,
      beforeLaunch: options.beforeLaunch ?? null,
      memberDataDir: options.memberDataDir ?? null,
      statusUser: options.statusUser ?? null,
    };
    assert(Number.isInteger(opts.lifetimeSec) && opts.lifetimeSec > 0);
    assert(opts.size >= 1 && opts.size <= MAX_MEMBERS);
    // etcd 3.4 logs through capnslog unless told otherwise; the tests read zap's JSON lines.
    if (!path.resolve(opts.bin).startsWith(REPO_ROOT + path.sep) && !opts.args.some((a) => a.startsWith('--logger'))) {
      opts.args = ['--logger=zap', ...opts.args];
    }
    // freePort() hands out a port that was free a moment ago; another test's server or an
    // outgoing connection can take it before the member binds it. Such a start is retried on
    // fresh ports (bounded); any other failure is the test's.
    for (let attempt = 1; ; attempt++) {
      const c = new Cluster(opts);
      for (let i = 0; i < opts.size; i++) c.members.push(await c.prepareMember());
      const initial = c.initialClusterOf(c.members);
      for (const m of c.members) opts.beforeLaunch?.(m, initial, c.token);
      for (const m of c.members) m.launch(initial, 'new', c.token, opts.args);
      try {
        await Promise.all(c.members.map((m) => m.waitReady(opts.readyTimeoutMs)));
        for (const m of c.members) await m.status(5_000);
        return c;
      } catch (e) {
        const portTaken = c.members.some((m) => m.logs().includes('EADDRINUSE'));
        await c.close();
        if (!portTaken || attempt >= MAX_START_ATTEMPTS) throw e;
      }
    }
  }

  /** Ports, data dir and proxy of a new member; not launched. */
  async prepareMember(): Promise<ClusterMember> {
    assert(this.nextIndex < MAX_MEMBERS * 2, 'too many members for one cluster test');
    const name = `${this.opts.namePrefix}${this.nextIndex++}`;
    const dataDir = this.opts.memberDataDir?.(name) ?? path.join(this.baseDir, name);
    fs.mkdirSync(dataDir, { recursive: true });
    const clientPort = await freePort();
    let listenPeerPort = await freePort();
    while (listenPeerPort === clientPort) listenPeerPort = await freePort();
    let proxy: TcpProxy | null = null;
    if (this.opts.proxy) {
      proxy = await TcpProxy.start({ targetPort: listenPeerPort, identify: (port, proxyPort) => this.identify(port, proxyPort) });
    }
    const peerUrl = `http://127.0.0.1:${proxy ? proxy.port : listenPeerPort}`;
    return new ClusterMember(name, this.opts.bin, dataDir, clientPort, listenPeerPort, peerUrl, proxy, {
      lifetimeSec: this.opts.lifetimeSec,
      onLog: this.opts.onLog,
      env: this.opts.env,
      statusUser: this.opts.statusUser,
    });
  }

  /** `name=peerUrl,...` for --initial-cluster. */
  initialClusterOf(ms: ClusterMember[]): string {
    return ms.map((m) => `${m.name}=${m.peerUrl}`).join(',');
  }

  /** The member whose process dialed from 127.0.0.1:`remotePort`. */
  private async identify(remotePort: number, proxyPort: number): Promise<string | undefined> {
    const inode = socketInode(remotePort, proxyPort);
    if (inode === undefined) return undefined;
    for (const m of this.members) {
      for (const pid of m.serverPids()) if (pidHoldsSocket(pid, inode)) return m.name;
    }
    return undefined;
  }

  byName(name: string): ClusterMember {
    const m = this.members.find((x) => x.name === name);
    assert(m, `no member ${name}`);
    return m;
  }

  byId(id: string): ClusterMember | undefined {
    return this.members.find((x) => x.id === id);
  }

  up(): ClusterMember[] {
    return this.members.filter((m) => m.up());
  }

  /**
   * Wait until every member in `among` (default: all running, unpaused) names the same leader,
   * which is one of them, and return it.
   */
  async waitLeader(opts: { among?: ClusterMember[]; timeoutMs?: number; not?: ClusterMember } = {}): Promise<ClusterMember> {
    return waitFor(
      'one leader agreed on by the members',
      async () => {
        const among = opts.among ?? this.up();
        const sts = await Promise.all(among.map((m) => m.status(1_000)));
        const leader = sts[0]!.leader;
        if (leader === '0' || !sts.every((s) => s.leader === leader)) return undefined;
        const m = this.byId(leader);
        if (m === undefined || !among.includes(m) || m === opts.not) return undefined;
        return m;
      },
      { timeoutMs: opts.timeoutMs ?? 15_000, intervalMs: 50 },
    );
  }

  /** Cut every peer link between `isolated` and the other members, both ways. */
  partition(isolated: ClusterMember[]): void {
    assert(this.opts.proxy, 'partition needs the cluster started with proxy: true');
    const inside = new Set(isolated.map((m) => m.name));
    for (const m of this.members) {
      const others = this.members.filter((o) => inside.has(o.name) !== inside.has(m.name)).map((o) => o.name);
      m.proxy!.block(others);
    }
  }

  heal(): void {
    for (const m of this.members) m.proxy?.heal();
  }

  /** Wait until every member in `among` reports the same applied index and revision; returns the revision. */
  async waitConverged(among: ClusterMember[] = this.up(), timeoutMs = 15_000): Promise<number> {
    return waitFor(
      'members to converge on one revision',
      async () => {
        const sts = await Promise.all(among.map((m) => m.status(2_000)));
        const rev = sts[0]!.revision;
        const idx = sts[0]!.raftAppliedIndex;
        if (!sts.every((s) => s.revision === rev && (idx === 0 || s.raftAppliedIndex === idx))) return undefined;
        return rev;
      },
      { timeoutMs, intervalMs: 100 },
    );
  }

  async close(): Promise<void> {
    await Promise.all(this.members.map((m) => m.stop()));
    for (const m of this.members) {
      m.closeClient();
      await m.proxy?.close();
    }
    releaseTempDir(this.baseDir);
  }

  /** Logs of every member, for a failure message. */
  logs(tailChars = 4000): string {
    return this.members.map((m) => `===== ${m.name} (${m.id})\n${m.logs().slice(-tailChars)}`).join('\n');
  }
}

export function revisionOf(res: Msg): number {
  const h = res['header'] as Msg | null;
  assert(h, 'response without header');
  return Number(h['revision']);
}

/** key -> value of every key under `prefix`, read from one member (linearizable unless `serializable`). */
export async function readPrefix(
  c: EtcdGrpc,
  prefix: string,
  opts: { serializable?: boolean; revision?: number; deadlineMs?: number } = {},
): Promise<{ kvs: Map<string, string>; revision: number }> {
  const end = Buffer.from(prefix);
  end[end.length - 1]!++;
  const res = await c.unary(
    'KV',
    'Range',
    { key: Buffer.from(prefix), range_end: end, serializable: opts.serializable ?? false, revision: String(opts.revision ?? 0) },
    opts.deadlineMs ?? 10_000,
  );
  const kvs = new Map<string, string>();
  for (const kv of res['kvs'] as Array<{ key: Buffer; value: Buffer }>) kvs.set(kv.key.toString(), kv.value.toString());
  return { kvs, revision: revisionOf(res) };
}

/** Acknowledged writes of a load run: every key was written once, with a unique value. */
export interface WriteLog {
  acked: Map<string, { value: string; revision: number; startMs: number; atMs: number }>;
  failures: number;
  /** Errors seen (code: details), bounded. */
  errors: Map<string, number>;
  /** Time of the first acknowledgement of a put issued at or after `ms` (for outage measurements). */
  firstAckAfter(ms: number): number | undefined;
}

const MAX_ERROR_KINDS = 50;

/**
 * Concurrent writers, each putting fresh keys under `prefix` and recording every acknowledged
 * put. A writer rotates to the next member of `targets()` after a failure, as a client with
 * several endpoints does.
 */
export class WriteLoad {
  readonly log: WriteLog;
  private stopped = false;
  private readonly runs: Promise<void>[] = [];
  private readonly clients = new Map<string, EtcdGrpc>();

  constructor(
    private readonly prefix: string,
    private readonly targets: () => ClusterMember[],
    private readonly opts: { writers: number; putDeadlineMs?: number; pauseMs?: number },
  ) {
    assert(opts.writers > 0 && opts.writers <= 64);
    const acked: WriteLog['acked'] = new Map();
    this.log = {
      acked,
      failures: 0,
      errors: new Map(),
      firstAckAfter: (ms: number) => {
        let best: number | undefined;
        for (const a of acked.values()) if (a.startMs >= ms && (best === undefined || a.atMs < best)) best = a.atMs;
        return best;
      },
    };
  }

  start(): this {
    for (let w = 0; w < this.opts.writers; w++) this.runs.push(this.writer(w));
    return this;
  }

  private client(m: ClusterMember): EtcdGrpc {
    let c = this.clients.get(m.name);
    if (c === undefined) {
      c = new EtcdGrpc(m.clientHostPort);
      this.clients.set(m.name, c);
    }
    return c;
  }

  private async writer(w: number): Promise<void> {
    let seq = 0;
    let target = w;
    while (!this.stopped) {
      const ts = this.targets();
      if (ts.length === 0) {
        await sleepMs(50);
        continue;
      }
      const m = ts[target % ts.length]!;
      seq++;
      const key = `${this.prefix}w${String(w).padStart(2, '0')}/${String(seq).padStart(7, '0')}`;
      const value = `${w}:${seq}:${Math.random().toString(36).slice(2, 10)}`;
      const startMs = Date.now();
      try {
        const r = await this.client(m).unary('KV', 'Put', { key: Buffer.from(key), value: Buffer.from(value) }, this.opts.putDeadlineMs ?? 3_000);
        this.log.acked.set(key, { value, revision: revisionOf(r), startMs, atMs: Date.now() });
      } catch (e) {
        this.log.failures++;
        const err = e as { code?: number; details?: string; message?: string };
        const kind = `${err.code}: ${err.details ?? err.message}`;
        if (this.log.errors.has(kind) || this.log.errors.size < MAX_ERROR_KINDS) this.log.errors.set(kind, (this.log.errors.get(kind) ?? 0) + 1);
        target++;
        // A failed put may still commit later; its key is never reused, so it cannot be confused
        // with an acknowledged one.
        await sleepMs(20);
      }
      if (this.opts.pauseMs) await sleepMs(this.opts.pauseMs);
    }
  }

  async stop(): Promise<WriteLog> {
    this.stopped = true;
    await Promise.all(this.runs);
    for (const c of this.clients.values()) c.close();
    this.clients.clear();
    return this.log;
  }
}

/** Acknowledged keys missing or different in `kvs` (bounded list for a message). */
export function lostWrites(log: WriteLog, kvs: Map<string, string>, max = 20): string[] {
  const lost: string[] = [];
  for (const [k, a] of log.acked) {
    const have = kvs.get(k);
    if (have !== a.value) {
      lost.push(`${k}: acked ${a.value} at rev ${a.revision}, have ${have}`);
      if (lost.length >= max) break;
    }
  }
  return lost;
}

/** Count the occurrences of a log message (zap JSON lines' "msg") in a member's logs. */
export function countLogLines(m: ClusterMember, msg: RegExp): number {
  return m.logs().split('\n').filter((l) => msg.test(l)).length;
}

/** Time of the first log line matching `msg` logged at or after `sinceMs` (from zap's "ts"). */
export function firstLogLineAfter(m: ClusterMember, msg: RegExp, sinceMs: number): number | undefined {
  for (const line of m.logs().split('\n')) {
    if (!msg.test(line)) continue;
    const ts = /"ts":"([^"]+)"/.exec(line);
    if (!ts) continue;
    const t = Date.parse(ts[1]!);
    if (!Number.isNaN(t) && t >= sinceMs) return t;
  }
  return undefined;
}

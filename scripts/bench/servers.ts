// Starts a fresh single member or 3-member cluster of either system, checks it answers, stops it.
import assert from 'node:assert';
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import type { SystemName } from './table';

export interface Launcher {
  system: SystemName;
  /** Executable and leading arguments; etcd's flags are appended. */
  command: string;
  args: string[];
  env: NodeJS.ProcessEnv;
}

export interface Cluster {
  system: SystemName;
  endpoints: string[];
  pids: number[];
  dataDir: string;
  /** Stops every member (SIGTERM, then SIGKILL after STOP_GRACE_MS) and removes the data unless keepData. */
  stop(keepData?: boolean): Promise<void>;
  /**
   * Stops every member, then starts them again on the same data (same ports and flags) and returns
   * at once: the caller decides when the cluster is back (e.g. a read answers). `pids` is updated
   * in place. stopMs is how long the stop took.
   */
  restart(): Promise<{ stopMs: number }>;
  /** Why a member restarted by restart() has exited since, if one has. */
  exitedSinceRestart(): string | undefined;
}

const MAX_MEMBERS = 5;
const POLL_INTERVAL_MS = 200;
const HEALTH_CALL_TIMEOUT_MS = 4000;
const STOP_GRACE_MS = 15_000;

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const addr = s.address();
      assert(addr && typeof addr === 'object');
      const port = addr.port;
      s.close(() => resolve(port));
    });
  });
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** One bounded etcdctl call against all endpoints: its stdout, or null if it failed. */
function etcdctlOn(etcdctl: string, endpoints: string[], args: string[]): Promise<string | null> {
  return new Promise((resolve) => {
    execFile(
      etcdctl,
      [`--endpoints=${endpoints.join(',')}`, '--command-timeout=2s', '--dial-timeout=1s', ...args],
      { env: { ...process.env, ETCDCTL_API: '3' }, timeout: HEALTH_CALL_TIMEOUT_MS },
      (err, stdout) => resolve(err ? null : stdout),
    );
  });
}

/** One `etcdctl endpoint health` (the real client: a Get through quorum) against all endpoints. */
async function healthy(etcdctl: string, endpoints: string[]): Promise<boolean> {
  return (await etcdctlOn(etcdctl, endpoints, ['endpoint', 'health'])) !== null;
}

/**
 * The endpoints with the leader's first, as `etcdctl endpoint status` reports it (null if it names
 * no leader). Without --target-leader, etcd's benchmark gives its connections the endpoints in turn,
 * so with one connection the client talks to the first: leader first makes the one-connection range
 * rows of both systems measure the same path (a linearizable read through a follower asks the
 * leader first), whichever member won the election.
 */
async function leaderFirst(etcdctl: string, endpoints: string[]): Promise<string[] | null> {
  const stdout = await etcdctlOn(etcdctl, endpoints, ['endpoint', 'status']);
  if (stdout === null) return null;
  // Simple format: "endpoint, member ID, version, db size, is leader, ...", one line each.
  const leaders = stdout
    .split('\n')
    .map((line) => line.split(', '))
    .filter((f) => f.length > 4 && f[4] === 'true')
    .map((f) => f[0]);
  if (leaders.length !== 1 || !endpoints.includes(leaders[0])) return null;
  return [leaders[0], ...endpoints.filter((e) => e !== leaders[0])];
}

/** Whether `child` exited within `ms` (at once if it already has). */
export function waitExit(child: ChildProcess, ms: number): Promise<boolean> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(true);
  return new Promise((resolve) => {
    const t = setTimeout(() => resolve(false), ms);
    child.once('exit', () => {
      clearTimeout(t);
      resolve(true);
    });
  });
}

export interface StartOptions {
  members: number;
  /** Parent directory; a fresh sub-directory holds data and logs. */
  workDir: string;
  etcdctl: string;
  readyTimeoutMs: number;
}

/** Starts of a cluster whose member found its port taken, before the start counts as failed. */
const MAX_START_ATTEMPTS = 3;

/** A start that failed; `portTaken` when a member's log says its port was already bound. */
class StartError extends Error {
  constructor(
    message: string,
    readonly dataDir: string,
    readonly portTaken: boolean,
  ) {
    super(message);
  }
}

/**
 * freePort() hands out a port that was free a moment ago; an outgoing connection (a member's to
 * its peers, etcdctl's health checks) can take it before the member binds it (seen once in ~200
 * three-member starts: "listen EADDRINUSE"). Such a start is retried on fresh ports, bounded.
 */
export async function startCluster(l: Launcher, o: StartOptions): Promise<Cluster> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startClusterOnce(l, o);
    } catch (e) {
      if (!(e instanceof StartError) || !e.portTaken || attempt >= MAX_START_ATTEMPTS) throw e;
      fs.rmSync(e.dataDir, { recursive: true, force: true });
    }
  }
}

function anyLogSays(dataDir: string, names: string[], text: string): boolean {
  return names.some((n) => {
    try {
      return fs.readFileSync(path.join(dataDir, `${n}.log`), 'utf8').includes(text);
    } catch {
      return false;
    }
  });
}

async function startClusterOnce(l: Launcher, o: StartOptions): Promise<Cluster> {
  assert(o.members >= 1 && o.members <= MAX_MEMBERS);
  const dataDir = fs.mkdtempSync(path.join(o.workDir, `${l.system}-${o.members}m-`));
  const members: { name: string; clientPort: number; peerPort: number }[] = [];
  for (let i = 1; i <= o.members; i++) members.push({ name: `m${i}`, clientPort: await freePort(), peerPort: await freePort() });
  const initialCluster = members.map((m) => `${m.name}=http://127.0.0.1:${m.peerPort}`).join(',');
  const children: ChildProcess[] = [];
  let exited: string[] = [];
  const spawnAll = (logFlag: 'w' | 'a'): void => {
    const generation: string[] = [];
    exited = generation;
    children.length = 0;
    for (const m of members) {
      const args = [
        ...l.args,
        `--name=${m.name}`,
        `--data-dir=${path.join(dataDir, m.name)}`,
        `--listen-client-urls=http://127.0.0.1:${m.clientPort}`,
        `--advertise-client-urls=http://127.0.0.1:${m.clientPort}`,
        `--listen-peer-urls=http://127.0.0.1:${m.peerPort}`,
        `--initial-advertise-peer-urls=http://127.0.0.1:${m.peerPort}`,
        `--initial-cluster=${initialCluster}`,
        '--initial-cluster-state=new',
        '--initial-cluster-token=bench',
      ];
      const log = fs.openSync(path.join(dataDir, `${m.name}.log`), logFlag);
      const child = spawn(l.command, args, { env: l.env, stdio: ['ignore', log, log] });
      fs.closeSync(log);
      child.once('exit', (code, signal) => generation.push(`${m.name} exited (${signal ?? code})`));
      children.push(child);
    }
    pids.length = 0;
    for (const c of children) if (typeof c.pid === 'number') pids.push(c.pid);
  };
  const endpoints = members.map((m) => `127.0.0.1:${m.clientPort}`);
  const pids: number[] = [];
  spawnAll('w');

  const stopMembers = async (): Promise<void> => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGTERM');
    for (const c of children) {
      if (!(await waitExit(c, STOP_GRACE_MS))) {
        c.kill('SIGKILL');
        await waitExit(c, STOP_GRACE_MS);
      }
    }
  };
  const stop = async (keepData = false): Promise<void> => {
    await stopMembers();
    if (!keepData) fs.rmSync(dataDir, { recursive: true, force: true });
  };
  const restart = async (): Promise<{ stopMs: number }> => {
    const t0 = performance.now();
    await stopMembers();
    const stopMs = performance.now() - t0;
    spawnAll('a');
    return { stopMs };
  };
  const exitedSinceRestart = (): string | undefined => (exited.length > 0 ? exited.join(', ') : undefined);

  /** Stops what started (keeping its logs) and throws, saying whether a member found its port taken. */
  const failStart = async (message: string): Promise<never> => {
    await stop(true);
    throw new StartError(message, dataDir, anyLogSays(dataDir, members.map((m) => m.name), 'EADDRINUSE'));
  };
  const deadline = Date.now() + o.readyTimeoutMs;
  for (;;) {
    if (exited.length > 0) await failStart(`${l.system}: ${exited.join(', ')}; logs in ${dataDir}`);
    if (pids.length === members.length && (await healthy(o.etcdctl, endpoints))) {
      if (members.length === 1) break;
      const ordered = await leaderFirst(o.etcdctl, endpoints);
      if (ordered) {
        endpoints.splice(0, endpoints.length, ...ordered);
        break;
      }
    }
    if (Date.now() > deadline) await failStart(`${l.system}: ${o.members}-member cluster not healthy within ${o.readyTimeoutMs} ms; logs in ${dataDir}`);
    await sleep(POLL_INTERVAL_MS);
  }
  return { system: l.system, endpoints, pids, dataDir, stop, restart, exitedSinceRestart };
}

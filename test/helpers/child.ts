// Server processes started by tests: each runs under `timeout -s KILL <lifetime>` in its own
// process group (so a signal reaches the server behind `timeout`), all are killed and their
// temporary directories removed when the test runner exits, however it exits.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';

const live = new Set<ChildProcess>();
const tempDirs = new Set<string>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  const killAll = (): void => {
    for (const p of live) signalGroup(p, 'SIGKILL');
    live.clear();
    for (const d of tempDirs) fs.rmSync(d, { recursive: true, force: true });
    tempDirs.clear();
  };
  process.on('exit', killAll);
  for (const sig of ['SIGINT', 'SIGTERM'] as const) {
    process.once(sig, () => {
      killAll();
      process.exit(130);
    });
  }
}

export function exited(p: ChildProcess): boolean {
  return p.exitCode !== null || p.signalCode !== null;
}

export function signalGroup(p: ChildProcess, sig: NodeJS.Signals): void {
  if (p.pid === undefined || exited(p)) return;
  try {
    process.kill(-p.pid, sig);
  } catch {
    // already gone
  }
}

/** Resolves true once `p` has exited, false after `timeoutMs`. */
export function waitExit(p: ChildProcess, timeoutMs: number): Promise<boolean> {
  if (exited(p)) return Promise.resolve(true);
  return new Promise((resolve) => {
    const t = setTimeout(() => resolve(false), timeoutMs);
    p.once('exit', () => {
      clearTimeout(t);
      resolve(true);
    });
  });
}

/** SIGTERM, then SIGKILL after `graceMs`; resolves when the process is gone (or 5 s after SIGKILL). */
export async function stopGroup(p: ChildProcess, graceMs: number): Promise<void> {
  signalGroup(p, 'SIGTERM');
  if (!(await waitExit(p, graceMs))) {
    signalGroup(p, 'SIGKILL');
    await waitExit(p, 5_000);
  }
}

/**
 * Starts `bin args` with at most `lifetimeSec` to live. The server does not see the test's ETCD_*
 * variables (etcd warns about unknown ones, and they would change its configuration).
 */
export function spawnServer(bin: string, args: readonly string[], lifetimeSec: number, extraEnv: Readonly<Record<string, string>> = {}): ChildProcess {
  installExitHook();
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('ETCD')) env[k] = v;
  Object.assign(env, extraEnv);
  const p = spawn('/usr/bin/timeout', ['-s', 'KILL', String(lifetimeSec), bin, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
    env,
  });
  live.add(p);
  p.on('exit', () => live.delete(p));
  return p;
}

/** Removes `dir` when the test runner exits, unless releaseTempDir() removed it first. */
export function trackTempDir(dir: string): void {
  installExitHook();
  tempDirs.add(dir);
}

/** Removes a directory given to trackTempDir(); false if it was not tracked. */
export function releaseTempDir(dir: string): boolean {
  if (!tempDirs.delete(dir)) return false;
  fs.rmSync(dir, { recursive: true, force: true });
  return true;
}

// A data directory that can lose power: test/powerloss/unsynced_fs.py mounted over a backing
// directory. The file system holds what was written but not fsynced in memory only; powerOff()
// throws that away (all of it, or a random part of it, as a disk flushing in any order would),
// leaving in the backing directory just what a real disk would have after the power came back.
import assert from 'node:assert';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { REPO_ROOT } from './etcd-process';
import { trackTempDir, waitExit } from './child';

const FS_SCRIPT = path.join(REPO_ROOT, 'test', 'powerloss', 'unsynced_fs.py');
const MOUNT_TIMEOUT_MS = 10_000;

/** What survives a power loss of what was not fsynced: nothing ('drop'), the metadata but no data ('meta'), a random part ('random'). */
export type PowerLossMode = 'drop' | 'meta' | 'random';

export interface PowerLossDisk {
  /** The mount point: put data directories under it. */
  readonly dir: string;
  /**
   * The power goes: everything not yet durable is lost as `mode` says (the caller has killed
   * the processes writing here first). The file system is unmounted.
   */
  powerOff(mode: PowerLossMode, seed: number): Promise<void>;
  /** The power is back: mounts the surviving state again. */
  powerOn(): Promise<void>;
  /** Unmounts (keeping everything) and removes the directories. */
  dispose(): Promise<void>;
}

function mounted(dir: string): boolean {
  return fs.readFileSync('/proc/mounts', 'utf8').split('\n').some((l) => l.split(' ')[1] === dir);
}

function unmount(dir: string): void {
  if (!mounted(dir)) return;
  const r = spawnSync('fusermount', ['-u', '-z', dir], { encoding: 'utf8' });
  assert.equal(r.status, 0, `fusermount -u ${dir}: ${r.stderr}`);
}

/** Mount points of this process's disks, unmounted (lazily) if the test runner exits first. */
const mountedDirs = new Set<string>();
let exitHookInstalled = false;

function unmountAllOnExit(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const dir of mountedDirs) unmount(dir);
  });
}

/** Mounts a fresh, empty power-loss disk. */
export async function powerLossDisk(): Promise<PowerLossDisk> {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'powerloss-'));
  trackTempDir(root);
  const backing = path.join(root, 'disk');
  const dir = path.join(root, 'mnt');
  fs.mkdirSync(backing);
  fs.mkdirSync(dir);
  let daemon: ChildProcess | null = null;
  let stderr = '';

  const mount = async (): Promise<void> => {
    assert(daemon === null, 'already mounted');
    stderr = '';
    const p = spawn('/usr/bin/python3', [FS_SCRIPT, backing, dir], { stdio: ['ignore', 'pipe', 'pipe'] });
    p.stderr.on('data', (c: Buffer) => (stderr = (stderr + c.toString()).slice(-8000)));
    daemon = p;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`unsynced_fs did not mount within ${MOUNT_TIMEOUT_MS} ms: ${stderr}`)), MOUNT_TIMEOUT_MS);
      let out = '';
      p.stdout.on('data', (c: Buffer) => {
        out += c.toString();
        if (out.includes('mounted')) {
          clearTimeout(timer);
          resolve();
        }
      });
      p.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`unsynced_fs exited (${code}) before mounting: ${stderr}`));
      });
    });
    assert(mounted(dir), `${dir} is not mounted`);
  };

  /**
   * After a power-off the surviving state is already in the backing directory (the command's write
   * returns once it is), and a lazy unmount may abort the daemon's read of the device (libfuse then
   * exits 1, "Software caused connection abort"): only a clean unmount's exit status tells anything.
   */
  const unmountAndWait = async (clean: boolean): Promise<void> => {
    const p = daemon;
    daemon = null;
    unmount(dir);
    if (p !== null && !(await waitExit(p, MOUNT_TIMEOUT_MS))) {
      p.kill('SIGKILL');
      throw new Error(`unsynced_fs did not exit after its unmount: ${stderr}`);
    }
    if (clean && p !== null && p.exitCode !== 0) throw new Error(`unsynced_fs failed (exit ${p.exitCode}): ${stderr}`);
  };

  await mount();
  unmountAllOnExit();
  mountedDirs.add(dir);
  return {
    dir,
    async powerOff(mode, seed) {
      assert(daemon !== null, 'not mounted');
      assert(Number.isSafeInteger(seed) && seed >= 0);
      fs.writeFileSync(path.join(dir, '.powerloss'), `${mode} ${seed}`);
      await unmountAndWait(false);
    },
    powerOn: mount,
    async dispose() {
      if (daemon !== null) await unmountAndWait(true);
      mountedDirs.delete(dir);
      fs.rmSync(root, { recursive: true, force: true });
    },
  };
}

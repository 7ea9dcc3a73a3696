// One server per data directory. etcd gets this from bbolt's flock on member/snap/db (a second
// etcd on the same directory waits for it); Node has no flock, so the lock is a Linux abstract
// unix socket named after the directory's real path: binding it fails while another process holds
// it, and the kernel lets go of it when that process ends in any way (kill -9 included), so there
// is no stale lock file to clean up. Like etcd, a second server waits until the first is gone.
// Abstract sockets belong to a network namespace: two containers with their own namespaces sharing
// one volume are not kept apart by this (etcd's flock would); one pod, or one host, is.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import type { Logger } from '../log';

const RETRY_MS = 100;
const LOG_EVERY_MS = 5_000;

export interface DirLock {
  release(): void;
}

function socketName(dir: string): string {
  const real = fs.realpathSync(dir);
  return `\0etcd-ts-data-dir-${createHash('sha256').update(real).digest('hex').slice(0, 32)}`;
}

function tryBind(name: string): Promise<net.Server | null> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', (e: NodeJS.ErrnoException) => (e.code === 'EADDRINUSE' ? resolve(null) : reject(e)));
    s.listen({ path: name }, () => {
      // Nobody connects; it must not keep the process alive either.
      s.unref();
      resolve(s);
    });
  });
}

/** Takes the lock of `dir` (which must exist) if nobody holds it; null when another process does. */
export async function tryLockDir(dir: string): Promise<DirLock | null> {
  const s = await tryBind(socketName(dir));
  return s === null ? null : { release: () => s.close() };
}

/** Takes the lock of `dir` (which must exist), waiting while another process holds it. */
export async function lockDir(dir: string, log: Logger): Promise<DirLock> {
  const name = socketName(dir);
  let lastLogMs = 0;
  for (;;) {
    const s = await tryBind(name);
    if (s !== null) return { release: () => s.close() };
    const now = Date.now();
    if (now - lastLogMs >= LOG_EVERY_MS) {
      lastLogMs = now;
      log.warn('data directory is in use by another process; waiting for it to be released', { dir });
    }
    await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
  }
}

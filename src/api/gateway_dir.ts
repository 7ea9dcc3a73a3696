// The private directory that holds the JSON gateway's unix socket behind a TLS listener (see
// listener.ts): mode 0700, so only this user can reach gRPC there without a client certificate.
// A server stopped cleanly removes it; one killed (kill -9, OOM) cannot, so each start first removes
// the directories such servers left behind.
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';

export const GATEWAY_DIR_PREFIX = 'etcd-gw-';
export const GATEWAY_SOCKET_NAME = 'grpc.sock';
/** A socket or directory younger than this may belong to a server that is still starting. */
const STALE_AFTER_MS = 60_000;
/** Bound on the entries of the temp directory looked at per start. */
const MAX_SWEPT_DIRS = 1000;

export function createGatewayDir(tmpRoot: string): string {
  const dir = fs.mkdtempSync(path.join(tmpRoot, GATEWAY_DIR_PREFIX));
  fs.chmodSync(dir, 0o700);
  return dir;
}

/** Whether something accepts connections on the unix socket at `sock`; undefined if unsure. */
function listening(sock: string): Promise<boolean | undefined> {
  return new Promise((resolve) => {
    const c = net.connect({ path: sock });
    const done = (v: boolean | undefined): void => {
      c.destroy();
      resolve(v);
    };
    c.once('connect', () => done(true));
    // Only a refused connection proves the socket's server is gone.
    c.once('error', (e: NodeJS.ErrnoException) => done(e.code === 'ECONNREFUSED' ? false : undefined));
    c.setTimeout(1000, () => done(undefined));
  });
}

/**
 * Removes this user's gateway directories whose server is gone: the socket refuses connections (or
 * was never bound) and has been there for a minute. Returns the directories removed.
 */
export async function sweepStaleGatewayDirs(tmpRoot: string, nowMs = Date.now()): Promise<string[]> {
  const uid = process.getuid?.();
  const removed: string[] = [];
  let names: string[];
  try {
    names = fs.readdirSync(tmpRoot).filter((n) => n.startsWith(GATEWAY_DIR_PREFIX)).slice(0, MAX_SWEPT_DIRS);
  } catch {
    return removed;
  }
  for (const name of names) {
    const dir = path.join(tmpRoot, name);
    try {
      const st = fs.lstatSync(dir);
      if (!st.isDirectory() || (uid !== undefined && st.uid !== uid)) continue;
      const sock = path.join(dir, GATEWAY_SOCKET_NAME);
      let sockStat: fs.Stats | null = null;
      try {
        sockStat = fs.lstatSync(sock);
      } catch {
        // No socket: a start that died before binding it.
      }
      if (sockStat === null) {
        if (nowMs - st.mtimeMs < STALE_AFTER_MS) continue;
      } else {
        if (!sockStat.isSocket() || nowMs - sockStat.mtimeMs < STALE_AFTER_MS) continue;
        if ((await listening(sock)) !== false) continue;
      }
      fs.rmSync(dir, { recursive: true, force: true });
      removed.push(dir);
    } catch {
      // Another process removed it first, or it is not ours to touch.
    }
  }
  return removed;
}

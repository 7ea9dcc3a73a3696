// Making files and directory entries durable: what a rename or a create relies on after a power loss.
import fs from 'node:fs';
import path from 'node:path';

/** fsync of a file's data and size, off the event loop. */
export async function fsyncFile(file: string): Promise<void> {
  const fh = await fs.promises.open(file, 'r+');
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

/** Makes the directory's entries (a create, a rename, an unlink) durable. */
export function fsyncDir(dir: string): void {
  const fd = fs.openSync(dir, 'r');
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * mkdir -p whose result survives a power loss: each directory it creates is fsynced, and so is
 * the parent that gained its entry (a file system that journals metadata in order would commit
 * them with any later fsync; one that does not could lose a whole new data directory). Returns
 * the directories it created, outermost first.
 */
export function mkdirDurable(dir: string, mode = 0o700, unsafeNoFsync = false): string[] {
  const created: string[] = [];
  let d = path.resolve(dir);
  while (!fs.existsSync(d)) {
    created.unshift(d);
    const parent = path.dirname(d);
    if (parent === d) break;
    d = parent;
  }
  for (const c of created) {
    try {
      fs.mkdirSync(c, { mode });
    } catch (e) {
      // Made meanwhile by someone else: theirs to make durable.
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    }
  }
  if (!unsafeNoFsync) {
    for (const c of created) fsyncDir(c);
    if (created.length > 0) fsyncDir(path.dirname(created[0]!));
  }
  return created;
}

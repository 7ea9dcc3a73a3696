// Making files and directory entries durable: what a rename or a create relies on after a power loss.
import fs from 'node:fs';

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

// A leader's snapshot database on its way into the backend, kept where etcd keeps it:
// `member/snap/<index as 16 hex digits>.snap.db`. The order that makes installing one crash-safe
// (etcd's): this file is written and fsynced first, then the WAL records the snapshot (and drops
// the log before it), then the file is renamed over `db`. A power loss between the last two
// leaves a backend behind the WAL's snapshot, with this file beside it to finish the job at the
// next start; any other leftover file is stale and removed.
import fs from 'node:fs';
import path from 'node:path';
import { fsyncDir } from '../runtime/fsync';

const SNAP_DB_SUFFIX = '.snap.db';
/** Written under this name, renamed to its own once whole and fsynced. */
const PARTIAL_SUFFIX = '.part';

/** Where the database of the snapshot at `index` is kept until it is installed. */
export function snapshotDbPath(snapDir: string, index: number): string {
  return path.join(snapDir, `${index.toString(16).padStart(16, '0')}${SNAP_DB_SUFFIX}`);
}

/** Writes `db` for the snapshot at `index`, durably (file and directory) unless `unsafeNoFsync`; returns its path. */
export async function saveSnapshotDb(snapDir: string, index: number, db: Uint8Array, unsafeNoFsync: boolean): Promise<string> {
  const file = snapshotDbPath(snapDir, index);
  const partial = file + PARTIAL_SUFFIX;
  const fh = await fs.promises.open(partial, 'w', 0o600);
  try {
    await fh.writeFile(db);
    if (!unsafeNoFsync) await fh.sync();
  } finally {
    await fh.close();
  }
  fs.renameSync(partial, file);
  if (!unsafeNoFsync) fsyncDir(snapDir);
  return file;
}

/** Removes every snapshot database file (and partial one) in `snapDir` except `keep`. */
export function removeSnapshotDbs(snapDir: string, keep: string | null = null): string[] {
  const removed: string[] = [];
  for (const name of fs.readdirSync(snapDir)) {
    if (!name.endsWith(SNAP_DB_SUFFIX) && !name.endsWith(SNAP_DB_SUFFIX + PARTIAL_SUFFIX)) continue;
    const file = path.join(snapDir, name);
    if (file === keep) continue;
    fs.rmSync(file, { force: true });
    removed.push(file);
  }
  return removed;
}

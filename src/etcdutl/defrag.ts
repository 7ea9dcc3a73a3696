// `etcdutl defrag --data-dir`: rewrites the database of a data directory no server is using, so
// the file gives back the space deleted and compacted keys left free (etcd's offline defrag).
import fs from 'node:fs';
import path from 'node:path';
import { Backend } from '../backend/backend';
import { tryLockDir } from '../runtime/dir_lock';

export async function defragDataDir(dataDir: string): Promise<void> {
  const db = path.join(dataDir, 'member', 'snap', 'db');
  if (!fs.existsSync(db)) throw new Error(`open ${db}: no such file or directory`);
  // A running server holds the directory's lock; defragmenting under it would swap its file away.
  const lock = await tryLockDir(dataDir);
  if (lock === null) throw new Error('the data directory is in use by a running server');
  try {
    const backend = Backend.open(db, { flushIntervalMs: 0 });
    try {
      // Nothing else writes to an offline file, so no copy can be overtaken.
      if (!(await backend.defragment())) throw new Error('defragment gave up');
    } finally {
      await backend.close();
    }
  } finally {
    lock.release();
  }
}

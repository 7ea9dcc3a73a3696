// Data directories written before the WAL moved to segment files kept the log in an LMDB
// environment (member/wal/log.mdb). Opening one migrates it once: its contents are rewritten as
// the first segment (fsynced) before the old files are removed, so no acknowledged entry is lost.
import assert from 'node:assert';
import fs from 'node:fs';
import path from 'node:path';
import { open } from 'lmdb';
import type { Entry, HardState, SnapshotMetadata } from '../raft/types';
import { decodeEntry, decodeHardState, decodeSnapshotMeta, encodeIndexKey } from './codec';

export interface LegacyWal {
  identity: { memberId: bigint; clusterId: bigint; name: string };
  hardState: HardState;
  snapshot: SnapshotMetadata | null;
  entries: Entry[];
  /** Delete the LMDB files (call once their contents are durable elsewhere). */
  remove(): void;
}

export function migrateLegacyWal(dir: string): LegacyWal | null {
  const file = path.join(dir, 'log.mdb');
  if (!fs.existsSync(file)) return null;
  const root = open<Buffer, Buffer>({ path: file, keyEncoding: 'binary', encoding: 'binary', readOnly: true });
  try {
    const meta = root.openDB<Buffer, string>({ name: 'meta', keyEncoding: 'ordered-binary', encoding: 'binary' });
    const entriesDb = root.openDB<Buffer, Buffer>({ name: 'entries', keyEncoding: 'binary', encoding: 'binary' });
    const idBuf = meta.getBinary('identity');
    const remove = (): void => {
      for (const f of [file, `${file}-lock`]) fs.rmSync(f, { force: true, recursive: true });
    };
    // A member whose creation never finished: nothing to keep.
    if (idBuf === undefined) return null;
    const raw = JSON.parse(idBuf.toString()) as { memberId: string; clusterId: string; name: string };
    const hsBuf = meta.getBinary('hardstate');
    const snapBuf = meta.getBinary('snapshot');
    const snapshot = snapBuf ? decodeSnapshotMeta(snapBuf) : null;
    const after = snapshot ? snapshot.index : 0;
    const entries: Entry[] = [];
    for (const { value } of entriesDb.getRange({ start: encodeIndexKey(after + 1) })) {
      const e = decodeEntry(value);
      assert.equal(e.index, entries.length > 0 ? entries[entries.length - 1].index + 1 : after + 1, 'legacy WAL entries are not contiguous');
      entries.push(e);
    }
    return {
      identity: { memberId: BigInt(raw.memberId), clusterId: BigInt(raw.clusterId), name: raw.name },
      hardState: hsBuf ? decodeHardState(hsBuf) : { term: 0, vote: 0n, commit: 0 },
      snapshot,
      entries,
      remove,
    };
  } finally {
    root.close();
  }
}

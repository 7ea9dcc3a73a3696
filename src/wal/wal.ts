// The durable Raft log: entries, hard state and snapshot metadata in an LMDB environment of
// its own (<data-dir>/member/wal). Every save() resolves only after LMDB has made the commit
// durable (fdatasync), so an entry or vote is never acknowledged before it would survive a crash.
import assert from 'node:assert';
import fs from 'node:fs';
import path from 'node:path';
import { open, type Database, type RootDatabase } from 'lmdb';
import type { Entry, HardState, Snapshot, SnapshotMetadata } from '../raft/types';
import { decodeEntry, encodeEntry, encodeIndexKey, decodeHardState, encodeHardState, encodeSnapshotMeta, decodeSnapshotMeta } from './codec';

const HARD_STATE_KEY = 'hardstate';
const SNAPSHOT_KEY = 'snapshot';
const IDENTITY_KEY = 'identity';

/** Who this member is; written once when the member is created. */
export interface WalIdentity {
  memberId: bigint;
  clusterId: bigint;
  name: string;
}

export interface WalContents {
  identity: WalIdentity;
  hardState: HardState;
  snapshot: SnapshotMetadata | null;
  /** Entries after the snapshot index, contiguous. */
  entries: Entry[];
}

export class Wal {
  /** Index of the last stored entry, kept in memory (a reverse cursor per save was measurable). */
  private lastStoredIndex = -1;

  private constructor(
    private readonly root: RootDatabase<Buffer, Buffer>,
    private readonly entriesDb: Database<Buffer, Buffer>,
    private readonly metaDb: Database<Buffer, string>,
    readonly dir: string,
  ) {}

  /** A write we did not wait for failed: the log can no longer be trusted. */
  private onAsyncError(e: unknown): void {
    throw e instanceof Error ? e : new Error(String(e));
  }

  static open(dir: string): Wal {
    fs.mkdirSync(dir, { recursive: true });
    const root = open<Buffer, Buffer>({
      path: path.join(dir, 'log.mdb'),
      keyEncoding: 'binary',
      encoding: 'binary',
      // The WAL is the durability source: commits must reach the disk before they resolve.
      noSync: false,
    });
    const entriesDb = root.openDB<Buffer, Buffer>({ name: 'entries', keyEncoding: 'binary', encoding: 'binary' });
    const metaDb = root.openDB<Buffer, string>({ name: 'meta', keyEncoding: 'ordered-binary', encoding: 'binary' });
    return new Wal(root, entriesDb, metaDb, dir);
  }

  /** Whether this log belongs to a member already (create() completed). */
  hasIdentity(): boolean {
    return this.metaDb.getBinary(IDENTITY_KEY) !== undefined;
  }

  /** Create a new member's log. Fails if one exists already. */
  async create(identity: WalIdentity): Promise<void> {
    assert(this.metaDb.getBinary(IDENTITY_KEY) === undefined, 'WAL already has an identity');
    const body = JSON.stringify({
      memberId: identity.memberId.toString(),
      clusterId: identity.clusterId.toString(),
      name: identity.name,
    });
    await this.metaDb.put(IDENTITY_KEY, Buffer.from(body));
  }

  readAll(): WalContents {
    const idBuf = this.metaDb.getBinary(IDENTITY_KEY);
    assert(idBuf !== undefined, `WAL at ${this.dir} has no identity`);
    const raw = JSON.parse(idBuf.toString()) as { memberId: string; clusterId: string; name: string };
    const identity: WalIdentity = { memberId: BigInt(raw.memberId), clusterId: BigInt(raw.clusterId), name: raw.name };
    const hsBuf = this.metaDb.getBinary(HARD_STATE_KEY);
    const hardState = hsBuf ? decodeHardState(hsBuf) : { term: 0, vote: 0n, commit: 0 };
    const snapBuf = this.metaDb.getBinary(SNAPSHOT_KEY);
    const snapshot = snapBuf ? decodeSnapshotMeta(snapBuf) : null;
    const entries: Entry[] = [];
    const after = snapshot ? snapshot.index : 0;
    for (const { value } of this.entriesDb.getRange({ start: encodeIndexKey(after + 1) })) {
      const e = decodeEntry(value);
      if (entries.length > 0) {
        assert.equal(e.index, entries[entries.length - 1].index + 1, 'WAL entries are not contiguous');
      } else {
        assert.equal(e.index, after + 1, 'WAL does not continue from its snapshot');
      }
      entries.push(e);
    }
    assert(hardState.commit <= (entries.length ? entries[entries.length - 1].index : after),
      'WAL hard state commits past its last entry');
    return { identity, hardState, snapshot, entries };
  }

  /**
   * Persist what a Raft Ready asks for, durably, in one LMDB commit. Entries replace any
   * existing entries at the same or later indexes (a new leader may overwrite an uncommitted tail).
   */
  async save(hardState: HardState | null, entries: Entry[], snapshot: Snapshot | null, mustSync = true): Promise<number> {
    if (!hardState && entries.length === 0 && !snapshot) return 0;
    let bytes = 0;
    const done = this.root.transaction(() => {
      if (snapshot) {
        const meta = encodeSnapshotMeta(snapshot.metadata);
        this.metaDb.putSync(SNAPSHOT_KEY, meta);
        this.removeRange(0, snapshot.metadata.index + 1);
        this.lastStoredIndex = -1;
      }
      if (entries.length > 0) {
        const first = entries[0].index;
        const existingLast = this.lastIndex();
        if (existingLast >= first) this.removeRange(first, existingLast + 1);
        this.lastStoredIndex = entries[entries.length - 1].index;
        for (let i = 0; i < entries.length; i++) {
          const e = entries[i];
          assert.equal(e.index, first + i, 'entries to save are not contiguous');
          const buf = encodeEntry(e);
          bytes += buf.length;
          this.entriesDb.putSync(encodeIndexKey(e.index), buf);
        }
      }
      if (hardState) this.metaDb.putSync(HARD_STATE_KEY, encodeHardState(hardState));
    });
    // Only a new commit index changed (etcd-raft's MustSync is false): losing it in a crash
    // is harmless, Raft learns it again. LMDB commits in order, so the next durable save
    // carries it anyway; do not wait for the fsync.
    if (mustSync) await done;
    else done.catch((e) => this.onAsyncError(e));
    return bytes;
  }

  /** Drop entries before `index` (they are covered by a snapshot that is already durable). */
  async compact(index: number, snapshot: SnapshotMetadata): Promise<void> {
    await this.root.transaction(() => {
      this.metaDb.putSync(SNAPSHOT_KEY, encodeSnapshotMeta(snapshot));
      this.removeRange(0, index);
    });
  }

  private lastIndex(): number {
    if (this.lastStoredIndex >= 0) return this.lastStoredIndex;
    this.lastStoredIndex = 0;
    for (const key of this.entriesDb.getKeys({ reverse: true, limit: 1 })) {
      this.lastStoredIndex = Number(key.readBigUInt64BE(0));
    }
    return this.lastStoredIndex;
  }

  /** Remove entries with lo <= index < hi; only inside a transaction. */
  private removeRange(lo: number, hi: number): void {
    const keys = [...this.entriesDb.getKeys({ start: encodeIndexKey(lo), end: encodeIndexKey(hi) })];
    for (const k of keys) this.entriesDb.removeSync(k);
  }

  async close(): Promise<void> {
    await this.root.flushed;
    await this.root.close();
  }
}

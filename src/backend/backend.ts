// The LMDB environment holding the applied state (etcd's member/snap/db).
//
// Writes happen in LMDB transactions: one per batch(), or, with a batch interval (the server's
// case, like etcd's batch transaction), one shared by the batches of up to that long. They are
// not durable when batch() returns: the Raft WAL is the durability source, and the consistent
// index written in the same transaction makes replaying the WAL after a crash idempotent.
//
// Across a power loss the file must stay whole, whatever reached the disk: each commit fdatasyncs
// its data pages before it writes the meta page that points at them (LMDB's MDB_NOMETASYNC; that
// meta page reaches the disk with the next commit's sync or a flush). LMDB never overwrites the
// pages of the last two committed trees, so the newest meta page on disk always points at pages
// that are there: a power loss costs at most the last commit, which the WAL replays.
import assert from 'node:assert';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { open, type Database, type RangeOptions, type RootDatabase, type RootDatabaseOptions, type Transaction } from 'lmdb';
import { fsyncDir, fsyncFile } from '../runtime/fsync';
import { BBOLT_MAGIC, BBOLT_PAGE_HEADER_BYTES } from './bbolt_format';
import { Crc32c } from './crc32c';

export type SubDb = Database<Buffer, Buffer>;

const META_DB = 'meta';
const CONSISTENT_INDEX_KEY = 'consistent_index';
const CI_KEY_BYTES = Buffer.from(CONSISTENT_INDEX_KEY);
/** The consistent index's 8 big-endian bytes, rewritten per setConsistentIndex. */
const CI_SCRATCH = Buffer.alloc(8);
/** Written by flushed() in a durable commit; left out of hash(). */
const FLUSH_MARKER_KEY = 'flush_marker';
const FLUSH_MARKER_BYTES = Buffer.from(FLUSH_MARKER_KEY);
const FLUSH_MARKER_VALUE = Buffer.from([1]);
/**
 * lmdb-js TransactionFlags ABORTABLE | SYNCHRONOUS_COMMIT, plus LMDB's MDB_NOMETASYNC (lmdb-js
 * hands bits 0xf0000 to mdb_txn_begin): data pages fdatasynced before the meta page is written.
 */
const TXN_FLAGS_DATA_SYNC = 0x1 | 0x2 | 0x40000;
/**
 * ABORTABLE | SYNCHRONOUS_COMMIT | MDB_NOSYNC: no fsync at all (--unsafe-no-fsync). A power loss
 * can then persist a meta page without the pages it points at: the file is lost, not just the
 * last writes.
 */
const TXN_FLAGS_NO_FSYNC = 0x1 | 0x2 | 0x10000;
/**
 * The snapshot goes in chunks of this size. etcd's are 32 KiB (snapshotSendBufferSize); a client
 * takes any size its receive limit allows (4 MiB by default in grpc's clients). Each chunk is a
 * file read, a message and its frame: at 32 KiB a 32 MB snapshot took ~0.5 s to stream here.
 */
export const SNAPSHOT_CHUNK_BYTES = 256 * 1024;
const DEFAULT_MAP_SIZE_BYTES = 8 * 1024 * 1024 * 1024;
/** Named sub-databases are few and fixed (meta, kv, lease, members, ...). */
const MAX_SUB_DBS = 32;
/** Callbacks queued for after the running batch commits: a few per subsystem, not per write. */
const MAX_AFTER_COMMIT = 1024;
/**
 * Pages read through the map (a range, the key index's rebuild at start-up) stay mapped, so
 * resident, until the file is unmapped: the file grown by this much since the last remap is
 * when a background flush remaps it (~0.8 ms), and below this size start-up does not. Only
 * growth, not time: each close and reopen of an lmdb-js environment keeps ~3 KB (measured over
 * 2500 remaps with a collection after each), so remaps are bounded by how much the file grows,
 * not by how long the server runs.
 */
const REMAP_AFTER_GROWTH_BYTES = 8 * 1024 * 1024;

export interface BackendOptions {
  mapSizeBytes?: number;
  /**
   * true: every batch() is flushed to disk, meta page included, before it returns (lmdb-js
   * overlapping sync): blocks the event loop for two fsyncs per batch (~3-6 ms here).
   * false (default): each commit syncs its data pages, not its meta page (see the top of this
   * file): a power loss may undo the last commit, never damage the file.
   */
  durableCommits?: boolean;
  /**
   * etcd's --unsafe-no-fsync: commits and flushes never fsync. Survives a process crash, not a
   * power loss (which may leave a file LMDB cannot open). For tests and throwaway members.
   */
  unsafeNoFsync?: boolean;
  /**
   * Period of the background sync that makes the last commit's meta page durable (and remaps the
   * file as it grows) when durableCommits is false; 0 disables. Default 100 (etcd's batch interval).
   */
  flushIntervalMs?: number;
  /**
   * > 0 (and durableCommits false): batches share one open LMDB transaction, committed this long
   * after its first batch, after batchLimit batches, or when something needs the file itself
   * (flushed(), a snapshot, a remap, close). etcd's --backend-batch-interval. Reads in this
   * process go through the open transaction, so they see every batch at once. 0 (default): each
   * batch commits before batch() returns.
   */
  batchIntervalMs?: number;
  /** Batches sharing one transaction at most (etcd's --backend-batch-limit counts writes). Default 10000. */
  batchLimit?: number;
}

/** etcd's --backend-batch-limit default. */
const DEFAULT_BATCH_LIMIT = 10_000;
/** Bounds of the options: a shared transaction holds its dirty pages in memory until it commits. */
export const MAX_BATCH_INTERVAL_MS = 10_000;
export const MAX_BATCH_LIMIT = 1_000_000;

/**
 * Copies a defragmentation makes before it gives up. Writes wait while one is made, so only a
 * write that could not wait (releaseWrites) spoils a copy.
 */
const MAX_DEFRAG_TRIES = 5;

/** A sub-database opened with a decoder that hands out lmdb-js's read buffer (scanRecordViews). */
interface RecordView {
  env: RootDatabase<Buffer, Buffer>;
  db: Database<{ bytes: Buffer; size: number }, Buffer>;
}

const EMPTY_VIEW: Buffer = Buffer.alloc(0);

/** Gets each record of a scan: `value`'s first `valueBytes` bytes are valid only during the call. */
export type RecordVisitor = (key: Buffer, value: Buffer, valueBytes: number) => void;

/** Backend.openHash(): step until false, then digest; close if given up before. */
export interface BackendHash {
  step(maxRecords: number): boolean;
  digest(): number;
  close(): void;
}

/** A record scan's step found the backend's file swapped or closed under it (see openRecordScan). */
export class RecordScanAborted extends Error {}

/** One sub-database's part of a RecordScan: keys from `start` (to `end`, exclusive); all when absent. */
interface ScanSegment {
  view: RecordView;
  start?: Buffer;
  end?: Buffer;
}

/** A scan in steps under one read transaction: Backend.openRecordScan(), Backend.openHash(). */
export class RecordScan {
  private segment = 0;
  /** The last key visited in the current segment; null before its first. */
  private last: Buffer | null = null;
  private entered = false;
  private finished = false;
  private aborted = false;

  constructor(
    private readonly segments: ScanSegment[],
    private readonly txn: Transaction,
    private readonly onClose: () => void,
  ) {}

  /**
   * Visits up to `maxRecords` more records in key order, each segment's after the one before
   * (`enter` is told each segment's index as it begins, even one without records); false once
   * the scan is past its end. Throws RecordScanAborted if the file was swapped or closed since
   * the last step.
   */
  step(maxRecords: number, visit: RecordVisitor, enter?: (segment: number) => void): boolean {
    assert(maxRecords >= 1);
    if (this.aborted) throw new RecordScanAborted('the database file was swapped or closed during the scan');
    assert(!this.finished, 'a step of a finished record scan');
    let records = 0;
    while (records < maxRecords && this.segment < this.segments.length) {
      const seg = this.segments[this.segment]!;
      if (!this.entered) {
        this.entered = true;
        enter?.(this.segment);
      }
      const want = maxRecords - records;
      const range: RangeOptions = { limit: want, transaction: this.txn };
      // lmdb-js tells a range without a start by the property's absence.
      if (this.last !== null) {
        range.start = this.last;
        range.exclusiveStart = true;
      } else if (seg.start !== undefined) range.start = seg.start;
      if (seg.end !== undefined) range.end = seg.end;
      let got = 0;
      let last: Buffer | null = null;
      for (const { key, value } of seg.view.db.getRange(range)) {
        visit(key, value.bytes, value.size);
        last = key;
        got++;
      }
      records += got;
      if (got < want) {
        this.segment++;
        this.last = null;
        this.entered = false;
      } else if (last !== null) this.last = Buffer.from(last);
    }
    if (this.segment === this.segments.length) this.close();
    return !this.finished;
  }

  /** Ends the scan and its read transaction (again: nothing). */
  close(): void {
    if (this.finished) return;
    this.finished = true;
    this.txn.done();
    this.onClose();
  }

  /** The backend's file is going away: the next step throws. */
  abort(): void {
    if (this.finished) return;
    this.aborted = true;
    this.close();
  }
}

interface WriteHold {
  released: Promise<void>;
  release: () => void;
}

/**
 * The open transaction batches share. `finish` is lmdb-js's own completion of the transaction:
 * transactionSync keeps a transaction open while its callback's result is an unsettled thenable
 * and hands that thenable its continuation; calling it commits, synchronously.
 */
interface SharedTxn {
  finish: (result: unknown) => unknown;
  batches: number;
  timer: NodeJS.Timeout;
}

const DEFAULT_FLUSH_INTERVAL_MS = 100;

function openEnv(filePath: string, mapSizeBytes: number, durableCommits: boolean): RootDatabase<Buffer, Buffer> {
  return open<Buffer, Buffer>({
    path: filePath,
    noSubdir: true,
    maxDbs: MAX_SUB_DBS,
    mapSize: mapSizeBytes,
    keyEncoding: 'binary',
    encoding: 'binary',
    // Values are read once per request; lmdb-js's object cache would only duplicate them.
    cache: false,
    // With overlapping sync every synchronous commit waits for the previous flush (~5 ms
    // here); apply batches commit without fsync instead and flushed() forces one.
    overlappingSync: durableCommits,
    // Commits pwrite their dirty pages, as bbolt does, rather than writing into a shared map:
    // the kernel then has no mapped page to write-protect (a TLB shootdown each, expensive on
    // these VMs) when a flush writes it back, nor a fault when the next commit dirties it again.
    // With the write map, 4 KiB values at 100 clients spent 22% of the server's CPU in msync and
    // 8% in page faults (278-303 -> 141 µs of CPU per put without it); one client's 256-byte
    // puts lose ~8% (about 7 pwrites per commit instead of none; 8 alternating pairs).
    // A data file made with the write map (sized to the map, sparse) opens as it is.
    useWritemap: false,
  });
}

export class Backend {
  private env: RootDatabase<Buffer, Buffer>;
  private readonly dbs = new Map<string, SubDb>();
  private readonly handles = new Map<string, SubDb>();
  /** scanRecordViews()'s handles, each for the environment it was opened in. */
  private readonly views = new Map<string, RecordView>();
  /** openRecordScan()'s scans not yet closed. */
  private readonly scans = new Set<RecordScan>();
  private readonly meta: SubDb;
  private depth = 0;
  /** Counts outer batches, so callers can tell one batch from the next. */
  private seq = 0;
  private afterCommit: Array<() => void> = [];
  private ci: number;
  private closed = false;
  private defragging: Promise<boolean> | null = null;
  /** True only while an old environment finishes closing during defragment(). */
  private swapping = false;
  /**
   * Set while a defragmentation copies the file: no batch may run until it is released (etcd
   * blocks applies for its defragmentation too). The apply path waits on writesHeld().
   */
  private writeHold: WriteHold | null = null;

  private readonly durableCommits: boolean;
  private readonly unsafeNoFsync: boolean;
  /** Flags of a batch's own transaction, or of the shared one (when not durableCommits). */
  private readonly txnFlags: number;
  private dirty = false;
  private flushTimer: NodeJS.Timeout | null = null;
  private flushing: Promise<void> | null = null;
  private backgroundFlushes = 0;
  private flushPaused = false;
  /** batchSeq() when the last completed sync started: every batch up to it is on disk. */
  private syncedSeq = 0;
  /** batchSeq() at the last commit: every batch up to it is in the file (the page cache). */
  private committedSeq = 0;
  private readonly batchIntervalMs: number;
  private readonly batchLimit: number;
  private shared: SharedTxn | null = null;
  private sharedCommits = 0;
  /** Told how long each commit of a shared transaction took (etcd_disk_backend_commit_duration_seconds). */
  commitObserver: ((seconds: number) => void) | null = null;
  /** Told when the batch interval's timer could not commit (the process cannot go on); else it throws. */
  commitFailed: ((e: unknown) => void) | null = null;
  /** lmdb-js work on another thread that reads the environment (backups). */
  private envUsers = 0;
  /** File size at the last remap. */
  private bytesAtRemap = 0;
  private remaps = 0;

  private constructor(
    readonly filePath: string,
    private readonly mapSizeBytes: number,
    opts: BackendOptions,
  ) {
    this.durableCommits = opts.durableCommits ?? false;
    this.unsafeNoFsync = opts.unsafeNoFsync ?? false;
    assert(!(this.durableCommits && this.unsafeNoFsync), 'durableCommits and unsafeNoFsync together');
    this.txnFlags = this.unsafeNoFsync ? TXN_FLAGS_NO_FSYNC : TXN_FLAGS_DATA_SYNC;
    this.batchIntervalMs = this.durableCommits ? 0 : (opts.batchIntervalMs ?? 0);
    this.batchLimit = opts.batchLimit ?? DEFAULT_BATCH_LIMIT;
    assert(Number.isSafeInteger(this.batchIntervalMs) && this.batchIntervalMs >= 0 && this.batchIntervalMs <= MAX_BATCH_INTERVAL_MS, 'batchIntervalMs out of range');
    assert(Number.isSafeInteger(this.batchLimit) && this.batchLimit >= 1 && this.batchLimit <= MAX_BATCH_LIMIT, 'batchLimit out of range');
    this.env = openEnv(filePath, mapSizeBytes, this.durableCommits);
    const intervalMs = opts.flushIntervalMs ?? DEFAULT_FLUSH_INTERVAL_MS;
    if (!this.durableCommits && intervalMs > 0) {
      this.flushTimer = setInterval(() => this.backgroundFlush(), intervalMs);
      this.flushTimer.unref();
    }
    this.meta = this.subDb(META_DB);
    const raw = this.meta.getBinary(Buffer.from(CONSISTENT_INDEX_KEY));
    this.ci = raw ? Number(Buffer.from(raw).readBigUInt64BE(0)) : 0;
    assert(Number.isSafeInteger(this.ci));
    this.bytesAtRemap = this.sizeBytes();
  }

  /** Opens (creating if needed) the database file at `filePath`. */
  static open(filePath: string, opts?: BackendOptions): Backend {
    fs.mkdirSync(path.dirname(filePath), { recursive: true });
    // LMDB trusts the file it maps: a foreign one crashes the process (a segmentation fault).
    assertLmdbFile(filePath);
    return new Backend(filePath, opts?.mapSizeBytes ?? DEFAULT_MAP_SIZE_BYTES, opts ?? {});
  }

  /**
   * A named sub-database (binary keys and values). The returned handle stays valid across
   * defragment(), which swaps the underlying environment.
   */
  subDb(name: string): SubDb {
    const existing = this.handles.get(name);
    if (existing) return existing;
    this.dbs.set(name, this.env.openDB<Buffer, Buffer>({ name, keyEncoding: 'binary', encoding: 'binary', cache: false }));
    assert(this.dbs.size <= MAX_SUB_DBS, 'too many sub-databases');
    // Bound methods are cached per environment generation: the proxy costs one map lookup.
    let boundFor: SubDb | undefined;
    const bound = new Map<string | symbol, unknown>();
    const handle = new Proxy({} as SubDb, {
      get: (_target, prop) => {
        const db = this.dbs.get(name);
        if (!db) assert.fail(`sub-database ${name} is not open`);
        if (boundFor !== db) {
          bound.clear();
          boundFor = db;
        }
        const cached = bound.get(prop);
        if (cached !== undefined) return cached;
        const v = (db as unknown as Record<string | symbol, unknown>)[prop];
        if (typeof v !== 'function') return v;
        const fn = (v as (...a: unknown[]) => unknown).bind(db);
        bound.set(prop, fn);
        return fn;
      },
    });
    this.handles.set(name, handle);
    return handle;
  }

  /**
   * Runs fn in a write transaction: its own, or the shared one (see batchIntervalMs). A nested
   * call joins the outer one. If fn throws, what it wrote is undone (and nothing else).
   */
  batch<T>(fn: () => T): T {
    assert(!this.closed, 'backend is closed');
    assert(!this.swapping, 'backend is swapping files after defragment');
    if (this.writeHold !== null && this.depth === 0) assert.fail('backend write while writes are held for a defragmentation');
    if (this.depth > 0) {
      this.depth++;
      try {
        return fn();
      } finally {
        this.depth--;
      }
    }
    const ciBefore = this.ci;
    this.depth = 1;
    this.seq++;
    let result: T;
    try {
      if (this.batchIntervalMs > 0) result = this.sharedBatch(fn);
      else {
        result = this.durableCommits ? this.env.transactionSync(fn) : this.env.transactionSync(fn, this.txnFlags);
        this.committedSeq = this.seq;
        this.dirty = true;
      }
    } catch (e) {
      // The transaction was aborted: forget what it would have done. (In-memory state that
      // callers changed inside it is theirs to discard: for the apply path this is fatal.)
      this.ci = ciBefore;
      this.afterCommit = [];
      throw e;
    } finally {
      this.depth = 0;
    }
    this.runAfterCommit();
    if (this.shared !== null && this.shared.batches >= this.batchLimit) this.commitShared();
    return result;
  }

  /** fn in the shared transaction: as a child transaction of the open one, else opening it. */
  private sharedBatch<T>(fn: () => T): T {
    if (this.shared !== null) {
      // A child transaction (LMDB's nested transaction, ~2 µs here): a throw undoes this batch
      // alone, not the batches before it, whose answers may already have gone out.
      const result = this.env.childTransaction(fn) as T;
      this.shared.batches++;
      return result;
    }
    let finish: ((result: unknown) => unknown) | null = null;
    const held: PromiseLike<unknown> = {
      then: (onCommit) => {
        finish = onCommit as (result: unknown) => unknown;
        return undefined as unknown as PromiseLike<never>;
      },
    };
    let result!: T;
    this.env.transactionSync(() => {
      result = fn();
      return held;
    }, this.txnFlags);
    // lmdb-js took the thenable synchronously, or the transaction would commit at some later
    // turn nobody controls.
    if (finish === null) assert.fail('lmdb-js did not hold the shared transaction open');
    const timer = setTimeout(() => this.commitOnTimer(), this.batchIntervalMs);
    this.shared = { finish, batches: 1, timer };
    return result;
  }

  /**
   * Commits the shared transaction now, if one is open (synchronously). A failed commit throws:
   * the batches in it were applied in memory and may have been answered, so the caller (a timer
   * at worst) must not carry on; the WAL holds them for the restart.
   */
  private commitShared(): void {
    const s = this.shared;
    if (s === null) return;
    assert(this.depth === 0, 'committing the shared transaction inside a batch');
    this.shared = null;
    clearTimeout(s.timer);
    const t0 = process.hrtime.bigint();
    s.finish(undefined);
    this.committedSeq = this.seq;
    this.dirty = true;
    this.sharedCommits++;
    this.commitObserver?.(Number(process.hrtime.bigint() - t0) / 1e9);
  }

  private commitOnTimer(): void {
    try {
      this.commitShared();
    } catch (e) {
      if (this.commitFailed === null) throw e;
      this.commitFailed(e);
    }
  }

  /** The id of the last transaction committed to the file (a shared one still open is not). */
  committedTxnId(): number {
    return (this.env.getStats() as LmdbStats).lastTxnId;
  }

  /** Commits of shared transactions so far (for tests and diagnostics). */
  sharedCommitCount(): number {
    return this.sharedCommits;
  }

  /**
   * Writes the map's dirty pages back on libuv's thread pool (mdb_env_sync), without LMDB's
   * writer lock: a flush by commit (what flushed() does) holds that lock through two fsyncs, and
   * every apply transaction on the event loop waited behind it (measured: ~9% of the server's
   * CPU profile under a put load was transactionSync blocked on the lock). The WAL, not this
   * flush, is what makes writes durable; this bounds how much the WAL must replay.
   */
  private backgroundFlush(): void {
    if (!this.dirty || this.flushing || this.closed || this.swapping || this.flushPaused) return;
    // A failed sync leaves `dirty` set and the next tick tries again; a remap that breaks an
    // invariant throws out of the fulfilment handler, uncaught (the process stops).
    void this.sync().then(
      () => {
        this.backgroundFlushes++;
        this.remapIfGrown();
      },
      () => undefined,
    );
  }

  /**
   * One mdb_env_sync on libuv's thread pool (the only kind of flush this backend makes, so that
   * lmdb-js never holds a pending asynchronous write: see releaseMappedPages()).
   */
  private sync(): Promise<void> {
    assert(!this.flushing, 'one sync at a time');
    const startSeq = this.committedSeq;
    this.dirty = false;
    if (this.unsafeNoFsync) {
      this.syncedSeq = Math.max(this.syncedSeq, startSeq);
      return Promise.resolve();
    }
    const env = this.env as unknown as { sync(cb: (err?: Error | null) => void): void };
    let settled = false;
    const flushing = new Promise<void>((resolve, reject) => {
      const done = (err?: Error | null): void => {
        settled = true;
        this.flushing = null;
        if (err) {
          this.dirty = true;
          reject(err);
          return;
        }
        this.syncedSeq = Math.max(this.syncedSeq, startSeq);
        resolve();
      };
      try {
        env.sync(done);
      } catch (e) {
        done(e as Error);
      }
    });
    if (!settled) this.flushing = flushing;
    return flushing;
  }

  private remapIfGrown(): void {
    const grownBytes = this.sizeBytes() - this.bytesAtRemap;
    if (grownBytes < REMAP_AFTER_GROWTH_BYTES) return;
    // Under a steady load a shared transaction is nearly always open: commit it early rather
    // than never remap. (Called from a sync's continuation, never inside a batch.)
    this.commitShared();
    this.releaseMappedPages();
  }

  /**
   * After start-up read the whole file (the key index's rebuild): remaps when the file is large
   * enough for its pages to matter (a fresh server's is not, and a remap costs it ~5 MiB).
   */
  releaseMappedPagesAfterStart(): boolean {
    if (this.sizeBytes() < REMAP_AFTER_GROWTH_BYTES) return false;
    // The WAL's replay may have left a shared transaction open.
    this.commitShared();
    return this.releaseMappedPages();
  }

  /**
   * Unmaps the database file and maps it again, so that the pages reads left mapped (start-up's
   * read of everything, a full range) stop counting in our resident size; they stay in the page
   * cache, and what is read next faults back in. (Through LMDB's write map, which this backend
   * used before, every page written stayed mapped too: 100k keys loaded left ~34 MiB resident.)
   * Synchronous, and only when nothing holds the environment (a batch, a sync, a backup, a
   * swap); answers whether it remapped. Durable data is unaffected: commits wrote their pages
   * with pwrite, into the page cache, and the next sync writes them to disk.
   */
  releaseMappedPages(): boolean {
    if (this.closed || this.depth > 0 || this.shared !== null || this.flushing || this.swapping || this.defragging || this.envUsers > 0) return false;
    const old = this.env;
    void old.close();
    // lmdb-js closes at once unless an asynchronous write of its own is pending, and this
    // backend makes none (sync() above instead of an async commit).
    if ((old as unknown as { status?: string }).status !== 'closed') assert.fail('lmdb-js deferred closing the environment');
    this.openEnvAndDbs();
    this.bytesAtRemap = this.sizeBytes();
    this.remaps++;
    return true;
  }

  /** Runs work that reads the environment from another thread: no remap until it ends. */
  private async withEnvUser<T>(work: () => Promise<T>): Promise<T> {
    this.envUsers++;
    try {
      return await work();
    } finally {
      this.envUsers--;
    }
  }

  /**
   * Read transactions held open beyond a request (etcd_mvcc_db_open_read_transactions): the
   * copies a snapshot or a defragmentation makes under one read transaction on lmdb-js's thread.
   * A request's reads finish within its turn of the event loop, so none is ever open at a scrape.
   */
  openReadTransactions(): number {
    return this.envUsers;
  }

  /** Completed releaseMappedPages() calls (for tests and diagnostics). */
  remapCount(): number {
    return this.remaps;
  }

  private openEnvAndDbs(): void {
    this.env = openEnv(this.filePath, this.mapSizeBytes, this.durableCommits);
    for (const name of this.dbs.keys()) {
      this.dbs.set(name, this.env.openDB<Buffer, Buffer>({ name, keyEncoding: 'binary', encoding: 'binary', cache: false }));
    }
  }

  /** Background flushes completed (for tests and diagnostics). */
  backgroundFlushCount(): number {
    return this.backgroundFlushes;
  }

  /** Identifies the running (or last) outer batch. */
  batchSeq(): number {
    return this.seq;
  }

  isClosed(): boolean {
    return this.closed;
  }

  /** True while a batch() transaction is running. */
  inBatch(): boolean {
    return this.depth > 0;
  }

  /**
   * Queues fn to run once the running batch is done and its writes are what every read of this
   * process sees (e.g. notifying watchers): after its commit, or, in a shared transaction, as
   * the batch ends (the commit comes later; a crash before it is replayed from the WAL).
   */
  onCommit(fn: () => void): void {
    assert(this.depth > 0, 'onCommit outside batch()');
    assert(this.afterCommit.length < MAX_AFTER_COMMIT, 'too many after-commit callbacks in one batch');
    this.afterCommit.push(fn);
  }

  private runAfterCommit(): void {
    const fns = this.afterCommit;
    this.afterCommit = [];
    let first: unknown = null;
    for (const fn of fns) {
      try {
        fn();
      } catch (e) {
        first ??= e;
      }
    }
    if (first !== null) throw first;
  }

  consistentIndex(): number {
    return this.ci;
  }

  setConsistentIndex(index: number): void {
    if (!(index >= this.ci)) assert.fail(`consistent index going back: ${index} < ${this.ci}`);
    this.writeConsistentIndex(index);
  }

  /**
   * Sets the consistent index to any value, lower too: only for a database leaving its Raft log
   * behind (a snapshot restored into a new cluster starts its log over).
   */
  resetConsistentIndex(index: number): void {
    this.writeConsistentIndex(index);
  }

  private writeConsistentIndex(index: number): void {
    assert(this.depth > 0, 'setConsistentIndex outside batch()');
    assert(Number.isSafeInteger(index) && index >= 0);
    // putSync copies key and value into the transaction: one scratch buffer serves every call.
    CI_SCRATCH.writeUInt32BE(Math.floor(index / 2 ** 32), 0);
    CI_SCRATCH.writeUInt32BE(index >>> 0, 4);
    this.meta.putSync(CI_KEY_BYTES, CI_SCRATCH);
    this.ci = index;
  }

  metaGet(key: string): Buffer | undefined {
    const v = this.meta.getBinary(Buffer.from(key));
    return v ? Buffer.from(v) : undefined;
  }

  metaPut(key: string, value: Buffer): void {
    assert(this.depth > 0, 'metaPut outside batch()');
    this.meta.putSync(Buffer.from(key), value);
  }

  metaDelete(key: string): void {
    assert(this.depth > 0, 'metaDelete outside batch()');
    this.meta.removeSync(Buffer.from(key));
  }

  /** The database file's size (etcd's dbSize). */
  sizeBytes(): number {
    // Pages up to the highest ever used: a data file written through LMDB's write map (before
    // this backend wrote with pwrite) measures the whole map, sparse.
    const st = this.env.getStats() as LmdbStats;
    return (st.lastPageNumber + 1) * st.pageSize;
  }

  /** Pages in use times page size (etcd's dbSizeInUse): the size a defragmented file would have. */
  sizeInUseBytes(): number {
    const envStats = this.env.getStats() as LmdbStats;
    let pages = 2 + pagesOf(envStats) + pagesOf(envStats.free);
    for (const db of this.dbs.values()) pages += pagesOf(db.getStats() as LmdbStats);
    return pages * envStats.pageSize;
  }

  /**
   * Resolves when everything committed so far is on disk. The dirty pages go first, by a sync
   * on libuv's thread pool; then one small durable commit, in which LMDB writes its data pages
   * before the meta page that points at them (a sync alone writes both at once), so the file is
   * whole at this point even across a power loss.
   */
  async flushed(): Promise<void> {
    assert(this.depth === 0, 'flushed() inside a batch');
    this.commitShared();
    // (Not seq: a batch that threw counts there but committed nothing.)
    const target = this.committedSeq;
    // A sync that started before the last commit may not hold it: at most one to wait out,
    // then one of our own.
    for (let attempt = 0; this.syncedSeq < target; attempt++) {
      assert(attempt < 3, 'flushed(): the environment would not sync');
      if (this.flushing) await this.flushing.catch(() => undefined);
      else await this.sync();
    }
    // Synchronous (lmdb-js's default flags for transactionSync), so lmdb-js holds no pending
    // asynchronous write afterwards: see releaseMappedPages(). Batches that opened a shared
    // transaction while the sync ran are committed first (this commit makes them durable too),
    // so that this one is not taken for a child of it.
    this.commitShared();
    this.env.transactionSync(() => this.meta.putSync(FLUSH_MARKER_BYTES, FLUSH_MARKER_VALUE), this.unsafeNoFsync ? TXN_FLAGS_NO_FSYNC : undefined);
  }

  /**
   * crc32c over every sub-database (name, then each key and value), skipping the consistent
   * index as etcd does: equal applied history gives equal hashes.
   */
  hash(): number {
    const hash = this.openHash();
    while (hash.step(Number.MAX_SAFE_INTEGER));
    return hash.digest();
  }

  /**
   * hash() in steps that may be turns of the event loop apart, all under one read transaction
   * (see openRecordScan): each sub-database's name, then its records, in name order.
   */
  openHash(): BackendHash {
    const names = [...this.dbs.keys()].sort();
    const scan = this.openScan(names.map((name) => ({ name })));
    const h = new Crc32c();
    const ciKey = Buffer.from(CONSISTENT_INDEX_KEY);
    const flushKey = Buffer.from(FLUSH_MARKER_KEY);
    let inMeta = false;
    const enter = (segment: number): void => {
      const name = names[segment]!;
      inMeta = name === META_DB;
      h.update(Buffer.from(name));
    };
    const visit = (key: Buffer, value: Buffer, valueBytes: number): void => {
      if (inMeta && (ciKey.equals(key) || flushKey.equals(key))) return;
      h.update(key);
      h.update(value, valueBytes);
    };
    let done = false;
    return {
      step: (maxRecords: number): boolean => {
        done = !scan.step(maxRecords, visit, enter);
        return !done;
      },
      digest: (): number => {
        assert(done, 'a hash digested before its last step');
        return h.digest();
      },
      close: (): void => scan.close(),
    };
  }

  /**
   * Visits sub-database `name`'s records from `start` (to `end`, exclusive) in key order. Each value comes as
   * `valueBytes` bytes at the start of a buffer that LMDB's next read reuses, so it is valid
   * only during the call (the key is a copy): a scan of the whole store then copies no values
   * (1M records of ~300 B: lmdb-js's copy of each was a Buffer apiece and a third of the scan).
   */
  scanRecordViews(name: string, start: Buffer, visit: RecordVisitor, end?: Buffer): number {
    const scan = this.openScan([{ name, start, end }]);
    let records = 0;
    try {
      scan.step(Number.MAX_SAFE_INTEGER, (key, value, valueBytes) => {
        visit(key, value, valueBytes);
        records++;
      });
    } finally {
      scan.close();
    }
    return records;
  }

  /**
   * Like scanRecordViews() (from the first record when `start` is absent, to the last when `end`
   * is), but in steps that may be turns of the event loop apart, all under
   * one read transaction opened here: every step sees the records as they were at this call,
   * whatever is written or deleted meanwhile. Everything applied so far is in it. The file is not
   * remapped while a scan is open; a defragmentation's or a leader snapshot's swap of the file,
   * and closing, abort it (its next step throws RecordScanAborted). Close it when done.
   */
  openRecordScan(name: string, start?: Buffer, end?: Buffer): RecordScan {
    return this.openScan([{ name, start, end }]);
  }

  private openScan(parts: Array<{ name: string; start?: Buffer; end?: Buffer }>): RecordScan {
    assert(!this.closed, 'backend is closed');
    assert(this.depth === 0, 'a record scan opened inside a batch');
    // Opening a view's handle runs a write transaction of its own: none may be open around it.
    this.commitShared();
    const segments = parts.map((p) => ({ view: this.recordView(p.name), start: p.start, end: p.end }));
    const txn = this.env.useReadTransaction();
    const scan = new RecordScan(segments, txn, () => {
      this.scans.delete(scan);
      this.envUsers--;
    });
    this.scans.add(scan);
    this.envUsers++;
    return scan;
  }

  private abortScans(): void {
    for (const scan of [...this.scans]) scan.abort();
    assert(this.scans.size === 0);
  }

  private recordView(name: string): RecordView {
    assert(this.dbs.has(name), `sub-database ${name} is not open`);
    let view: RecordView | undefined = this.views.get(name);
    if (view === undefined || view.env !== this.env) {
      const decoded: { bytes: Buffer; size: number } = { bytes: EMPTY_VIEW, size: 0 };
      // A custom decoder gets lmdb-js's read buffer itself (without needsStableBuffer), not a copy.
      const encoder = {
        encode: (): never => assert.fail('record views are read-only'),
        decode: (bytes: Buffer, size: number): typeof decoded => {
          decoded.bytes = bytes;
          decoded.size = size;
          return decoded;
        },
      };
      // lmdb-js takes `encoder` for any database; its types declare it for the root one only.
      const options: RootDatabaseOptions & { name: string } = { name, keyEncoding: 'binary', encoder, cache: false };
      const db = this.env.openDB(options) as unknown as Database<typeof decoded, Buffer>;
      view = { env: this.env, db };
      this.views.set(name, view);
    }
    return view;
  }

  /** How many records sub-database `name` holds (LMDB keeps the count: no scan). */
  recordCount(name: string): number {
    const db = this.dbs.get(name);
    if (!db) assert.fail(`sub-database ${name} is not open`);
    const n = (db.getStats() as { entryCount: number }).entryCount;
    assert(Number.isSafeInteger(n) && n >= 0);
    return n;
  }

  /** The sub-databases the file holds, by name (LMDB's main database lists them). */
  subDbNames(): string[] {
    const names: string[] = [];
    // LMDB keeps each name with its terminating NUL.
    for (const key of this.env.getKeys({})) names.push(Buffer.from(key).toString().replace(/\0$/, ''));
    return names.sort();
  }

  /**
   * A consistent copy of the database file in chunks of 32 KiB, followed by one chunk holding
   * the sha256 of everything before it (what etcdctl snapshot restore checks).
   */
  async *snapshotStream(): AsyncIterable<Buffer> {
    const snap = await this.openSnapshot();
    yield* snap.chunks;
  }

  /**
   * Like snapshotStream(), but tells the copy's size first (etcd's remaining_bytes counts down
   * from it; the sha256 chunk comes with remaining_bytes 0). The copy is deleted when the
   * chunks have been read to the end or the iteration is abandoned (iterate it exactly once).
   * With `transform`, the file streamed is what it makes of the copy.
   */
  async openSnapshot(transform?: (copy: string, dir: string) => Promise<string>): Promise<{ totalBytes: number; chunks: AsyncIterable<Buffer> }> {
    const dir = fs.mkdtempSync(path.join(path.dirname(this.filePath), '.snap-'));
    const copy = path.join(dir, 'db');
    try {
      // Everything applied so far goes into the copy (etcd commits its batch first too).
      this.commitShared();
      // LMDB copies under one read transaction: a consistent point-in-time image.
      await this.withEnvUser(() => this.env.backup(copy, false));
      // `transform` may turn the copy into another file in `dir` (e.g. another database format);
      // the copy then goes at once (off the event loop: see readSnapshotCopy).
      const file = transform ? await transform(copy, dir) : copy;
      if (file !== copy) {
        await fs.promises.rm(copy, { force: true });
        await fs.promises.rm(`${copy}-lock`, { force: true });
      }
      return { totalBytes: fs.statSync(file).size, chunks: readSnapshotCopy(dir, file) };
    } catch (e) {
      fs.rmSync(dir, { recursive: true, force: true });
      throw e;
    }
  }

  /**
   * Rewrites the file compactly (etcd's Defragment). Sub-database handles stay valid. Writes
   * wait while the copy is made (see writesHeld). Resolves false when it gave up: the backend
   * closed, or every copy was spoiled by a write that could not wait (the file is then left as
   * it was, which is still correct).
   */
  async defragment(): Promise<boolean> {
    if (this.defragging) return this.defragging;
    this.defragging = this.doDefragment().finally(() => {
      this.defragging = null;
    });
    return this.defragging;
  }

  /**
   * A promise while writes are held for a defragmentation (no batch() until it resolves; the
   * caller re-checks then, as a new hold may have begun), else null.
   */
  writesHeld(): Promise<void> | null {
    return this.writeHold?.released ?? null;
  }

  /**
   * Ends a hold before the defragmentation is done, for a write that cannot wait (a membership
   * change, or too much waiting): that copy is then thrown away and the copy made again.
   */
  releaseWrites(): void {
    const hold = this.writeHold;
    if (hold === null) return;
    this.writeHold = null;
    hold.release();
  }

  /** Whether the file has defragmented and been swapped; false when it gave up (see doDefragment). */
  private async doDefragment(): Promise<boolean> {
    for (let attempt = 0; attempt < MAX_DEFRAG_TRIES; attempt++) {
      // Writes wait from here to the swap, so the copy is the whole database: with writes going
      // on beside it (a busy member, or just the shared transaction a write leaves open for up
      // to the batch interval), a copy made while serving was out of date almost every time.
      let release!: () => void;
      const hold: WriteHold = { released: new Promise<void>((r) => (release = r)), release: () => release() };
      assert(this.writeHold === null, 'two holds on writes');
      this.writeHold = hold;
      const tmp = `${this.filePath}.defrag`;
      try {
        await this.flushed();
        fs.rmSync(tmp, { force: true });
        fs.rmSync(`${tmp}-lock`, { force: true });
        const txnBefore = (this.env.getStats() as LmdbStats).lastTxnId;
        await this.withEnvUser(() => this.env.backup(tmp, true));
        if (this.closed) {
          fs.rmSync(tmp, { force: true });
          return false;
        }
        // LMDB writes the copy without an fsync: it must be on disk before a rename can put it in
        // place of the file (else a power loss leaves an empty or partial database under the name).
        if (!this.unsafeNoFsync) await fsyncFile(tmp);
        // The copy holds everything only if the hold lasted and nothing was written since it
        // began (asserted by batch(); the transaction id says so too). Checked again right
        // before the swap, after its wait.
        const unchanged = (): boolean =>
          this.writeHold === hold && (this.env.getStats() as LmdbStats).lastTxnId === txnBefore && this.depth === 0 && this.shared === null;
        if (unchanged() && (await this.swapFile(tmp, unchanged))) return true;
        fs.rmSync(tmp, { force: true });
      } finally {
        if (this.writeHold === hold) this.releaseWrites();
      }
    }
    return false;
  }

  /**
   * Puts the file at `source` in place of the database (synchronous switch; sub-database
   * handles stay valid). Used by defragment and to install a leader's snapshot. With `stillValid`,
   * gives up (false) if it no longer holds once the old environment may be closed.
   */
  private async swapFile(source: string, stillValid?: () => boolean): Promise<boolean> {
    // Two LMDB environments on one lock file in one process corrupt its reader table, so
    // the old one must be closed before the new one opens.
    // A background sync runs on the old environment's handle: let it finish first.
    this.flushPaused = true;
    try {
      if (this.flushing) await this.flushing.catch(() => undefined);
    } finally {
      this.flushPaused = false;
    }
    if (stillValid && !stillValid()) return false;
    // (Without a check, the new file replaces whatever the old one holds: commit it, so that
    // closing does not meet an open transaction.)
    this.commitShared();
    // A read transaction may not outlive its environment.
    this.abortScans();
    const old = this.env;
    const closing = old.close();
    const closedNow = (old as unknown as { status?: string }).status === 'closed';
    if (!closedNow) {
      // lmdb-js still had deferred work: nothing may touch the backend until it is done.
      this.swapping = true;
      try {
        await closing;
      } finally {
        this.swapping = false;
      }
    }
    fs.renameSync(source, this.filePath);
    if (!this.unsafeNoFsync) fsyncDir(path.dirname(this.filePath));
    this.openEnvAndDbs();
    this.bytesAtRemap = this.sizeBytes();
    await closing;
    return true;
  }

  /**
   * Replaces the whole database with a copy received from the leader (the bytes of a
   * snapshotStream() without its sha256 trailer), durably, then reloads the consistent index.
   */
  /**
   * Puts the database file at `file` (a leader's snapshot, already fsynced where it lies, in the
   * same directory) in place of this one; the rename is made durable before this resolves.
   */
  async installSnapshotFile(file: string): Promise<void> {
    assert(!this.closed, 'backend is closed');
    assert(this.depth === 0, 'installSnapshot inside a batch');
    assert.equal(path.dirname(path.resolve(file)), path.dirname(path.resolve(this.filePath)), 'a snapshot database is renamed into place from its own directory');
    if (this.defragging) await this.defragging.catch(() => undefined);
    await this.flushed();
    await this.swapFile(file);
    const raw = this.meta.getBinary(Buffer.from(CONSISTENT_INDEX_KEY));
    this.ci = raw ? Number(Buffer.from(raw).readBigUInt64BE(0)) : 0;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    if (this.defragging) await this.defragging.catch(() => undefined);
    this.commitShared();
    this.closed = true;
    this.abortScans();
    if (this.flushTimer) clearInterval(this.flushTimer);
    this.flushTimer = null;
    if (this.flushing) await this.flushing.catch(() => undefined);
    // Closing right after transactionSync can hang lmdb-js; let the event loop turn first.
    await new Promise((r) => setTimeout(r, 10));
    await this.flushed();
    await this.env.close();
  }
}

export class BackendFormatError extends Error {}

/** The LMDB lmdb-js builds: a 24-byte page header, then the meta page's magic number. */
const LMDB_MAGIC_OFFSET = 24;
const LMDB_MAGIC = 0xbeefc0de;
/** bbolt (etcd's backend): a 16-byte page header, then the meta page's magic number. */
const BBOLT_MAGIC_OFFSET = BBOLT_PAGE_HEADER_BYTES;

/** The database format in `file`'s first page: 'absent' for a missing or empty file (LMDB creates it). */
export function dbFileFormat(file: string): 'absent' | 'lmdb' | 'bbolt' | 'unknown' {
  let fd: number;
  try {
    fd = fs.openSync(file, 'r');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return 'absent';
    throw e;
  }
  try {
    const head = Buffer.alloc(LMDB_MAGIC_OFFSET + 4);
    const n = fs.readSync(fd, head, 0, head.length, 0);
    if (n === 0) return 'absent';
    if (n >= LMDB_MAGIC_OFFSET + 4 && head.readUInt32LE(LMDB_MAGIC_OFFSET) === LMDB_MAGIC) return 'lmdb';
    if (n >= BBOLT_MAGIC_OFFSET + 4 && head.readUInt32LE(BBOLT_MAGIC_OFFSET) === BBOLT_MAGIC) return 'bbolt';
    return 'unknown';
  } finally {
    fs.closeSync(fd);
  }
}

/** Where an LMDB meta page (after the page header) keeps the page size, its last page and its txn id. */
const LMDB_META_PSIZE_OFFSET = 24;
const LMDB_META_LAST_PAGE_OFFSET = 120;
const LMDB_META_TXNID_OFFSET = 128;

/**
 * Throws BackendFormatError unless `file` is absent, empty or an LMDB database whose newest meta
 * page points within the file (reads only). LMDB maps the file and trusts its meta page: pages past
 * the end (a meta page that reached the disk without its data) fault the process (SIGBUS).
 */
export function assertLmdbFile(file: string): void {
  const format = dbFileFormat(file);
  if (format === 'lmdb') assertLmdbMetaWithinFile(file);
  if (format === 'bbolt') {
    throw new BackendFormatError(
      `${file} is a bbolt database of etcd itself, not of etcd-ts: this is an etcd data directory, which etcd-ts cannot use in place ` +
        '(take a snapshot from etcd with `etcdctl snapshot save` and restore it with `etcdutl snapshot restore` into a new data directory)',
    );
  }
  if (format === 'unknown') throw new BackendFormatError(`${file} is not an etcd-ts database (no LMDB header); refusing to open it`);
}

function assertLmdbMetaWithinFile(file: string): void {
  const fd = fs.openSync(file, 'r');
  try {
    const sizeBytes = fs.fstatSync(fd).size;
    const head = Buffer.alloc(LMDB_MAGIC_OFFSET + LMDB_META_TXNID_OFFSET + 8);
    const readMeta = (at: number): { txnId: bigint; lastPage: bigint; pageBytes: number } | null => {
      if (fs.readSync(fd, head, 0, head.length, at) < head.length) return null;
      if (head.readUInt32LE(LMDB_MAGIC_OFFSET) !== LMDB_MAGIC) return null;
      const meta = LMDB_MAGIC_OFFSET;
      return {
        pageBytes: head.readUInt32LE(meta + LMDB_META_PSIZE_OFFSET),
        lastPage: head.readBigUInt64LE(meta + LMDB_META_LAST_PAGE_OFFSET),
        txnId: head.readBigUInt64LE(meta + LMDB_META_TXNID_OFFSET),
      };
    };
    const first = readMeta(0);
    const pageBytes = first?.pageBytes ?? 0;
    if (first === null || pageBytes < 512 || pageBytes > 65536 || (pageBytes & (pageBytes - 1)) !== 0) {
      throw new BackendFormatError(`${file} is damaged: its first meta page does not read; refusing to open it`);
    }
    const second = readMeta(pageBytes);
    const newest = second !== null && second.txnId > first.txnId ? second : first;
    const neededBytes = (newest.lastPage + 1n) * BigInt(pageBytes);
    if (neededBytes > BigInt(sizeBytes)) {
      throw new BackendFormatError(
        `${file} is damaged: its newest meta page (transaction ${newest.txnId}) uses pages up to byte ${neededBytes} ` +
          `but the file holds ${sizeBytes} bytes (a write that never reached the disk); refusing to open it`,
      );
    }
  } finally {
    fs.closeSync(fd);
  }
}

interface LmdbTreeStats {
  treeBranchPageCount: number;
  treeLeafPageCount: number;
  overflowPages: number;
}
interface LmdbStats extends LmdbTreeStats {
  pageSize: number;
  lastPageNumber: number;
  lastTxnId: number;
  free: LmdbTreeStats;
}

function pagesOf(s: LmdbTreeStats | undefined): number {
  if (!s) return 0;
  return (s.treeBranchPageCount ?? 0) + (s.treeLeafPageCount ?? 0) + (s.overflowPages ?? 0);
}

async function* readSnapshotCopy(dir: string, copy: string): AsyncIterable<Buffer> {
  try {
    const sha = createHash('sha256');
    const fh = await fs.promises.open(copy, 'r');
    try {
      for (;;) {
        // Not zeroed: the read fills what is sent (a chunk is cut at bytesRead).
        const buf = Buffer.allocUnsafe(SNAPSHOT_CHUNK_BYTES);
        const { bytesRead } = await fh.read(buf, 0, SNAPSHOT_CHUNK_BYTES, null);
        if (bytesRead === 0) break;
        const chunk = bytesRead === buf.length ? buf : buf.subarray(0, bytesRead);
        sha.update(chunk);
        yield chunk;
      }
    } finally {
      await fh.close();
    }
    yield sha.digest();
  } finally {
    // On the thread pool: unlinking a file of hundreds of MiB held the event loop ~0.2 s (1M keys).
    await fs.promises.rm(dir, { recursive: true, force: true });
  }
}

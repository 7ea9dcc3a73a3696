// The revisioned key space (etcd's mvcc store): an in-memory ordered index of every key's
// history plus revision-keyed KeyValue records in the backend's "key" sub-database.
import assert from 'node:assert';
import { RecordScanAborted, type Backend, type SubDb } from '../backend/backend';
import { Crc32c } from '../backend/crc32c';
import { etcdError } from '../errors';
import { IndexRebuild, REBUILD_CHUNK_RECORDS } from './index_rebuild';
import { decodeKeyValue, decodeRecordHead, encodeKeyValue, encodeStoredKeyValue } from './kv_codec';
import { bytesToRev, isTombstoneKey, revToBytes, REV_BYTES } from './revision';
import { nextTurn } from '../runtime/next_turn';
import { RevisionTable } from './revision_table';
import { HitRevisions, TreeIndex, type RangeEnd } from './tree_index';
import { EventType, type KeyValue, type MvccEvent } from './types';

export interface RangeOptions {
  /** Read at this revision; 0 or absent = current. */
  rev?: number;
  /** 0 or absent = no limit. */
  limit?: number;
  countOnly?: boolean;
  keysOnly?: boolean;
}

export interface RangeResult {
  kvs: KeyValue[];
  /** Keys matching, ignoring limit. */
  count: number;
  /** The store's current revision (as seen by the reader). */
  rev: number;
}

/** Anything ranges can be read from: the store, or a write txn (which sees its own writes). */
export interface RangeReader {
  range(key: Buffer, end: Buffer | null, opts?: RangeOptions): RangeResult;
}

export interface WriteTxn extends RangeReader {
  /**
   * prevKv: the key's value before this put, read when `wantPrev` or when live events must carry it
   * (MvccStore.eventsNeedPrevKv); null otherwise, and for a key that did not exist.
   */
  put(key: Buffer, value: Buffer, lease: bigint, wantPrev?: boolean): { prevKv: KeyValue | null };
  /** prevKvs: the deleted keys' last values (always filled: callers detach their leases). */
  deleteRange(key: Buffer, end: Buffer | null): { deleted: number; prevKvs: KeyValue[] };
  /** The revision this txn writes at once it wrote (current + 1), else the current one. */
  readonly rev: number;
  /** Ends the txn; if it wrote, the store's revision advances by one and listeners get the events after the batch commits. */
  end(): MvccEvent[];
}

export type EventsListener = (events: MvccEvent[], rev: number) => void;

/** The sub-database name etcd gives its KV bucket (also hashed into HashKV). */
export const KEY_DB = 'key';
const KEY_DB_NAME_BYTES = Buffer.from(KEY_DB);
/** lmdb-js put options: MDB_APPEND (see appendKeyRecord). */
const APPEND = { append: true } as const;

/**
 * Writes a record at the end of the key bucket. Its key, a revision, is above every record's
 * there, so LMDB is told it appends: a page that fills up then stays full and the record starts
 * the next one, where an insert splits the page in half and leaves it half empty for good
 * (records of 1 KiB: 2 per 4 KiB page instead of 3). A key that is not above the last one is a
 * broken revision invariant; LMDB refuses it rather than write it, and so do we.
 */
export function appendKeyRecord(kv: SubDb, revKey: Buffer, record: Buffer): void {
  // lmdb-js types putSync as void; it answers whether it wrote. The message is built only on
  // failure: this runs for every record written.
  const written: unknown = kv.putSync(revKey, record, APPEND);
  if (written !== true) assert.fail(`record at revision key ${revKey.toString('hex')} is not above the key bucket's last one`);
}
const META_SCHEDULED_COMPACT = 'scheduledCompactRev';
const META_FINISHED_COMPACT = 'finishedCompactRev';
/**
 * The revision a restored store starts from when `etcdutl snapshot restore --bump-revision` raised
 * it above its last record (etcd writes an empty record at that revision instead; ours would read
 * as a key).
 */
const META_RESTORED_REVISION = 'restoredRevision';
/** Records deleted per physical compaction step (etcd's compaction-batch-limit default). */
const COMPACTION_BATCH_LIMIT = 1000;
/** Pause between physical compaction steps so applies keep flowing (etcd's default). */
const COMPACTION_SLEEP_MS = 10;
/** Keys whose history the index's compaction drops per turn of the event loop (~5 ms at 1M keys). */
const INDEX_COMPACTION_KEYS_PER_TURN = 4096;
/** Keys HashKV's walk of the index visits, or records Hash and HashKV hash, per turn of the event loop (~2-5 ms). */
const HASH_STEP = 4096;
/** Records a range of the KV service reads per turn of the event loop (~5-10 ms with their copies). */
const RANGE_STEP = 8192;
/** Keys of the index a range walks per turn, per record it reads (the walk is ~0.4-0.6 µs a key). */
const RANGE_KEYS_PER_RECORD = 2;
/** A large range's turn lasts this long at most, but for the records read since the last look at the clock. */
const RANGE_TURN_MS = 8;
/** Records between two looks at the clock (performance.now() costs ~50 ns; a record 1-25 µs). */
const RANGE_CLOCK_RECORDS = 256;
/** Hash and HashKV requests that may wait while one runs. */
const HASH_MAX_WAITING = 16;
/** Tries of one hash when the file is swapped under it (each defragmentation swaps it once). */
const HASH_MAX_ATTEMPTS = 3;
/** etcd's hashStorageMaxSize: the compaction hashes kept. */
const COMPACTION_HASHES_KEPT = 10;
const MAX_LISTENERS = 16;

const EMPTY = Buffer.alloc(0);

function revMetaBytes(rev: number): Buffer {
  return revToBytes(rev, 0);
}

/**
 * Normalizes etcd's range end: empty = the single key, "\0" = every key >= key,
 * anything else = [key, end).
 */
export function toRangeEnd(end: Buffer | null): RangeEnd {
  if (end === null || end.length === 0) return null;
  if (end.length === 1 && end[0] === 0) return '';
  return end.toString('latin1');
}

/** Sizes of the store's steps; tests make them small. */
export interface MvccStoreOptions {
  /** Records the key index's rebuild sorts at a time. */
  rebuildChunkRecords?: number;
  /** Keys or records Hash and HashKV visit per turn of the event loop. */
  hashStep?: number;
  /** Records a large range reads per turn of the event loop at most (rangeRecordsInSteps). */
  rangeStep?: number;
  /** Milliseconds after which a large range's turn ends, whatever its records (checked every RANGE_CLOCK_RECORDS). */
  rangeTurnMs?: number;
}

/** etcd's HashKV answer (see MvccStore.hashKV). */
export interface HashKvResult {
  hash: number;
  compactRevision: number;
  hashRevision: number;
}

/**
 * etcd's kvHasher: crc32c of the key bucket's name and of the records up to the hash revision,
 * leaving out those at or below the compact revision that a compaction there dropped (`kept`:
 * what it keeps; null: keep them all, as etcd with an empty keep set) and a tombstone at the
 * compact revision itself (etcd 3.5.16+ keeps it, older versions remove it: left out, both agree).
 */
class KvHasher {
  private readonly h = new Crc32c().update(KEY_DB_NAME_BYTES);

  constructor(
    private readonly compactRev: number,
    private readonly kept: RevisionTable | null,
  ) {}

  readonly visit = (key: Buffer, value: Buffer, valueBytes: number): void => {
    const r = bytesToRev(key);
    // Revisions a compaction at or before the hash revision would drop are left out, so members
    // that compacted physically at different moments agree.
    if (r.main <= this.compactRev && this.kept !== null && !this.kept.has(r.main, r.sub)) return;
    if (r.main === this.compactRev && isTombstoneKey(key)) return;
    this.h.update(key);
    this.h.update(value, valueBytes);
  };

  digest(): number {
    return this.h.digest();
  }
}

/** How many hits a range needs from the index: one for countOnly, its limit, or all (0). */
function wantedHits(opts: RangeOptions | undefined): number {
  return opts?.countOnly ? 1 : opts?.limit && opts.limit > 0 ? opts.limit : 0;
}

export class MvccStore {
  private readonly kv: SubDb;
  private index = new TreeIndex();
  private currentRev = 1;
  /** -1 before the first compaction, as etcd. */
  private compactMainRev = -1;
  private readonly listeners: EventsListener[] = [];
  /**
   * Whether a put's live event must carry the key's previous value (prev_kv): the watch hub
   * answers whether any watcher asked for it (server.ts). Until told, every put reads it. Read per
   * put, inside its apply: the events reach the listeners later in the same turn, before any new
   * watcher can start.
   */
  eventsNeedPrevKv: () => boolean = () => true;
  private openTxn: StoreWriteTxn | null = null;
  /** Revisions written in the running batch, delivered to listeners after it commits (bounded by the batch). */
  private pendingNotify: Array<{ events: MvccEvent[]; rev: number }> = [];
  private notifyBatch = -1;
  private compactChain: Promise<void> = Promise.resolve();
  /**
   * etcd's hashStorage: the hash each finished compaction took of the revisions up to it, as
   * HashKV at that revision saw them just before (its compact revision the one before), newest
   * COMPACTION_HASHES_KEPT by revision. HashKV at one of those revisions answers it (members
   * compare these for --experimental-compact-hash-check).
   */
  private readonly compactionHashes: HashKvResult[] = [];
  private hashChain: Promise<unknown> = Promise.resolve();
  private hashesWaiting = 0;
  private closed = false;
  private sleepTimer: NodeJS.Timeout | null = null;
  /** Scratch record key for point reads (lmdb-js copies the key before returning). */
  private readonly readKey = Buffer.alloc(REV_BYTES);
  private wakeSleeper: (() => void) | null = null;

  /**
   * Since start: writes applied (etcd_mvcc_put_total / etcd_mvcc_delete_total), the bytes of the
   * keys and values put (etcd_debugging_mvcc_total_put_size_in_bytes), records a physical
   * compaction removed (etcd_debugging_mvcc_db_compaction_keys_total), and the epoch second the
   * last one finished (etcd_debugging_mvcc_db_compaction_last; 0 before any).
   */
  readonly ops = { puts: 0, deletes: 0, putBytes: 0, compactedKeys: 0, lastCompactionEpochSec: 0 };

  /**
   * The live keys with a lease as restore() found them (each key's last record), for the
   * lessor's recover() right after; dropped by the first write. Walking the index and reading
   * every live key's record again instead cost a 1M-key restart ~1.5 s of its ~7.5.
   */
  private restoredLeases: Map<string, { key: Buffer; lease: bigint }> | null;

  private readonly rebuildChunkRecords: number;
  private readonly hashStep: number;
  private readonly rangeStep: number;
  private readonly rangeTurnMs: number;

  constructor(
    private readonly backend: Backend,
    opts: MvccStoreOptions = {},
  ) {
    this.rebuildChunkRecords = opts.rebuildChunkRecords ?? REBUILD_CHUNK_RECORDS;
    this.hashStep = opts.hashStep ?? HASH_STEP;
    this.rangeStep = opts.rangeStep ?? RANGE_STEP;
    this.rangeTurnMs = opts.rangeTurnMs ?? RANGE_TURN_MS;
    assert(this.rebuildChunkRecords >= 1 && this.hashStep >= 1 && this.rangeStep >= 1 && this.rangeTurnMs >= 0);
    this.kv = backend.subDb(KEY_DB);
    this.restoredLeases = null;
    this.restore();
  }

  // ---- reads ----

  currentRevision(): number {
    return this.currentRev;
  }

  /** The last compaction's revision; 0 when there was none. */
  compactRevision(): number {
    return Math.max(0, this.compactMainRev);
  }

  /** etcd's compactMainRev: -1 before the first compaction (txn range checks compare with it). */
  rawCompactRevision(): number {
    return this.compactMainRev;
  }

  keyCount(): number {
    return this.index.keyCount();
  }

  range(key: Buffer, end: Buffer | null, opts?: RangeOptions): RangeResult {
    return this.rangeAt(key, end, this.currentRev, opts);
  }

  /**
   * The index's hits of a range read at curRev (etcd's checks: FutureRev, Compacted), up to the
   * limit (one for countOnly), and how many keys match in all.
   */
  private hitsAt(key: Buffer, end: Buffer | null, curRev: number, opts: RangeOptions | undefined): ReturnType<TreeIndex['rangeLimited']> {
    return this.index.rangeLimited(key.toString('latin1'), toRangeEnd(end), this.rangeRev(curRev, opts), wantedHits(opts));
  }

  /** The revision a range reads at (etcd's checks: FutureRev, Compacted). */
  private rangeRev(curRev: number, opts: RangeOptions | undefined): number {
    let rev = opts?.rev ?? 0;
    if (rev > curRev) throw etcdError('FutureRev');
    if (rev <= 0) rev = curRev;
    if (rev < this.compactMainRev) throw etcdError('Compacted');
    return rev;
  }

  /** Ranges as seen by a reader whose current revision is curRev (a write txn sees its own). */
  rangeAt(key: Buffer, end: Buffer | null, curRev: number, opts?: RangeOptions): RangeResult {
    const { hits, total: count } = this.hitsAt(key, end, curRev, opts);
    if (opts?.countOnly || count === 0) return { kvs: [], count, rev: curRev };
    const limit = hits.length;
    const kvs: KeyValue[] = new Array(limit);
    const withoutValue = opts?.keysOnly === true;
    // One look-up through the backend's handle per range, not per key.
    const get = this.kv.getBinaryFast;
    const readKey = this.readKey;
    for (let i = 0; i < limit; i++) {
      const h = hits[i];
      // getBinaryFast returns memory reused by the next read; decodeKeyValue copies out of it.
      const raw = get(revToBytes(h.modMain, h.modSub, false, readKey));
      if (!raw) assert.fail(`index points at missing record ${h.modMain}.${h.modSub}`);
      kvs[i] = decodeKeyValue(raw, withoutValue);
    }
    return { kvs, count, rev: curRev };
  }

  /**
   * The keys range() would return, as their stored records (each is the mvccpb.KeyValue encoding
   * of the key's fields) in key order, without decoding them: for a caller that copies the bytes
   * into a response. `record` is LMDB's read buffer, reused by the next read: its first
   * `length` bytes are the record (the buffer may be longer), valid until `each` returns.
   * countOnly reads no record; keysOnly is the caller's business (it gets whole records).
   */
  rangeRecords(key: Buffer, end: Buffer | null, opts: RangeOptions, each: (record: Uint8Array, length: number) => void): { count: number; rev: number } {
    assert(!opts.keysOnly, 'rangeRecords reads whole records');
    const curRev = this.currentRev;
    const hits = new HitRevisions();
    this.index.rangeLimitedSome(key.toString('latin1'), toRangeEnd(end), this.rangeRev(curRev, opts), wantedHits(opts), null, 0, hits);
    if (!opts.countOnly) this.readRecordsOf(hits, 0, Infinity, Infinity, each);
    return { count: hits.total, rev: curRev };
  }

  /**
   * Hands `each` the records of `hits` from position `from` on: up to `max` of them, fewer once
   * performance.now() passes `untilMs` (looked at every RANGE_CLOCK_RECORDS). Returns the
   * position after the last one read.
   */
  private readRecordsOf(hits: HitRevisions, from: number, max: number, untilMs: number, each: (record: Uint8Array, length: number) => void): number {
    const { mains, subs } = hits;
    // Read here, not kept across turns: the handle's methods are bound to the environment, which a remap may replace.
    const get = this.kv.getBinaryFast;
    const readKey = this.readKey;
    const to = Math.min(mains.length, from + max);
    let i = from;
    while (i < to) {
      const raw = get(revToBytes(mains[i], subs[i], false, readKey));
      if (!raw) assert.fail(`index points at missing record ${mains[i]}.${subs[i]}`);
      each(raw, raw.length);
      i++;
      if ((i - from) % RANGE_CLOCK_RECORDS === 0 && performance.now() > untilMs) break;
    }
    return i;
  }

  /**
   * rangeRecords() for a read that may wait (the KV service's Range): a range of more than
   * rangeStep keys reads its records rangeStep per turn of the event loop (one range of 1M keys
   * held the loop 5.7 s: no other request and no Raft heartbeat meanwhile). Its keys are the
   * index's at the start. Between turns a compaction at or below the range's revision deletes
   * none of its records (each is its key's last at or below that revision); one above it may, and
   * answers etcd's "compacted", as a request made then would get.
   */
  async rangeRecordsInSteps(key: Buffer, end: Buffer | null, opts: RangeOptions, each: (record: Uint8Array, length: number) => void): Promise<{ count: number; rev: number }> {
    assert(!opts.keysOnly, 'rangeRecords reads whole records');
    const curRev = this.currentRev;
    const atRev = this.rangeRev(curRev, opts);
    const index = this.index;
    // A leader's snapshot replacing the store answers "request timed out" (clients retry it).
    const turn = (): Promise<void> => this.nextReadTurn(index, atRev, () => etcdError('Timeout'));
    // The index's walk, then the records, each a step per turn.
    const into = new HitRevisions();
    const from = key.toString('latin1');
    const to = toRangeEnd(end);
    let after: string | null = null;
    while ((after = index.rangeLimitedSome(from, to, atRev, wantedHits(opts), after, this.rangeStep * RANGE_KEYS_PER_RECORD, into)) !== null) await turn();
    const count = into.total;
    if (opts.countOnly) return { count, rev: curRev };
    // A turn ends after rangeStep records, or sooner when they are slow to read (pages of the map
    // not yet resident, fresh memory for the copies: 8192 records took 100-230 ms).
    for (let i = 0; i < into.length; ) {
      if (i > 0) await turn();
      i = this.readRecordsOf(into, i, this.rangeStep, performance.now() + this.rangeTurnMs, each);
    }
    return { count, rev: curRev };
  }

  /**
   * The next turn of the event loop for a read at `atRev` that began on `index`: throws if the
   * store closed, was replaced (`replaced()`, a leader's snapshot) or was compacted past atRev
   * meanwhile (etcd's "compacted", as a request made then would get).
   */
  private async nextReadTurn(index: TreeIndex, atRev: number, replaced: () => Error): Promise<void> {
    await nextTurn();
    if (this.closed) throw etcdError('Stopped');
    if (this.index !== index) throw replaced();
    if (this.compactMainRev > atRev) throw etcdError('Compacted');
  }

  private readRecord(main: number, sub: number): KeyValue {
    const raw = this.kv.getBinaryFast(revToBytes(main, sub, false, this.readKey));
    if (!raw) assert.fail(`index points at missing record ${main}.${sub}`);
    return decodeKeyValue(raw);
  }

  /**
   * Events with fromRev <= modRevision <= toRev in revision order. Stops at a revision
   * boundary once maxEvents is reached; nextRev is the first revision not returned.
   */
  eventsInRange(fromRev: number, toRev: number, maxEvents: number, withPrevKv: boolean): { events: MvccEvent[]; nextRev: number } {
    assert(maxEvents > 0);
    // etcd's watchers compare with "<": a watcher starting at the compact revision is served.
    if (fromRev < this.compactMainRev) throw etcdError('Compacted');
    if (fromRev < 1) fromRev = 1;
    toRev = Math.min(toRev, this.currentRev);
    const events: MvccEvent[] = [];
    if (fromRev > toRev) return { events, nextRev: fromRev };
    let lastMain = -1;
    for (const { key, value } of this.kv.getRange({ start: revToBytes(fromRev, 0), end: revToBytes(toRev + 1, 0) })) {
      const r = bytesToRev(key);
      if (events.length >= maxEvents && r.main !== lastMain) return { events, nextRev: r.main };
      lastMain = r.main;
      const kv = decodeKeyValue(value);
      let ev: MvccEvent;
      if (isTombstoneKey(key)) {
        ev = { type: EventType.DELETE, kv: { key: kv.key, createRevision: 0, modRevision: r.main, version: 0, value: EMPTY, lease: 0n }, prevKv: null };
      } else {
        ev = { type: EventType.PUT, kv, prevKv: null };
      }
      // etcd's watch server reads prev_kv at modRevision - 1, and not at all for a create (a
      // put with create_revision == mod_revision: the key may have been deleted earlier in the
      // same txn, and etcd still sends no prev_kv).
      if (withPrevKv && !(ev.type === EventType.PUT && kv.createRevision === kv.modRevision)) ev.prevKv = this.prevKvAt(kv.key, r.main - 1);
      events.push(ev);
    }
    return { events, nextRev: toRev + 1 };
  }

  /** The key's value at rev, or null when absent or compacted (as etcd's watch prev_kv). */
  private prevKvAt(key: Buffer, rev: number): KeyValue | null {
    if (rev < 1 || rev < this.compactMainRev) return null;
    const g = this.index.get(key.toString('latin1'), rev);
    return g ? this.readRecord(g.modMain, g.modSub) : null;
  }

  /** Every live key that has a lease (for the lessor to rebuild attachments at start-up). */
  keysWithLease(): Array<{ key: Buffer; lease: bigint }> {
    const restored = this.restoredLeases;
    if (restored !== null) return [...restored.values()];
    const out: Array<{ key: Buffer; lease: bigint }> = [];
    this.index.forEachLive((ki) => {
      // Without the value: no record slab stays referenced by the keys the lessor keeps.
      const raw = this.kv.getBinaryFast(revToBytes(ki.modMain, ki.modSub, false, this.readKey));
      if (!raw) assert.fail(`index points at missing record ${ki.modMain}.${ki.modSub}`);
      const kv = decodeKeyValue(raw, true);
      if (kv.lease !== 0n) out.push({ key: kv.key, lease: kv.lease });
    });
    return out;
  }

  // ---- writes ----

  /** Opens the write txn; call inside backend.batch(). One at a time. */
  write(): WriteTxn {
    assert(this.backend.inBatch(), 'MvccStore.write() outside backend.batch()');
    assert(this.openTxn === null, 'a write txn is already open');
    this.restoredLeases = null;
    const txn = new StoreWriteTxn(this, this.currentRev);
    this.openTxn = txn;
    return txn;
  }

  onEvents(listener: EventsListener): void {
    assert(this.listeners.length < MAX_LISTENERS, 'too many event listeners');
    this.listeners.push(listener);
  }

  /** @internal used by StoreWriteTxn */
  txnPut(rev: number, sub: number, key: Buffer, value: Buffer, lease: bigint, withPrevKv: boolean): { kv: KeyValue; prevKv: KeyValue | null } {
    const keyStr = key.toString('latin1');
    // One lookup in the ordered index serves both the previous version and the put.
    const ki = this.index.keyIndex(keyStr);
    const prev = ki ? ki.get(rev) : null;
    // The index holds the previous version's create revision and version; its record (a read of
    // the data file and a copy of its value) only when someone asked for it.
    const prevKv = withPrevKv && prev ? this.readRecord(prev.modMain, prev.modSub) : null;
    // The KeyValue's key and value are views into the record it is stored as: it holds none of
    // the request's buffers.
    const { kv, record } = encodeStoredKeyValue(key, prev ? prev.createdMain : rev, rev, prev ? prev.ver + 1 : 1, value, lease);
    appendKeyRecord(this.kv, revToBytes(rev, sub), record);
    this.index.put(keyStr, rev, sub, ki);
    this.ops.puts++;
    this.ops.putBytes += key.length + value.length;
    return { kv, prevKv };
  }

  /** @internal used by StoreWriteTxn; deletes one existing key. */
  txnDelete(rev: number, sub: number, keyStr: string, prevKv: KeyValue): KeyValue {
    const key = prevKv.key;
    const tomb: KeyValue = { key, createRevision: 0, modRevision: 0, version: 0, value: EMPTY, lease: 0n };
    appendKeyRecord(this.kv, revToBytes(rev, sub, true), encodeKeyValue(tomb));
    const ok = this.index.tombstone(keyStr, rev, sub);
    assert(ok, 'tombstone of a key that does not exist');
    this.ops.deletes++;
    return { key, createRevision: 0, modRevision: rev, version: 0, value: EMPTY, lease: 0n };
  }

  /**
   * @internal The key's record visible at rev (before a write txn at rev + 1 changed it), or
   * null: what etcd's watch server sends as a live event's prev_kv (a range at modRevision - 1).
   */
  txnValueAt(keyStr: string, rev: number): KeyValue | null {
    const g = this.index.get(keyStr, rev);
    return g ? this.readRecord(g.modMain, g.modSub) : null;
  }

  /** @internal */
  txnHits(key: Buffer, end: Buffer | null, atRev: number): Array<{ keyStr: string; kv: KeyValue }> {
    return this.index.range(key.toString('latin1'), toRangeEnd(end), atRev).map((h) => ({ keyStr: h.key, kv: this.readRecord(h.modMain, h.modSub) }));
  }

  /** @internal */
  txnEnd(txn: StoreWriteTxn, events: MvccEvent[]): void {
    assert(this.openTxn === txn, 'ending a txn that is not open');
    this.openTxn = null;
    if (events.length === 0) return;
    assert(txn.beginRev === this.currentRev);
    this.currentRev++;
    const rev = this.currentRev;
    if (this.listeners.length === 0) return;
    // Listeners hear about a revision only once its batch has committed; one callback per
    // batch delivers every revision of it in order.
    const seq = this.backend.batchSeq();
    if (this.notifyBatch !== seq) {
      // Anything still pending belongs to a batch that aborted: it never happened.
      this.pendingNotify = [];
      this.notifyBatch = seq;
      this.backend.onCommit(() => this.flushNotify());
    }
    this.pendingNotify.push({ events, rev });
  }

  private flushNotify(): void {
    const pending = this.pendingNotify;
    this.pendingNotify = [];
    for (const { events, rev } of pending) {
      for (const l of this.listeners) l(events, rev);
    }
  }

  // ---- compaction ----

  /**
   * Compacts history before rev. The index forgets it at once; the records are deleted in
   * bounded steps later (resumed after a restart); `done` resolves when they are gone.
   */
  compact(rev: number): { done: Promise<void> } {
    assert(Number.isSafeInteger(rev));
    if (rev <= this.compactMainRev) throw etcdError('Compacted');
    if (rev > this.currentRev) throw etcdError('FutureRev');
    // etcd keeps a compaction's hash only when the one before finished (it then covers every
    // revision since; etcd PR #15919).
    const scheduled = this.backend.metaGet(META_SCHEDULED_COMPACT);
    const finished = this.backend.metaGet(META_FINISHED_COMPACT);
    const prevFinished = scheduled === undefined ? finished === undefined : finished !== undefined && scheduled.equals(finished);
    const prevRev = this.compactMainRev;
    // Persist the intent first so a restart finishes the physical deletion.
    this.backend.batch(() => this.backend.metaPut(META_SCHEDULED_COMPACT, revMetaBytes(rev)));
    return { done: this.scheduleCompaction(rev, prevFinished ? prevRev : null) };
  }

  /** `hashSince`: the compact revision before this one, when this compaction's hash is to be kept. */
  private scheduleCompaction(rev: number, hashSince: number | null): Promise<void> {
    // Reads below rev fail from now on; the index forgets their history in the background.
    this.compactMainRev = rev;
    const index = this.index;
    const done = this.compactChain.then(async () => {
      const keep = await this.compactIndex(index, rev);
      if (keep === null) return;
      // etcd hashes the records as its compaction deletes them; here they are hashed first.
      const hash = hashSince === null ? null : await this.compactionHash(index, hashSince, rev, keep);
      if (!(await this.physicalCompact(rev, keep)) || hash === null) return;
      this.compactionHashes.push(hash);
      this.compactionHashes.sort((a, b) => a.hashRevision - b.hashRevision);
      if (this.compactionHashes.length > COMPACTION_HASHES_KEPT) this.compactionHashes.shift();
    });
    this.compactChain = done.catch(() => undefined);
    return done;
  }

  /**
   * The index's part of a compaction, INDEX_COMPACTION_KEYS_PER_TURN keys per turn of the event
   * loop: in one go it held the loop ~1.2 s at 1M keys (no request, no Raft heartbeat meanwhile),
   * etcd's takes its index lock per key. Returns the revisions the records keep; null when the
   * store closed or its index was replaced (a leader's snapshot) meanwhile.
   */
  private async compactIndex(index: TreeIndex, rev: number): Promise<RevisionTable | null> {
    // Keys added meanwhile keep nothing at or below rev: the key count bounds the table.
    const available = new RevisionTable(rev, index.keyCount());
    let prefaulting = true;
    let after: string | null = null;
    for (;;) {
      if (this.closed || this.index !== index) return null;
      if (prefaulting) prefaulting = available.prefault();
      else {
        after = index.compactSome(rev, after, INDEX_COMPACTION_KEYS_PER_TURN, available);
        if (after === null) return available;
      }
      await nextTurn();
    }
  }

  /** True once the records are gone and the compaction recorded as finished. */
  private async physicalCompact(rev: number, keep: RevisionTable): Promise<boolean> {
    const end = revToBytes(rev + 1, 0);
    let start = revToBytes(0, 0);
    for (;;) {
      // Closing stops the work; the persisted intent makes the next start finish it.
      if (this.closed || this.backend.isClosed()) return false;
      // A defragmentation holds writes while it copies the file: wait for it.
      const held = this.backend.writesHeld();
      if (held !== null) {
        await held;
        continue;
      }
      const finished = this.backend.batch(() => {
        const keys: Buffer[] = [];
        for (const key of this.kv.getKeys({ start, end, limit: COMPACTION_BATCH_LIMIT })) keys.push(Buffer.from(key));
        for (const key of keys) {
          const r = bytesToRev(key);
          if (!keep.has(r.main, r.sub)) {
            this.kv.removeSync(key);
            this.ops.compactedKeys++;
          }
        }
        if (keys.length < COMPACTION_BATCH_LIMIT) {
          this.backend.metaPut(META_FINISHED_COMPACT, revMetaBytes(rev));
          this.ops.lastCompactionEpochSec = Math.floor(Date.now() / 1000);
          return true;
        }
        const last = bytesToRev(keys[keys.length - 1]);
        start = revToBytes(last.main, last.sub + 1);
        return false;
      });
      if (finished) return true;
      await this.sleep(COMPACTION_SLEEP_MS);
    }
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      this.wakeSleeper = resolve;
      this.sleepTimer = setTimeout(() => {
        this.sleepTimer = null;
        this.wakeSleeper = null;
        resolve();
      }, ms);
    });
  }

  // ---- hashes ----

  /**
   * crc32c over every record of the backend (etcd's Hash), skipping the consistent index. In
   * steps as hashKV (at 1M keys one pass held the event loop 3.4-3.8 s), queued with it.
   */
  hash(): Promise<number> {
    return this.queueHash(() => this.retryAfterSwap(() => this.hashOnce()));
  }

  private async hashOnce(): Promise<number> {
    if (this.closed) throw etcdError('Stopped');
    const hash = this.backend.openHash();
    try {
      while (hash.step(this.hashStep)) {
        await nextTurn();
        if (this.closed) throw etcdError('Stopped');
      }
      return hash.digest();
    } finally {
      hash.close();
    }
  }

  /**
   * etcd's HashKV: crc32c of the KV records up to rev as a compaction at rev would keep them.
   * In steps, turns of the event loop apart (at 1M keys one pass held the loop 1-4 s: no request
   * and no Raft heartbeat meanwhile, where a follower's election timeout is 1 s): the records
   * are read under one read transaction opened first, so the hash is of the store as it was at
   * this call. One hash (of either kind) runs at a time; HASH_MAX_WAITING more may wait.
   */
  hashKV(rev: number): Promise<HashKvResult> {
    return this.queueHash(() => this.retryAfterSwap(() => this.hashKvOnce(rev)));
  }

  /** Runs hashes one at a time, HASH_MAX_WAITING waiting at most. */
  private queueHash<T>(run: () => Promise<T>): Promise<T> {
    if (this.closed) return Promise.reject(etcdError('Stopped'));
    if (this.hashesWaiting >= HASH_MAX_WAITING) return Promise.reject(etcdError('RequestTooManyRequests'));
    this.hashesWaiting++;
    const running = this.hashChain.then(() => {
      this.hashesWaiting--;
      return run();
    });
    this.hashChain = running.catch(() => undefined);
    return running;
  }

  /**
   * Runs a hash again when the file was swapped under its scan: by a defragmentation (the same
   * records) or a leader's snapshot (the revision is checked again against the new store).
   */
  private async retryAfterSwap<T>(once: () => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await once();
      } catch (e) {
        if (!(e instanceof RecordScanAborted) || attempt >= HASH_MAX_ATTEMPTS) throw e;
      }
    }
  }

  private async hashKvOnce(requested: number): Promise<HashKvResult> {
    if (this.closed) throw etcdError('Stopped');
    const stored = this.compactionHashes.find((h) => h.hashRevision === requested);
    if (stored !== undefined) return stored;
    const compactRev = this.compactMainRev;
    if (requested > 0 && requested < compactRev) throw etcdError('Compacted');
    if (requested > 0 && requested > this.currentRev) throw etcdError('FutureRev');
    const rev = requested <= 0 ? this.currentRev : requested;
    const index = this.index;
    const scan = this.backend.openRecordScan(KEY_DB, revToBytes(0, 0), revToBytes(rev + 1, 0));
    try {
      // Between steps: writes only add revisions above rev; a compaction at or below rev
      // changes neither what it keeps at rev nor the records read; one above rev is etcd's
      // "compacted" for this hash, as it would have been for a later request.
      const turn = (): Promise<void> => this.nextReadTurn(index, rev, () => new RecordScanAborted('the store was replaced during HashKV'));
      // Only records at or below the compact revision are checked against what a compaction
      // keeps: none when the store was never compacted (the index's walk is skipped then).
      let kept: RevisionTable | null = null;
      if (compactRev > 0) {
        kept = new RevisionTable(compactRev, index.keyCount());
        while (kept.prefault()) await turn();
        let after: string | null = null;
        while ((after = index.keepSome(rev, after, this.hashStep, kept)) !== null) await turn();
        if (kept.size === 0) kept = null; // etcd hashes every record then
      }
      const h = new KvHasher(compactRev, kept);
      while (scan.step(this.hashStep, h.visit)) await turn();
      return { hash: h.digest(), compactRevision: compactRev, hashRevision: rev };
    } finally {
      scan.close();
    }
  }

  /**
   * The hash etcd's compaction at `rev` takes (kvHasher over the records up to rev, with the
   * compact revision before, `since`, and the revisions the compaction keeps): what HashKV at rev
   * answered just before it. Null when the store changed under the scan (etcd keeps no hash of a
   * compaction that did not finish either).
   */
  private async compactionHash(index: TreeIndex, since: number, rev: number, keep: RevisionTable): Promise<HashKvResult | null> {
    const scan = this.backend.openRecordScan(KEY_DB, revToBytes(0, 0), revToBytes(rev + 1, 0));
    try {
      const h = new KvHasher(since, keep.size === 0 ? null : keep);
      while (scan.step(this.hashStep, h.visit)) {
        await nextTurn();
        if (this.closed || this.index !== index) return null;
      }
      return { hash: h.digest(), compactRevision: since, hashRevision: rev };
    } catch (e) {
      if (e instanceof RecordScanAborted) return null;
      throw e;
    } finally {
      scan.close();
    }
  }

  // ---- start-up ----

  private restore(): void {
    const finished = this.backend.metaGet(META_FINISHED_COMPACT);
    if (finished) this.compactMainRev = bytesToRev(finished).main;
    const scheduledRaw = this.backend.metaGet(META_SCHEDULED_COMPACT);
    let scheduled = scheduledRaw ? bytesToRev(scheduledRaw).main : 0;

    let lastMain = 1;
    // Records come in revision order, so each key's last one decides whether it is live and
    // leased. Each is read as a view of LMDB's buffer: only the key's string outlives it.
    const leased = new Map<string, { key: Buffer; lease: bigint }>();
    const rebuild = new IndexRebuild(this.index, this.backend.recordCount(KEY_DB), this.rebuildChunkRecords);
    this.backend.scanRecordViews(KEY_DB, revToBytes(0, 0), (key, value, valueBytes) => {
      assert(key.length >= REV_BYTES);
      const r = bytesToRev(key);
      lastMain = r.main;
      const h = decodeRecordHead(value, valueBytes);
      const tombstone = isTombstoneKey(key);
      if (!tombstone && h.lease !== 0n) leased.set(h.key, { key: Buffer.from(h.key, 'latin1'), lease: h.lease });
      else if (leased.size > 0) leased.delete(h.key);
      rebuild.add(h.key, r.main, r.sub, h.createRevision, h.version, tombstone);
    });
    rebuild.finish();
    this.restoredLeases = leased;
    this.currentRev = lastMain;
    const restoredRaw = this.backend.metaGet(META_RESTORED_REVISION);
    if (restoredRaw) this.currentRev = Math.max(this.currentRev, bytesToRev(restoredRaw).main);
    // Compaction may have removed every record up to the compact revision.
    if (this.currentRev < this.compactMainRev) this.currentRev = this.compactMainRev;
    if (scheduled <= this.compactMainRev) scheduled = 0;
    if (scheduled !== 0) {
      // A compaction resumed after a restart keeps no hash: etcd's did not finish before.
      this.scheduleCompaction(scheduled, null).catch(() => undefined);
    }
  }

  /**
   * `etcdutl snapshot restore --bump-revision N --mark-compacted`, on a database no server has
   * open: the next write gets the latest revision + N + 1, and history up to latest + N is
   * compacted when a server opens the database (watchers and readers of older revisions get
   * "compacted" and start over, e.g. kube-apiserver's caches relist). Returns the new revision.
   */
  static async bumpRevisionForRestore(backend: Backend, amount: number): Promise<{ latest: number; bumped: number }> {
    assert(Number.isSafeInteger(amount) && amount > 0);
    const store = new MvccStore(backend);
    // A compaction the snapshot had scheduled is left for the server (it compacts at `bumped`).
    await store.close();
    const latest = store.currentRev;
    const bumped = latest + amount;
    assert(Number.isSafeInteger(bumped));
    backend.batch(() => {
      backend.metaPut(META_RESTORED_REVISION, revMetaBytes(bumped));
      backend.metaPut(META_SCHEDULED_COMPACT, revMetaBytes(bumped));
    });
    return { latest, bumped };
  }

  /** After the backend was replaced by a leader's snapshot: rebuild everything from it. */
  reload(): void {
    assert(this.openTxn === null, 'reload during a write txn');
    this.index = new TreeIndex();
    this.currentRev = 1;
    this.compactMainRev = -1;
    this.pendingNotify = [];
    this.restore();
  }

  /** Stops background compaction (it resumes from the persisted intent after a restart). */
  async close(): Promise<void> {
    this.closed = true;
    if (this.sleepTimer) clearTimeout(this.sleepTimer);
    this.sleepTimer = null;
    this.wakeSleeper?.();
    this.wakeSleeper = null;
    await this.compactChain;
    // A running HashKV stops at its next step.
    await this.hashChain;
  }
}

class StoreWriteTxn implements WriteTxn {
  private readonly events: MvccEvent[] = [];
  private ended = false;

  constructor(
    private readonly store: MvccStore,
    readonly beginRev: number,
  ) {}

  get rev(): number {
    return this.events.length > 0 ? this.beginRev + 1 : this.beginRev;
  }

  range(key: Buffer, end: Buffer | null, opts?: RangeOptions): RangeResult {
    assert(!this.ended, 'txn already ended');
    return this.store.rangeAt(key, end, this.rev, opts);
  }

  put(key: Buffer, value: Buffer, lease: bigint, wantPrev = false): { prevKv: KeyValue | null } {
    assert(!this.ended, 'txn already ended');
    assert(key.length > 0, 'empty key');
    const rev = this.beginRev + 1;
    const { kv, prevKv } = this.store.txnPut(rev, this.events.length, key, value, lease, wantPrev || this.store.eventsNeedPrevKv());
    this.events.push({ type: EventType.PUT, kv, prevKv });
    return { prevKv };
  }

  deleteRange(key: Buffer, end: Buffer | null): { deleted: number; prevKvs: KeyValue[] } {
    assert(!this.ended, 'txn already ended');
    const hits = this.store.txnHits(key, end, this.rev);
    const rev = this.beginRev + 1;
    const prevKvs: KeyValue[] = [];
    for (const h of hits) {
      // A key put earlier in this txn (a delete from a key, "\0", escapes etcd's duplicate-key
      // check) shows its new value to this delete, but the event's prev_kv is the value
      // before the txn, as etcd's watch server reads it at modRevision - 1.
      const before = h.kv.modRevision === rev ? this.store.txnValueAt(h.keyStr, this.beginRev) : h.kv;
      const kv = this.store.txnDelete(rev, this.events.length, h.keyStr, h.kv);
      this.events.push({ type: EventType.DELETE, kv, prevKv: before });
      prevKvs.push(h.kv);
    }
    return { deleted: hits.length, prevKvs };
  }

  end(): MvccEvent[] {
    assert(!this.ended, 'txn already ended');
    this.ended = true;
    this.store.txnEnd(this, this.events);
    return this.events;
  }
}

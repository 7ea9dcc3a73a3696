// The durable Raft log (<data-dir>/member/wal): append-only segment files of CRC-framed records,
// as etcd keeps its WAL. Each Raft Ready becomes one write() of all its records, followed by one
// fdatasync when Raft says it must be durable, so an entry or vote is never acknowledged before it
// would survive a crash. A new leader's overwrite of an uncommitted tail is just an append of
// lower indexes; the reader replays records in order, and the last word on an index wins.
import assert from 'node:assert';
import fs from 'node:fs';
import path from 'node:path';
import type { Entry, EntryHead, HardState, Snapshot, SnapshotMetadata } from '../raft/types';
import { decodeHardState, decodeSnapshotMeta, encodeHardState, encodeSnapshotMeta } from './codec';
import { fsyncDir, mkdirDurable } from '../runtime/fsync';
import { EntryLocations } from './locations';
import { migrateLegacyWal } from './legacy';
import { RECORD_HEADER_BYTES, RecordType, readRecord, sealRecord } from './record';
import { Syncer } from './syncer';

const ENTRY_HEADER_BYTES = 17;
/** etcd's segment size: a new file is started once the current one passes it. */
export const DEFAULT_SEGMENT_BYTES = 64 * 1024 * 1024;
const SEGMENT_RE = /^([0-9a-f]{16})-([0-9a-f]{16})\.wal$/;
/**
 * The segment file is kept zero-filled this far ahead of the records. An fdatasync after a write
 * that grew the file must also commit the new size and blocks through the file system's journal;
 * one after a write into blocks the file already has flushes just the data. A zero-filled tail
 * reads as the end of the log (readRecord), and is cut off on open and at a segment's end.
 */
const PREALLOC_BYTES = 256 * 1024;
/** What readEntryData reads at a time (a follower's catch-up reads on from one entry to the next). */
const READ_AHEAD_BYTES = 256 * 1024;
let zeros: Buffer | null = null;

/** Who this member is; written once when the member is created, and at the head of every segment. */
export interface WalIdentity {
  memberId: bigint;
  clusterId: bigint;
  name: string;
}

export interface WalContents {
  identity: WalIdentity;
  hardState: HardState;
  snapshot: SnapshotMetadata | null;
  /** Entries after the snapshot index, contiguous (none when opened with `entryData: 'on-disk'`). */
  entries: Entry[];
  /** With `entryData: 'on-disk'`: the same entries without their data (readEntryData reads it). */
  entryHeads: EntryHead[];
}

interface Segment {
  seq: number;
  /** The index the log expected next when the segment was started. */
  firstIndex: number;
  file: string;
}

export interface WalOptions {
  segmentBytes?: number;
  /**
   * What open() keeps of the entries it replays: their data ('memory', the default), or only where
   * each one is ('on-disk': WalContents.entryHeads, and readEntryData for the data). A member's
   * restart wants the latter: it holds the log's entries without their data until asked for.
   */
  entryData?: 'memory' | 'on-disk';
  /** etcd's --unsafe-no-fsync: saves never fdatasync (a power loss may take acknowledged writes). */
  unsafeNoFsync?: boolean;
}

function segmentName(seq: number, firstIndex: number): string {
  return `${seq.toString(16).padStart(16, '0')}-${firstIndex.toString(16).padStart(16, '0')}.wal`;
}

function listSegments(dir: string): Segment[] {
  const segs: Segment[] = [];
  for (const name of fs.readdirSync(dir)) {
    const m = SEGMENT_RE.exec(name);
    if (!m) continue;
    segs.push({ seq: parseInt(m[1], 16), firstIndex: parseInt(m[2], 16), file: path.join(dir, name) });
  }
  segs.sort((a, b) => a.seq - b.seq);
  for (let i = 1; i < segs.length; i++) assert.equal(segs[i].seq, segs[i - 1].seq + 1, `WAL segments in ${dir} are not consecutive`);
  return segs;
}

function encodeIdentity(id: WalIdentity): Buffer {
  return Buffer.from(JSON.stringify({ memberId: id.memberId.toString(), clusterId: id.clusterId.toString(), name: id.name }));
}

function decodeIdentity(b: Buffer): WalIdentity {
  const raw = JSON.parse(b.toString()) as { memberId: string; clusterId: string; name: string };
  return { memberId: BigInt(raw.memberId), clusterId: BigInt(raw.clusterId), name: raw.name };
}

/**
 * Records in the order a Ready needs them: snapshot, entries, then the hard state that may commit them.
 * `locate` hears where in the buffer each entry's record begins, and its size.
 */
function encodeRecords(
  hs: HardState | null,
  entries: Entry[],
  snap: SnapshotMetadata | null,
  identity: WalIdentity | null,
  locate?: (index: number, at: number, recordBytes: number) => void,
): Buffer {
  const idBytes = identity ? encodeIdentity(identity) : null;
  const snapBytes = snap ? encodeSnapshotMeta(snap) : null;
  const hsBytes = hs ? encodeHardState(hs) : null;
  let total = 0;
  if (idBytes) total += RECORD_HEADER_BYTES + idBytes.length;
  if (snapBytes) total += RECORD_HEADER_BYTES + snapBytes.length;
  for (let i = 0; i < entries.length; i++) total += RECORD_HEADER_BYTES + ENTRY_HEADER_BYTES + entries[i].data.length;
  if (hsBytes) total += RECORD_HEADER_BYTES + hsBytes.length;
  const buf = Buffer.allocUnsafe(total);
  let at = 0;
  const put = (type: RecordType, body: Buffer): void => {
    body.copy(buf, at + RECORD_HEADER_BYTES);
    sealRecord(buf, at, type, body.length);
    at += RECORD_HEADER_BYTES + body.length;
  };
  if (idBytes) put(RecordType.Identity, idBytes);
  if (snapBytes) put(RecordType.Snapshot, snapBytes);
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i];
    assert(i === 0 || e.index === entries[i - 1].index + 1, 'entries to save are not contiguous');
    const p = at + RECORD_HEADER_BYTES;
    // Raft indexes and terms are safe integers: two 32-bit halves avoid a BigInt per field.
    buf.writeUInt32BE(Math.floor(e.term / 0x100000000), p);
    buf.writeUInt32BE(e.term >>> 0, p + 4);
    buf.writeUInt32BE(Math.floor(e.index / 0x100000000), p + 8);
    buf.writeUInt32BE(e.index >>> 0, p + 12);
    buf.writeUInt8(e.type, p + 16);
    e.data.copy(buf, p + ENTRY_HEADER_BYTES);
    const len = ENTRY_HEADER_BYTES + e.data.length;
    sealRecord(buf, at, RecordType.Entry, len);
    locate?.(e.index, at, RECORD_HEADER_BYTES + len);
    at += RECORD_HEADER_BYTES + len;
  }
  if (hsBytes) put(RecordType.HardState, hsBytes);
  assert.equal(at, total);
  return buf;
}

function entryIndexOf(p: Buffer): number {
  assert(p.length >= ENTRY_HEADER_BYTES, 'WAL entry record too short');
  return p.readUInt32BE(8) * 0x100000000 + p.readUInt32BE(12);
}

/** The term of an entry record (after entryIndexOf checked its length). */
function entryTermOf(p: Buffer): number {
  return p.readUInt32BE(0) * 0x100000000 + p.readUInt32BE(4);
}

/** An entry record's index, term and type, and how much data follows them. */
function decodeEntryHead(p: Buffer): EntryHead {
  const index = entryIndexOf(p);
  return { term: entryTermOf(p), index, type: p.readUInt8(16), dataBytes: p.length - ENTRY_HEADER_BYTES };
}

function decodeEntryPayload(p: Buffer): Entry {
  const index = entryIndexOf(p);
  const term = entryTermOf(p);
  // Copy: the entry outlives the file buffer it was read from. copy(), not Buffer.from(subarray):
  // 7 vs 44 ms per 28 MB in a micro-benchmark; Buffer.from was 144 ms of a restart's profile.
  const data = Buffer.allocUnsafe(p.length - ENTRY_HEADER_BYTES);
  p.copy(data, 0, ENTRY_HEADER_BYTES);
  return { term, index, type: p.readUInt8(16), data };
}

export class WalFormatError extends Error {}

/** etcd's segments begin with a walpb.Record of type crcType: protobuf bytes 08 04 after its 8-byte length. */
const ETCD_SEGMENT_SIGNATURE_OFFSET = 8;

/** Throws WalFormatError if `dir` holds WAL segments of etcd itself (reads only). */
export function assertWalDirNotEtcd(dir: string): void {
  if (!fs.existsSync(dir)) return;
  for (const seg of listSegments(dir)) assertNotEtcdSegment(seg.file);
}

function assertNotEtcdSegment(file: string): void {
  const head = Buffer.alloc(ETCD_SEGMENT_SIGNATURE_OFFSET + 2);
  const fd = fs.openSync(file, 'r');
  let n = 0;
  try {
    n = fs.readSync(fd, head, 0, head.length, 0);
  } finally {
    fs.closeSync(fd);
  }
  if (n === head.length && head[ETCD_SEGMENT_SIGNATURE_OFFSET] === 0x08 && head[ETCD_SEGMENT_SIGNATURE_OFFSET + 1] === 0x04) {
    throw new WalFormatError(
      `${file} is a WAL segment of etcd itself, not of etcd-ts: this is an etcd data directory, which etcd-ts cannot use in place ` +
        '(take a snapshot from etcd with `etcdctl snapshot save` and restore it with `etcdutl snapshot restore` into a new data directory)',
    );
  }
}

/** Replay state while reading segments in order. */
class Replay {
  identity: WalIdentity | null = null;
  hardState: HardState = { term: 0, vote: 0n, commit: 0 };
  snapshot: SnapshotMetadata | null = null;
  /** Entries with their data, or (`heads`) without it. */
  readonly entries: Array<Entry | EntryHead> = [];
  /** The segment being read (for `locations`). */
  seq = 0;

  /** `base`: the newest snapshot in the whole log; entries at or below it are history. */
  constructor(
    private readonly base: number,
    private readonly locations: EntryLocations | null,
    readonly heads: boolean,
  ) {}

  /** One record of `file` at byte offset `at` (named only in a failure message: built per record, it was a string per entry at start-up). */
  record(type: number, payload: Buffer, file: string, at: number): void {
    switch (type) {
      case RecordType.Identity: {
        const id = decodeIdentity(payload);
        if (this.identity) {
          if (this.identity.memberId !== id.memberId || this.identity.clusterId !== id.clusterId) assert.fail(`WAL identity changes at ${file}:${at}`);
        }
        this.identity = id;
        return;
      }
      case RecordType.HardState:
        this.hardState = decodeHardState(payload);
        return;
      case RecordType.Snapshot: {
        const s = decodeSnapshotMeta(payload);
        if (this.snapshot && s.index < this.snapshot.index) assert.fail(`WAL snapshot goes back from ${this.snapshot.index} to ${s.index} at ${file}:${at}`);
        this.snapshot = s;
        return;
      }
      case RecordType.Entry: {
        // History below the snapshot is skipped before its data is copied.
        if (entryIndexOf(payload) <= this.base) return;
        const e = this.heads ? decodeEntryHead(payload) : decodeEntryPayload(payload);
        const es = this.entries;
        if (es.length === 0) {
          assert.equal(e.index, this.base + 1, `WAL does not continue from its snapshot ${this.base} at ${file}:${at}`);
        } else {
          const first = es[0].index;
          const last = es[es.length - 1].index;
          if (!(e.index <= last + 1)) assert.fail(`WAL has a gap after index ${last} at ${file}:${at}`);
          // A new leader replaced the tail from this index on.
          if (e.index <= last) es.length = e.index - first;
        }
        es.push(e);
        this.locations?.put(e.index, this.seq, at, RECORD_HEADER_BYTES + payload.length);
        return;
      }
      default:
        throw new Error(`unknown WAL record type ${type} at ${file}:${at}`);
    }
  }
}

/** Valid records of one segment file, and where the intact part ends. */
function scanSegment(buf: Buffer, each: (type: number, payload: Buffer, at: number) => void, verifiedUpTo = 0): number {
  let at = 0;
  for (;;) {
    const r = readRecord(buf, at, verifiedUpTo);
    if (!r) return at;
    each(r.type, r.payload, at);
    at = r.end;
  }
}

/**
 * Replays the segment files in order into the log's contents (the last one's bytes when already
 * read), telling `locations` where each live entry is. One segment's bytes are held at a time: a log
 * of many segments is read twice rather than held whole (with the entries' data left on disk, what
 * a restart keeps is then a few dozen bytes per entry, whatever the log's size).
 */
function replaySegments(dir: string, segs: Segment[], lastBuf?: Buffer, locations: EntryLocations | null = null, heads = false): WalContents {
  const read = (i: number): Buffer => (i === segs.length - 1 && lastBuf ? lastBuf : fs.readFileSync(segs[i].file));
  // First pass: the newest snapshot decides where the live log starts. It checks the CRCs (open()
  // already checked the last segment's), so the second pass need not.
  let base = 0;
  const intact = segs.map((_, i) =>
    scanSegment(
      read(i),
      (type, payload) => {
        if (type === RecordType.Snapshot) base = Math.max(base, decodeSnapshotMeta(payload).index);
      },
      i === segs.length - 1 && lastBuf ? lastBuf.length : 0,
    ),
  );
  assert(!heads || locations, 'entries kept on disk need their locations');
  const replay = new Replay(base, locations, heads);
  for (let i = 0; i < segs.length; i++) {
    replay.seq = segs[i].seq;
    const buf = read(i);
    const end = scanSegment(buf, (type, payload, at) => replay.record(type, payload, segs[i].file, at), intact[i]);
    // Only the last segment may end in a torn write; an earlier one was complete when the next began.
    if (i < segs.length - 1) assert.equal(end, buf.length, `WAL segment ${segs[i].file} is damaged at offset ${end}`);
  }
  assert(replay.identity, `WAL at ${dir} has no identity`);
  const lastIndex = replay.entries.length > 0 ? replay.entries[replay.entries.length - 1].index : base;
  assert(replay.hardState.commit <= lastIndex, 'WAL hard state commits past its last entry');
  const es = replay.entries;
  return {
    identity: replay.identity,
    hardState: replay.hardState,
    snapshot: replay.snapshot,
    entries: heads ? [] : (es as Entry[]),
    entryHeads: heads ? (es as EntryHead[]) : [],
  };
}

export class Wal {
  private readonly syncer: Syncer;
  private identity: WalIdentity | null;
  private lastIndex: number;
  private hardState: HardState | null;
  private snapshot: SnapshotMetadata | null;
  private closed = false;
  /** The contents as read by open() (start-up asks for them next), until the first write. */
  private opened: WalContents | null;
  /** Size of the current segment file: records up to `offset`, zeros after it. */
  private fileBytes: number;
  /** Where each entry after the last compaction or snapshot was written (readEntryData). */
  private readonly locations: EntryLocations;
  /** The last stretch of a segment read by readEntryData: followers catching up read on from there. */
  private readAhead: { seq: number; at: number; buf: Buffer } | null = null;

  private constructor(
    readonly dir: string,
    private readonly segmentBytes: number,
    private segments: Segment[],
    private fd: number,
    private offset: number,
    contents: WalContents | null,
    locations: EntryLocations,
    unsafeNoFsync = false,
  ) {
    this.locations = locations;
    this.opened = contents;
    this.fileBytes = offset;
    this.identity = contents?.identity ?? null;
    this.hardState = contents?.hardState ?? null;
    this.snapshot = contents?.snapshot ?? null;
    const es: Array<Entry | EntryHead> = contents ? (contents.entries.length > 0 ? contents.entries : contents.entryHeads) : [];
    this.lastIndex = es.length > 0 ? es[es.length - 1].index : (contents?.snapshot?.index ?? 0);
    this.syncer = new Syncer(fd, unsafeNoFsync);
  }

  /**
   * Open (or start) the log in `dir`. A torn record at the end of the last segment (a write cut
   * short by a crash, never acknowledged) is cut off; damage anywhere else is refused.
   */
  static open(dir: string, opts: WalOptions = {}): Wal {
    const segmentBytes = opts.segmentBytes ?? DEFAULT_SEGMENT_BYTES;
    assert(segmentBytes >= 4096, 'WAL segment size too small');
    mkdirDurable(dir, 0o700, opts.unsafeNoFsync === true);
    // A segment being started when the process died: its predecessor is still the last one.
    for (const name of fs.readdirSync(dir)) if (name.endsWith('.wal.tmp')) fs.rmSync(path.join(dir, name));
    let segs = listSegments(dir);
    if (segs.length === 0) {
      const legacy = migrateLegacyWal(dir);
      if (legacy) {
        const file = path.join(dir, segmentName(0, legacy.snapshot ? legacy.snapshot.index + 1 : 1));
        const buf = encodeRecords(legacy.hardState, legacy.entries, legacy.snapshot, legacy.identity);
        const fd = fs.openSync(file, 'w', 0o600);
        fs.writeSync(fd, buf);
        fs.fsyncSync(fd);
        fs.closeSync(fd);
        fsyncDir(dir);
        legacy.remove();
        segs = listSegments(dir);
      }
    }
    if (segs.length === 0) {
      const file = path.join(dir, segmentName(0, 1));
      const fd = fs.openSync(file, 'w+', 0o600);
      fsyncDir(dir);
      return new Wal(dir, segmentBytes, [{ seq: 0, firstIndex: 1, file }], fd, 0, null, new EntryLocations(), opts.unsafeNoFsync);
    }
    const last = segs[segs.length - 1];
    // etcd's own WAL uses the same file names; read as ours it is one long torn tail, and cutting
    // that off would erase it. Refuse before anything is written.
    for (const seg of segs) assertNotEtcdSegment(seg.file);
    const buf = fs.readFileSync(last.file);
    const intact = scanSegment(buf, () => {});
    if (intact === 0 && buf.some((b) => b !== 0)) {
      // Every segment of ours starts with a record written and synced before the segment is used:
      // a first record that does not read is not a torn write, and what follows is not ours to cut.
      throw new WalFormatError(`WAL segment ${last.file} does not begin with a record of etcd-ts; refusing to start rather than cut it off`);
    }
    const fd = fs.openSync(last.file, 'r+');
    if (intact < buf.length) {
      // Whatever follows the last intact record was never acknowledged: make the file end there,
      // so a later append is not followed by stale bytes.
      fs.ftruncateSync(fd, intact);
      fs.fsyncSync(fd);
    }
    // An empty only segment: a member whose creation never wrote its identity.
    const locations = new EntryLocations();
    const onDisk = opts.entryData === 'on-disk';
    const contents = segs.length > 1 || intact > 0 ? replaySegments(dir, segs, buf.subarray(0, intact), locations, onDisk) : null;
    return new Wal(dir, segmentBytes, segs, fd, intact, contents, locations, opts.unsafeNoFsync);
  }

  /** Whether this log belongs to a member already (create() completed). */
  hasIdentity(): boolean {
    return this.identity !== null;
  }

  /** Create a new member's log. Fails if one exists already. */
  async create(identity: WalIdentity): Promise<void> {
    assert(this.identity === null, 'WAL already has an identity');
    this.identity = identity;
    this.append(encodeRecords(null, [], null, identity));
    await this.syncer.sync();
  }

  /**
   * Everything the log holds: as read when opened (entries' data on disk if opened so) until the
   * first write, then replayed from the files with the data in memory.
   */
  readAll(): WalContents {
    return this.opened ?? replaySegments(this.dir, this.segments);
  }

  /** How long the last save's write() of its records took, without the fdatasync (etcd_disk_wal_write_duration_seconds). */
  lastWriteSeconds = 0;

  /**
   * Persist what a Raft Ready asks for. The records reach the file (the page cache) before this
   * returns control, so they survive the process being killed; with `mustSync` the promise resolves
   * only after fdatasync, so they survive the machine losing power too.
   *
   * `inlineSync` runs that fdatasync on the event loop's thread instead of libuv's pool. It blocks
   * the loop for the disk's flush (0.25-0.5 ms here), but skips the hand-off to a pool thread and
   * the wake-up back (0.1-0.15 ms per sync on these VMs): the right trade when nothing else is
   * waiting for the loop, e.g. one client writing. Under load, the pool lets the loop parse the next
   * batch while the disk works.
   */
  async save(hardState: HardState | null, entries: Entry[], snapshot: Snapshot | null, mustSync = true, inlineSync = false): Promise<number> {
    if (!hardState && entries.length === 0 && !snapshot) return 0;
    assert(this.identity, 'WAL save before create');
    const snapMeta = snapshot ? snapshot.metadata : null;
    // A snapshot from the leader replaces the whole log, as it does in Raft's storage.
    if (snapMeta) this.locations.reset();
    // append() writes the buffer at `offset` of the current segment, or fails and stops the member.
    const base = this.offset;
    const seq = this.segments[this.segments.length - 1].seq;
    const buf = encodeRecords(hardState, entries, snapMeta, null, (index, at, recordBytes) => this.locations.put(index, seq, base + at, recordBytes));
    const writeStartMs = performance.now();
    this.append(buf);
    this.lastWriteSeconds = (performance.now() - writeStartMs) / 1000;
    if (snapMeta) {
      this.snapshot = snapMeta;
      if (entries.length === 0) this.lastIndex = snapMeta.index;
    }
    if (entries.length > 0) this.lastIndex = entries[entries.length - 1].index;
    if (hardState) this.hardState = hardState;
    if (mustSync) {
      if (inlineSync) this.syncer.syncNow();
      else await this.syncer.sync();
    }
    this.maybeCut();
    return buf.length;
  }

  /** Record a durable snapshot and drop segments whose entries all precede `index`. */
  async compact(index: number, snapshot: SnapshotMetadata): Promise<void> {
    this.append(encodeRecords(null, [], snapshot, null));
    this.snapshot = snapshot;
    await this.syncer.sync();
    this.locations.dropUpTo(index);
    this.readAhead = null;
    // Segment k holds nothing needed once the next one starts at or below `index`; every segment
    // begins with identity, snapshot and hard state, so the oldest one left is self-contained.
    while (this.segments.length > 1 && this.segments[1].firstIndex <= index) {
      const gone = this.segments.shift();
      assert(gone);
      fs.unlinkSync(gone.file);
    }
  }

  private append(buf: Buffer): void {
    assert(!this.closed, 'WAL is closed');
    assert(this.fileBytes >= this.offset, 'WAL segment file shorter than its records');
    this.opened = null;
    let done = 0;
    while (done < buf.length) done += fs.writeSync(this.fd, buf, done, buf.length - done, this.offset + done);
    this.offset += buf.length;
    if (this.offset > this.fileBytes) this.fileBytes = this.offset;
    // Grow the file ahead of the records, once per PREALLOC_BYTES, not on every write. The zeros
    // go behind the records just written (never over them) and reach the disk with their sync.
    const target = Math.min(this.offset + PREALLOC_BYTES, this.segmentBytes);
    if (this.fileBytes - this.offset < PREALLOC_BYTES / 2 && target > this.fileBytes) {
      zeros ??= Buffer.alloc(PREALLOC_BYTES);
      while (this.fileBytes < target) this.fileBytes += fs.writeSync(this.fd, zeros, 0, target - this.fileBytes, this.fileBytes);
    }
  }

  /** Drop the zero-filled tail, so that the file ends where its records do. */
  private trimTail(): void {
    if (this.fileBytes === this.offset) return;
    fs.ftruncateSync(this.fd, this.offset);
    this.fileBytes = this.offset;
  }

  /** Start a new segment once the current one is full (etcd's cut). */
  private maybeCut(): void {
    if (this.offset < this.segmentBytes || this.closed) return;
    // Everything in the old segment must be durable before the new one can be trusted to follow it,
    // and it must end with its last record (replay checks that every segment but the last does).
    this.trimTail();
    fs.fdatasyncSync(this.fd);
    const prev = this.segments[this.segments.length - 1];
    const seg: Segment = { seq: prev.seq + 1, firstIndex: this.lastIndex + 1, file: '' };
    seg.file = path.join(this.dir, segmentName(seg.seq, seg.firstIndex));
    const tmp = `${seg.file}.tmp`;
    const fd = fs.openSync(tmp, 'w+', 0o600);
    const head = encodeRecords(this.hardState, [], this.snapshot, this.identity);
    fs.writeSync(fd, head, 0, head.length, 0);
    fs.fdatasyncSync(fd);
    fs.renameSync(tmp, seg.file);
    fsyncDir(this.dir);
    const oldFd = this.fd;
    this.fd = fd;
    this.offset = head.length;
    this.fileBytes = head.length;
    this.segments.push(seg);
    this.syncer.switchTo(fd, oldFd);
  }

  /**
   * The data of entry `index`, read back from its record; the record must hold that index and term.
   * For the Raft log's released entries: a follower catching up reads on through a segment, so a
   * read fetches READ_AHEAD_BYTES and serves the next entries from them.
   */
  readEntryData(index: number, term: number): Buffer {
    assert(!this.closed, 'WAL is closed');
    const loc = this.locations.get(index);
    if (!loc) assert.fail(`entry ${index} is not in the WAL`);
    const { seq, at, recordBytes } = loc;
    let ra = this.readAhead;
    if (!ra || ra.seq !== seq || at < ra.at || at + recordBytes > ra.at + ra.buf.length) {
      const seg = this.segments.find((s) => s.seq === seq);
      if (!seg) assert.fail(`WAL segment ${seq} of entry ${index} is gone`);
      const current = seg === this.segments[this.segments.length - 1];
      // Of the segment being written, only what is written so far: zeros follow it.
      const want = Math.max(recordBytes, Math.min(READ_AHEAD_BYTES, current ? this.offset - at : READ_AHEAD_BYTES));
      const buf = Buffer.allocUnsafe(want);
      const fd = current ? this.fd : fs.openSync(seg.file, 'r');
      let got = 0;
      try {
        while (got < want) {
          const n = fs.readSync(fd, buf, got, want - got, at + got);
          if (n === 0) break;
          got += n;
        }
      } finally {
        if (!current) fs.closeSync(fd);
      }
      if (got < recordBytes) assert.fail(`WAL segment ${seg.file} ends inside entry ${index} (at ${at})`);
      ra = { seq, at, buf: buf.subarray(0, got) };
      this.readAhead = ra;
    }
    const r = readRecord(ra.buf, at - ra.at);
    if (!r || r.type !== RecordType.Entry || r.end !== at - ra.at + recordBytes) assert.fail(`WAL record of entry ${index} does not read back (segment ${seq}, at ${at})`);
    const e = decodeEntryPayload(r.payload);
    if (e.index !== index || e.term !== term) assert.fail(`WAL holds entry ${e.index} term ${e.term} where ${index} term ${term} was written`);
    return e.data;
  }

  /** Segment files currently in use (for tests and metrics). */
  segmentFiles(): string[] {
    return this.segments.map((s) => s.file);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.trimTail();
    await this.syncer.sync();
    this.closed = true;
    await this.syncer.close();
  }
}

// Record keys of the KV sub-database: etcd's on-disk revision layout, so records sort by
// (main, sub) and HashKV over them matches etcd's: 8 bytes big-endian main revision, '_',
// 8 bytes big-endian sub revision, and a trailing 't' when the record is a tombstone.
import assert from 'node:assert';

export const REV_BYTES = 17;
export const MARKED_REV_BYTES = 18;
const MARK_TOMBSTONE = 0x74; // 't'

export interface Revision {
  main: number;
  sub: number;
}

const TWO_32 = 0x1_0000_0000;

function writeU64(b: Buffer, v: number, at: number): void {
  // Two 32-bit halves: exact for every safe integer, and no BigInt on the hot path. Byte by
  // byte: writeUInt32BE's argument checks cost more than the writes (one per record read).
  const hi = Math.floor(v / TWO_32);
  const lo = v >>> 0;
  b[at] = hi >>> 24;
  b[at + 1] = (hi >>> 16) & 0xff;
  b[at + 2] = (hi >>> 8) & 0xff;
  b[at + 3] = hi & 0xff;
  b[at + 4] = lo >>> 24;
  b[at + 5] = (lo >>> 16) & 0xff;
  b[at + 6] = (lo >>> 8) & 0xff;
  b[at + 7] = lo & 0xff;
}

function readU64(b: Buffer, at: number): number {
  const hi = b.readUInt32BE(at);
  const lo = b.readUInt32BE(at + 4);
  // hi * 2^32 is a double even when hi is 0, and a double stored into a KeyIndex field makes
  // V8 box that field in every KeyIndex (16 bytes each): small revisions stay small integers.
  if (hi === 0) return lo;
  const v = hi * TWO_32 + lo;
  assert(Number.isSafeInteger(v), 'revision beyond 2^53');
  return v;
}

/** Writes the record key of (main, sub) into `into` (fresh when not given). */
export function revToBytes(main: number, sub: number, tombstone = false, into?: Buffer): Buffer {
  assert(Number.isSafeInteger(main) && main >= 0 && Number.isSafeInteger(sub) && sub >= 0);
  const len = tombstone ? MARKED_REV_BYTES : REV_BYTES;
  const b = into && into.length === len ? into : Buffer.allocUnsafe(len);
  writeU64(b, main, 0);
  b[8] = 0x5f; // '_'
  writeU64(b, sub, 9);
  if (tombstone) b[17] = MARK_TOMBSTONE;
  return b;
}

export function bytesToRev(b: Uint8Array): Revision {
  if (b.length !== REV_BYTES && b.length !== MARKED_REV_BYTES) assert.fail(`bad revision key length ${b.length}`);
  const buf = Buffer.isBuffer(b) ? b : Buffer.from(b.buffer, b.byteOffset, b.length);
  return { main: readU64(buf, 0), sub: readU64(buf, 9) };
}

export function isTombstoneKey(b: Uint8Array): boolean {
  return b.length === MARKED_REV_BYTES && b[17] === MARK_TOMBSTONE;
}

/** A map key for a revision pair (used for the compaction keep-set). */
export function revId(main: number, sub: number): string {
  return `${main}_${sub}`;
}

/** What a key index's compaction adds the revisions it keeps to (RevisionSet, KeptRevisions). */
export interface RevisionSink {
  add(main: number, sub: number): void;
  /** Takes back the revision added last (KeyIndex.keep leaves a closing tombstone out). */
  delete(main: number, sub: number): void;
}

/**
 * A set of revisions as revId()s: RevisionTable's room for those its packing cannot hold (rare),
 * and a sink for tests. Compaction and HashKV keep their revisions in a RevisionTable.
 */
export class RevisionSet implements RevisionSink {
  private readonly ids = new Set<string>();

  add(main: number, sub: number): void {
    this.ids.add(revId(main, sub));
  }

  has(main: number, sub: number): boolean {
    return this.ids.has(revId(main, sub));
  }

  delete(main: number, sub: number): boolean {
    return this.ids.delete(revId(main, sub));
  }

  get size(): number {
    return this.ids.size;
  }

  /** The revisions as revId()s, in no particular order. */
  [Symbol.iterator](): IterableIterator<string> {
    return this.ids.values();
  }
}

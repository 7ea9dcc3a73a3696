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

export function revToBytes(main: number, sub: number, tombstone = false): Buffer {
  assert(Number.isSafeInteger(main) && main >= 0 && Number.isSafeInteger(sub) && sub >= 0);
  const b = Buffer.alloc(tombstone ? MARKED_REV_BYTES : REV_BYTES);
  b.writeBigUInt64BE(BigInt(main), 0);
  b[8] = 0x5f; // '_'
  b.writeBigUInt64BE(BigInt(sub), 9);
  if (tombstone) b[17] = MARK_TOMBSTONE;
  return b;
}

export function bytesToRev(b: Uint8Array): Revision {
  assert(b.length === REV_BYTES || b.length === MARKED_REV_BYTES, `bad revision key length ${b.length}`);
  const buf = Buffer.from(b.buffer, b.byteOffset, b.length);
  const main = Number(buf.readBigUInt64BE(0));
  const sub = Number(buf.readBigUInt64BE(9));
  return { main, sub };
}

export function isTombstoneKey(b: Uint8Array): boolean {
  return b.length === MARKED_REV_BYTES && b[17] === MARK_TOMBSTONE;
}

/** A map key for a revision pair (used for the compaction keep-set). */
export function revId(main: number, sub: number): string {
  return `${main}_${sub}`;
}

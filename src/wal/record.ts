// Framing of WAL records in segment files: [payload length u32 LE][crc32 u32 LE][type u8][payload].
// The CRC covers the type byte and the payload, so a torn or garbage tail is detected on read.
import assert from 'node:assert';
import zlib from 'node:zlib';

export const RECORD_HEADER_BYTES = 9;
/** A record larger than this is garbage (entries are bounded by max-request-bytes, far below). */
export const MAX_RECORD_BYTES = 1 << 30;

export const enum RecordType {
  Identity = 1,
  Entry = 2,
  HardState = 3,
  Snapshot = 4,
}

assert(typeof zlib.crc32 === 'function', 'this Node.js has no zlib.crc32 (needs 20.15 or later)');

/** Write a record header for the payload already at buf[at + RECORD_HEADER_BYTES, +payloadBytes). */
export function sealRecord(buf: Buffer, at: number, type: RecordType, payloadBytes: number): void {
  if (!(payloadBytes <= MAX_RECORD_BYTES)) assert.fail(`WAL record of ${payloadBytes} bytes is too large`);
  buf.writeUInt32LE(payloadBytes, at);
  buf.writeUInt8(type, at + 8);
  buf.writeUInt32LE(zlib.crc32(buf.subarray(at + 8, at + RECORD_HEADER_BYTES + payloadBytes)), at + 4);
}

export interface RecordView {
  type: number;
  payload: Buffer;
  /** Offset just past this record. */
  end: number;
}

/**
 * The record at `at`, or null when what is there is not a complete, intact record. Bytes below
 * `verifiedUpTo` were CRC-checked by an earlier pass over the same buffer and are not checked again.
 */
export function readRecord(buf: Buffer, at: number, verifiedUpTo = 0): RecordView | null {
  if (at + RECORD_HEADER_BYTES > buf.length) return null;
  const len = buf.readUInt32LE(at);
  // A zero length is what a preallocated or zero-filled tail reads as.
  if (len === 0 || len > MAX_RECORD_BYTES) return null;
  const end = at + RECORD_HEADER_BYTES + len;
  if (end > buf.length) return null;
  const crc = buf.readUInt32LE(at + 4);
  if (end > verifiedUpTo && zlib.crc32(buf.subarray(at + 8, end)) !== crc) return null;
  return { type: buf.readUInt8(at + 8), payload: buf.subarray(at + RECORD_HEADER_BYTES, end), end };
}

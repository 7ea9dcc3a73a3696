// Encoded protobuf size of a WatchResponse, computed from the plain object so the
// fragmentation decision (etcd's sendFragments) costs no encoding.
import type * as pb from '../pb/types';

function varintLen(n: number): number {
  let len = 1;
  while (n >= 0x80) {
    n = Math.floor(n / 128);
    len++;
  }
  return len;
}

/** Bytes of an int64/uint64 varint given as a decimal string or number (0 when unset). */
function int64Len(v: string | number | null | undefined): number {
  if (v === undefined || v === null) return 0;
  let b = BigInt(v);
  if (b === 0n) return 0;
  if (b < 0n) return 10; // negative int64 is always ten bytes
  let len = 1;
  while (b >= 0x80n) {
    b >>= 7n;
    len++;
  }
  return len;
}

/** Tag + varint value, or nothing for the proto3 default. */
function intField(v: string | number | null | undefined): number {
  const n = int64Len(v);
  return n === 0 ? 0 : 1 + n;
}

function bytesField(len: number, alwaysEmit = false): number {
  if (len === 0 && !alwaysEmit) return 0;
  return 1 + varintLen(len) + len;
}

function messageField(size: number): number {
  return 1 + varintLen(size) + size;
}

export function keyValueSize(kv: pb.KeyValue): number {
  return (
    bytesField(kv.key?.length ?? 0) +
    intField(kv.createRevision) +
    intField(kv.modRevision) +
    intField(kv.version) +
    bytesField(kv.value?.length ?? 0) +
    intField(kv.lease)
  );
}

export function eventSize(ev: pb.Event): number {
  let size = intField(ev.type);
  if (ev.kv) size += messageField(keyValueSize(ev.kv));
  if (ev.prevKv) size += messageField(keyValueSize(ev.prevKv));
  return size;
}

export function headerSize(h: pb.ResponseHeader): number {
  return intField(h.clusterId) + intField(h.memberId) + intField(h.revision) + intField(h.raftTerm);
}

/** Size of everything but the events. */
export function watchResponseBaseSize(wr: pb.WatchResponse): number {
  let size = 0;
  if (wr.header) size += messageField(headerSize(wr.header));
  size += intField(wr.watchId);
  if (wr.created) size += 2;
  if (wr.canceled) size += 2;
  size += intField(wr.compactRevision);
  size += bytesField(Buffer.byteLength(wr.cancelReason ?? ''));
  if (wr.fragment) size += 2;
  return size;
}

export function watchResponseSize(wr: pb.WatchResponse): number {
  let size = watchResponseBaseSize(wr);
  for (const ev of wr.events ?? []) size += messageField(eventSize(ev));
  return size;
}

// Conversion between the Raft core's messages (bigint IDs, number index/term) and raftpb bytes,
// plus the MessageBatch framing of the peer stream.
import assert from 'node:assert';
import * as protobuf from 'protobufjs';
import { FRAME_HEADER_BYTES } from '../grpcjs/wire';
import { messageType } from '../pb/internal';
import type * as pb from '../pb/types';
import type { MessageInit } from '../pb/types';
import type { ConfState, Entry, Message, Snapshot } from '../raft/types';
import { decodeMessageFast, encodeMessageFast, WireError } from './message_wire';

/** MessageBatch.msgs: field 1, length-delimited. */
const BATCH_MSGS_TAG = (1 << 3) | 2;

function u64(n: number): string {
  if (!(Number.isSafeInteger(n) && n >= 0)) assert.fail(`not a uint64-safe number: ${n}`);
  return String(n);
}

function id(n: bigint): string {
  if (!(n >= 0n && n < 1n << 64n)) assert.fail(`not a uint64 ID: ${n}`);
  return n.toString();
}

function num(s: string): number {
  const n = Number(s);
  // Index/term/commit above 2^53 cannot come from a sane peer; refuse instead of rounding.
  if (!Number.isSafeInteger(n)) assert.fail(`uint64 beyond 2^53 in raft message: ${s}`);
  return n;
}

function confStateToPb(cs: ConfState): MessageInit<pb.ConfState> {
  return {
    voters: cs.voters.map(id),
    learners: cs.learners.map(id),
    votersOutgoing: cs.votersOutgoing.map(id),
    learnersNext: cs.learnersNext.map(id),
    autoLeave: cs.autoLeave,
  };
}

function confStateFromPb(cs: pb.ConfState | null): ConfState {
  if (cs === null) return { voters: [], learners: [], votersOutgoing: [], learnersNext: [], autoLeave: false };
  return {
    voters: cs.voters.map((v) => BigInt(v)),
    learners: cs.learners.map((v) => BigInt(v)),
    votersOutgoing: cs.votersOutgoing.map((v) => BigInt(v)),
    learnersNext: cs.learnersNext.map((v) => BigInt(v)),
    autoLeave: cs.autoLeave,
  };
}

function snapshotToPb(s: Snapshot): MessageInit<pb.Snapshot> {
  return {
    data: s.data,
    metadata: { index: u64(s.metadata.index), term: u64(s.metadata.term), confState: confStateToPb(s.metadata.confState) },
  };
}

function snapshotFromPb(s: pb.Snapshot): Snapshot {
  const md = s.metadata;
  return {
    data: s.data,
    metadata: {
      index: md === null ? 0 : num(md.index),
      term: md === null ? 0 : num(md.term),
      confState: confStateFromPb(md === null ? null : md.confState),
    },
  };
}

function entryToPb(e: Entry): MessageInit<pb.Entry> {
  return { Term: u64(e.term), Index: u64(e.index), Type: e.type, Data: e.data };
}

function entryFromPb(e: pb.Entry): Entry {
  return { term: num(e.Term), index: num(e.Index), type: e.Type, data: e.Data };
}

export function messageToPb(m: Message): MessageInit<pb.Message> {
  const out: MessageInit<pb.Message> = {
    type: m.type,
    to: id(m.to),
    from: id(m.from),
    term: u64(m.term),
    logTerm: u64(m.logTerm),
    index: u64(m.index),
    entries: m.entries.map(entryToPb),
    commit: u64(m.commit),
    reject: m.reject,
    rejectHint: u64(m.rejectHint),
  };
  if (m.snapshot !== null) out.snapshot = snapshotToPb(m.snapshot);
  if (m.context !== null) out.context = m.context;
  return out;
}

export function messageFromPb(p: pb.Message): Message {
  return {
    type: p.type,
    to: BigInt(p.to),
    from: BigInt(p.from),
    term: num(p.term),
    logTerm: num(p.logTerm),
    index: num(p.index),
    entries: p.entries.map(entryFromPb),
    commit: num(p.commit),
    snapshot: p.snapshot === null ? null : snapshotFromPb(p.snapshot),
    reject: p.reject,
    rejectHint: num(p.rejectHint),
    // The core tests `context !== null`; an absent field and an empty one mean the same.
    context: p.context.length === 0 ? null : p.context,
  };
}

// The hot path below skips the proto-loader object shapes (decimal strings, then BigInt/Number):
// it hands protobufjs numbers and {low, high} pairs directly and reads its Longs back, which is
// several times cheaper per message than encodeMessage/decodeMessage.

interface LongLike {
  low: number;
  high: number;
  unsigned?: boolean;
}

type WireU64 = number | LongLike;

const TWO_32 = 2 ** 32;
const MAX_SAFE_BIG = BigInt(Number.MAX_SAFE_INTEGER);

const U64_LIMIT = 1n << 64n;

// Checks build their message only on failure: a template string per field would dominate the cost.
function idToWire(n: bigint): WireU64 {
  if (n < 0n || n >= U64_LIMIT) assert.fail(`not a uint64 ID: ${n}`);
  if (n <= MAX_SAFE_BIG) return Number(n);
  return { low: Number(n & 0xffffffffn) | 0, high: Number(n >> 32n) | 0, unsigned: true };
}

function numToWire(n: number): number {
  if (!(Number.isSafeInteger(n) && n >= 0)) assert.fail(`not a uint64-safe number: ${n}`);
  return n;
}

function wireToBigint(v: WireU64 | null | undefined): bigint {
  if (v === null || v === undefined) return 0n;
  if (typeof v === 'number') return BigInt(v);
  return (BigInt(v.high >>> 0) << 32n) | BigInt(v.low >>> 0);
}

function wireToNumber(v: WireU64 | null | undefined): number {
  if (v === null || v === undefined) return 0;
  if (typeof v === 'number') return v;
  const n = (v.high >>> 0) * TWO_32 + (v.low >>> 0);
  // Index/term/commit above 2^53 cannot come from a sane peer; refuse instead of rounding.
  if (!Number.isSafeInteger(n)) assert.fail('uint64 beyond 2^53 in raft message');
  return n;
}

interface WireEntry {
  Term?: WireU64;
  Index?: WireU64;
  Type?: number;
  Data?: Uint8Array;
}
interface WireConfState {
  voters?: WireU64[];
  learners?: WireU64[];
  votersOutgoing?: WireU64[];
  learnersNext?: WireU64[];
  autoLeave?: boolean;
}
interface WireSnapshot {
  data?: Uint8Array;
  metadata?: { confState?: WireConfState | null; index?: WireU64; term?: WireU64 } | null;
}
interface WireMessage {
  type?: number;
  to?: WireU64;
  from?: WireU64;
  term?: WireU64;
  logTerm?: WireU64;
  index?: WireU64;
  entries?: WireEntry[];
  commit?: WireU64;
  snapshot?: WireSnapshot | null;
  reject?: boolean;
  rejectHint?: WireU64;
  context?: Uint8Array;
}

function asBuffer(u: Uint8Array | null | undefined): Buffer {
  if (u === undefined || u === null) return Buffer.alloc(0);
  if (Buffer.isBuffer(u)) return u;
  // protobufjs hands some bytes fields of odd input over as plain arrays (found by fuzzing:
  // a TypeError out of Buffer.from on a peer's message).
  if (u instanceof Uint8Array) return Buffer.from(u.buffer, u.byteOffset, u.byteLength);
  if (Array.isArray(u)) return Buffer.from(u as number[]);
  throw new WireError('bytes field of unknown shape in raft message');
}

function toWire(m: Message): WireMessage {
  const w: WireMessage = {
    type: m.type,
    to: idToWire(m.to),
    from: idToWire(m.from),
    term: numToWire(m.term),
    logTerm: numToWire(m.logTerm),
    index: numToWire(m.index),
    entries: m.entries.map((e) => ({ Term: numToWire(e.term), Index: numToWire(e.index), Type: e.type, Data: e.data })),
    commit: numToWire(m.commit),
    reject: m.reject,
    rejectHint: numToWire(m.rejectHint),
  };
  if (m.snapshot !== null) {
    const md = m.snapshot.metadata;
    const cs = md.confState;
    w.snapshot = {
      data: m.snapshot.data,
      metadata: {
        index: numToWire(md.index),
        term: numToWire(md.term),
        confState: {
          voters: cs.voters.map(idToWire),
          learners: cs.learners.map(idToWire),
          votersOutgoing: cs.votersOutgoing.map(idToWire),
          learnersNext: cs.learnersNext.map(idToWire),
          autoLeave: cs.autoLeave,
        },
      },
    };
  }
  if (m.context !== null) w.context = m.context;
  return w;
}

function fromWire(w: WireMessage): Message {
  let snapshot: Snapshot | null = null;
  if (w.snapshot !== null && w.snapshot !== undefined) {
    const md = w.snapshot.metadata ?? null;
    const cs = md?.confState ?? null;
    snapshot = {
      data: asBuffer(w.snapshot.data),
      metadata: {
        index: wireToNumber(md?.index),
        term: wireToNumber(md?.term),
        confState: {
          voters: (cs?.voters ?? []).map(wireToBigint),
          learners: (cs?.learners ?? []).map(wireToBigint),
          votersOutgoing: (cs?.votersOutgoing ?? []).map(wireToBigint),
          learnersNext: (cs?.learnersNext ?? []).map(wireToBigint),
          autoLeave: cs?.autoLeave ?? false,
        },
      },
    };
  }
  const context = w.context === undefined || w.context.length === 0 ? null : asBuffer(w.context);
  return {
    type: w.type ?? 0,
    to: wireToBigint(w.to),
    from: wireToBigint(w.from),
    term: wireToNumber(w.term),
    logTerm: wireToNumber(w.logTerm),
    index: wireToNumber(w.index),
    entries: (w.entries ?? []).map((e) => ({
      term: wireToNumber(e.Term),
      index: wireToNumber(e.Index),
      type: e.Type ?? 0,
      data: asBuffer(e.Data),
    })),
    commit: wireToNumber(w.commit),
    snapshot,
    reject: w.reject ?? false,
    rejectHint: wireToNumber(w.rejectHint),
    context,
  };
}

export function encodeRaftMessage(m: Message): Buffer {
  if (m.snapshot === null) return encodeMessageFast(m);
  const out = messageType('raftpb.Message').encode(toWire(m)).finish();
  return Buffer.from(out.buffer, out.byteOffset, out.byteLength);
}

export function decodeRaftMessage(buf: Uint8Array): Message {
  const b = Buffer.isBuffer(buf) ? buf : Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
  return decodeMessageFast(b) ?? fromWire(messageType('raftpb.Message').decode(b) as unknown as WireMessage);
}

/** A MessageBatch holding already-encoded raftpb.Messages. */
export function encodeBatch(encoded: readonly Buffer[]): Buffer {
  const w = protobuf.Writer.create();
  for (const b of encoded) w.uint32(BATCH_MSGS_TAG).bytes(b);
  const out = w.finish();
  return Buffer.from(out.buffer, out.byteOffset, out.byteLength);
}

/** Bytes of `n` as a protobuf varint. */
function varintBytes(n: number): number {
  let bytes = 1;
  while (n >= 0x80) {
    n = Math.floor(n / 0x80);
    bytes++;
  }
  return bytes;
}

/**
 * A MessageBatch of already-encoded raftpb.Messages, preceded by the gRPC message prefix, in one
 * buffer: the raw stream writes it as is, grpc-js gets the view after the prefix.
 */
export function encodeFramedBatch(encoded: readonly Buffer[]): Buffer {
  let bodyBytes = 0;
  for (const b of encoded) bodyBytes += 1 + varintBytes(b.length) + b.length;
  const out = Buffer.allocUnsafe(FRAME_HEADER_BYTES + bodyBytes);
  out[0] = 0;
  out.writeUInt32BE(bodyBytes, 1);
  let pos = FRAME_HEADER_BYTES;
  for (const b of encoded) {
    out[pos++] = BATCH_MSGS_TAG;
    let n = b.length;
    while (n >= 0x80) {
      out[pos++] = (n & 0x7f) | 0x80;
      n = Math.floor(n / 0x80);
    }
    out[pos++] = n;
    pos += b.copy(out, pos);
  }
  assert.equal(pos, out.length);
  return out;
}

/** The encoded raftpb.Messages of a MessageBatch (unknown fields are skipped). */
export function decodeBatch(buf: Uint8Array): Buffer[] {
  const r = protobuf.Reader.create(buf);
  const out: Buffer[] = [];
  while (r.pos < r.len) {
    const tag = r.uint32();
    if (tag === BATCH_MSGS_TAG) {
      const b = r.bytes();
      out.push(Buffer.from(b.buffer, b.byteOffset, b.byteLength));
    } else {
      r.skipType(tag & 7);
    }
  }
  return out;
}

/** Wire size of one message inside a MessageBatch (tag + length prefix + body). */
export function framedSizeBytes(encodedLength: number): number {
  let lenBytes = 1;
  for (let n = encodedLength; n >= 128; n = Math.floor(n / 128)) lenBytes++;
  return 1 + lenBytes + encodedLength;
}

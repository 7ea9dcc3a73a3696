// Conversion between the Raft core's messages (bigint IDs, number index/term) and raftpb bytes,
// plus the MessageBatch framing of the peer stream.
import assert from 'node:assert';
import * as protobuf from 'protobufjs';
import { decodeMessage, encodeMessage } from '../pb/internal';
import type * as pb from '../pb/types';
import type { MessageInit } from '../pb/types';
import type { ConfState, Entry, Message, Snapshot } from '../raft/types';

/** MessageBatch.msgs: field 1, length-delimited. */
const BATCH_MSGS_TAG = (1 << 3) | 2;

function u64(n: number): string {
  assert(Number.isSafeInteger(n) && n >= 0, `not a uint64-safe number: ${n}`);
  return String(n);
}

function id(n: bigint): string {
  assert(n >= 0n && n < 1n << 64n, `not a uint64 ID: ${n}`);
  return n.toString();
}

function num(s: string): number {
  const n = Number(s);
  // Index/term/commit above 2^53 cannot come from a sane peer; refuse instead of rounding.
  assert(Number.isSafeInteger(n), `uint64 beyond 2^53 in raft message: ${s}`);
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

export function encodeRaftMessage(m: Message): Buffer {
  return encodeMessage('raftpb.Message', messageToPb(m));
}

export function decodeRaftMessage(buf: Uint8Array): Message {
  return messageFromPb(decodeMessage('raftpb.Message', buf));
}

/** A MessageBatch holding already-encoded raftpb.Messages. */
export function encodeBatch(encoded: readonly Buffer[]): Buffer {
  const w = protobuf.Writer.create();
  for (const b of encoded) w.uint32(BATCH_MSGS_TAG).bytes(b);
  const out = w.finish();
  return Buffer.from(out.buffer, out.byteOffset, out.byteLength);
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

// Binary layouts of what the WAL stores. Fixed-width big-endian integers keep index keys
// ordered in LMDB; entries carry their own index and term so a reader can check continuity.
import assert from 'node:assert';
import type { ConfState, Entry, HardState, SnapshotMetadata } from '../raft/types';

const ENTRY_HEADER_BYTES = 17;

export function encodeIndexKey(index: number): Buffer {
  if (!(Number.isSafeInteger(index) && index >= 0)) assert.fail(`bad raft index ${index}`);
  const b = Buffer.allocUnsafe(8);
  b.writeBigUInt64BE(BigInt(index));
  return b;
}

export function encodeEntry(e: Entry): Buffer {
  const b = Buffer.allocUnsafe(ENTRY_HEADER_BYTES + e.data.length);
  b.writeBigUInt64BE(BigInt(e.term), 0);
  b.writeBigUInt64BE(BigInt(e.index), 8);
  b.writeUInt8(e.type, 16);
  e.data.copy(b, ENTRY_HEADER_BYTES);
  return b;
}

export function decodeEntry(b: Buffer): Entry {
  assert(b.length >= ENTRY_HEADER_BYTES, 'WAL entry record too short');
  return {
    term: Number(b.readBigUInt64BE(0)),
    index: Number(b.readBigUInt64BE(8)),
    type: b.readUInt8(16),
    // Copy: LMDB may reuse the buffer it handed out.
    data: Buffer.from(b.subarray(ENTRY_HEADER_BYTES)),
  };
}

export function encodeHardState(hs: HardState): Buffer {
  const b = Buffer.allocUnsafe(24);
  b.writeBigUInt64BE(BigInt(hs.term), 0);
  b.writeBigUInt64BE(hs.vote, 8);
  b.writeBigUInt64BE(BigInt(hs.commit), 16);
  return b;
}

export function decodeHardState(b: Buffer): HardState {
  assert.equal(b.length, 24, 'bad hard state record');
  return { term: Number(b.readBigUInt64BE(0)), vote: b.readBigUInt64BE(8), commit: Number(b.readBigUInt64BE(16)) };
}

interface ConfStateJson {
  voters: string[];
  learners: string[];
  votersOutgoing: string[];
  learnersNext: string[];
  autoLeave: boolean;
}

export function encodeSnapshotMeta(m: SnapshotMetadata): Buffer {
  const cs: ConfStateJson = {
    voters: m.confState.voters.map(String),
    learners: m.confState.learners.map(String),
    votersOutgoing: m.confState.votersOutgoing.map(String),
    learnersNext: m.confState.learnersNext.map(String),
    autoLeave: m.confState.autoLeave,
  };
  return Buffer.from(JSON.stringify({ index: m.index, term: m.term, confState: cs }));
}

export function decodeSnapshotMeta(b: Buffer): SnapshotMetadata {
  const raw = JSON.parse(b.toString()) as { index: number; term: number; confState: ConfStateJson };
  const confState: ConfState = {
    voters: raw.confState.voters.map(BigInt),
    learners: raw.confState.learners.map(BigInt),
    votersOutgoing: raw.confState.votersOutgoing.map(BigInt),
    learnersNext: raw.confState.learnersNext.map(BigInt),
    autoLeave: raw.confState.autoLeave,
  };
  return { index: raw.index, term: raw.term, confState };
}

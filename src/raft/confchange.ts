import assert from 'node:assert';
import { Progress } from './progress';
import { ProgressTracker } from './tracker';
import { ConfChange, ConfChangeType, ConfState } from './types';

// ---- protobuf codec of raftpb.ConfChange: ID=1 uint64, Type=2 enum, NodeID=3 uint64, Context=4 bytes.
// Fields 1-3 are always written (gogoproto non-nullable), as etcd does, so encodings are byte-identical.

function writeVarint(out: number[], v: bigint): void {
  assert(v >= 0n && v < 1n << 64n, 'varint out of uint64 range');
  while (v >= 0x80n) {
    out.push(Number(v & 0x7fn) | 0x80);
    v >>= 7n;
  }
  out.push(Number(v));
}

function readVarint(b: Buffer, pos: { p: number }): bigint {
  let result = 0n;
  let shift = 0n;
  for (;;) {
    if (pos.p >= b.length) throw new Error('ConfChange: truncated varint');
    const byte = b[pos.p++]!;
    result |= BigInt(byte & 0x7f) << shift;
    if ((byte & 0x80) === 0) break;
    shift += 7n;
    if (shift >= 70n) throw new Error('ConfChange: varint overflow');
  }
  return result & ((1n << 64n) - 1n);
}

export function encodeConfChange(cc: ConfChange): Buffer {
  const out: number[] = [];
  out.push(0x08);
  writeVarint(out, cc.id ?? 0n);
  out.push(0x10);
  writeVarint(out, BigInt(cc.type));
  out.push(0x18);
  writeVarint(out, cc.nodeId);
  const head = Buffer.from(out);
  if (cc.context === null) return head;
  const lenBytes: number[] = [0x22];
  writeVarint(lenBytes, BigInt(cc.context.length));
  return Buffer.concat([head, Buffer.from(lenBytes), cc.context]);
}

export function decodeConfChange(b: Buffer): ConfChange {
  const cc: ConfChange = { id: 0n, type: 0, nodeId: 0n, context: null };
  const pos = { p: 0 };
  while (pos.p < b.length) {
    const key = Number(readVarint(b, pos));
    const field = key >>> 3;
    const wire = key & 7;
    if (wire === 0) {
      const v = readVarint(b, pos);
      if (field === 1) cc.id = v;
      else if (field === 2) cc.type = Number(v);
      else if (field === 3) cc.nodeId = v;
    } else if (wire === 2) {
      const len = Number(readVarint(b, pos));
      if (pos.p + len > b.length) throw new Error('ConfChange: truncated bytes field');
      const bytes = Buffer.from(b.subarray(pos.p, pos.p + len));
      pos.p += len;
      if (field === 4) cc.context = bytes;
    } else if (wire === 1) {
      pos.p += 8;
    } else if (wire === 5) {
      pos.p += 4;
    } else {
      throw new Error(`ConfChange: unsupported wire type ${wire}`);
    }
  }
  if (pos.p !== b.length) throw new Error('ConfChange: truncated field');
  return cc;
}

// ---- applying a v1 change to the tracker

function cloneTracker(t: ProgressTracker): ProgressTracker {
  const c = new ProgressTracker(t.maxInflight, t.maxInflightBytes);
  c.voters = new Set(t.voters);
  c.learners = new Set(t.learners);
  // Progress objects are shared on purpose: surviving members keep their replication state.
  c.progress = new Map(t.progress);
  c.votes = new Map(t.votes);
  return c;
}

function initProgress(t: ProgressTracker, id: bigint, isLearner: boolean, lastIndex: number): void {
  // Next = lastIndex (not +1) lets the leader probe the newcomer right away; it is considered active
  // so that check-quorum does not count it against the leader before it had a chance to answer.
  const pr = new Progress(Math.max(lastIndex, 1), t.maxInflight, isLearner, t.maxInflightBytes);
  pr.recentActive = true;
  t.progress.set(id, pr);
}

/**
 * Returns a new tracker with cc applied (the input is untouched), or throws when the result would be
 * invalid (no voter left). NodeID 0 is a no-op: etcd zeroes changes it decided not to apply.
 */
export function applySimpleChange(t: ProgressTracker, cc: ConfChange, lastIndex: number): ProgressTracker {
  const c = cloneTracker(t);
  if (cc.nodeId === 0n) return c;
  const id = cc.nodeId;
  const demotesLastVoter =
    (cc.type === ConfChangeType.RemoveNode || cc.type === ConfChangeType.AddLearnerNode) && c.voters.size === 1 && c.voters.has(id);
  // Checked before anything is mutated: Progress objects are shared with the input tracker.
  if (demotesLastVoter) throw new Error('removed all voters');
  switch (cc.type) {
    case ConfChangeType.AddNode: {
      const pr = c.progress.get(id);
      if (!pr) initProgress(c, id, false, lastIndex);
      else pr.isLearner = false;
      c.learners.delete(id);
      c.voters.add(id);
      break;
    }
    case ConfChangeType.AddLearnerNode: {
      const pr = c.progress.get(id);
      if (!pr) {
        initProgress(c, id, true, lastIndex);
        c.learners.add(id);
      } else if (!pr.isLearner) {
        c.voters.delete(id);
        pr.isLearner = true;
        c.learners.add(id);
      }
      break;
    }
    case ConfChangeType.RemoveNode:
      c.voters.delete(id);
      c.learners.delete(id);
      c.progress.delete(id);
      break;
    case ConfChangeType.UpdateNode:
      break;
    default:
      throw new Error(`unexpected conf type ${cc.type}`);
  }
  assert(c.voters.size > 0);
  c.membershipChanged();
  c.checkInvariants();
  return c;
}

/** Builds a tracker from a ConfState (restart, snapshot). Joint states are not supported. */
export function restoreTracker(maxInflight: number, cs: ConfState, lastIndex: number, maxInflightBytes = 0): ProgressTracker {
  assert(cs.votersOutgoing.length === 0 && cs.learnersNext.length === 0, 'joint configurations are not supported');
  const t = new ProgressTracker(maxInflight, maxInflightBytes);
  for (const id of cs.voters) {
    t.voters.add(id);
    initProgress(t, id, false, lastIndex);
  }
  for (const id of cs.learners) {
    assert(!t.voters.has(id), `${id} is both voter and learner in ConfState`);
    t.learners.add(id);
    initProgress(t, id, true, lastIndex);
  }
  t.membershipChanged();
  t.checkInvariants();
  return t;
}

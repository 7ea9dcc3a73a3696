import { describe, expect, it } from 'vitest';
import { decodeMessage, encodeMessage } from '../../../src/pb/internal';
import {
  decodeBatch,
  decodeRaftMessage,
  encodeBatch,
  encodeRaftMessage,
  messageFromPb,
  messageToPb,
} from '../../../src/transport/codec';
import { MessageType, newMessage } from '../../../src/raft/types';

const MAX_U64 = (1n << 64n) - 1n;

describe('raft message codec', () => {
  it('round-trips every field, 64-bit IDs included', () => {
    const m = newMessage({
      type: MessageType.MsgApp,
      to: MAX_U64,
      from: 0x8e9e05c52164694dn,
      term: 7,
      logTerm: 6,
      index: 2 ** 40,
      commit: 99,
      reject: true,
      rejectHint: 12,
      context: Buffer.from('ctx'),
      entries: [
        { term: 6, index: 100, type: 0, data: Buffer.from([0, 1, 2, 255]) },
        { term: 7, index: 101, type: 1, data: Buffer.alloc(0) },
      ],
    });
    expect(decodeRaftMessage(encodeRaftMessage(m))).toEqual(m);
    // The fast path and the src/pb (proto-loader shaped) path produce the same bytes' meaning.
    expect(messageFromPb(decodeMessage('raftpb.Message', encodeRaftMessage(m)))).toEqual(m);
    expect(decodeRaftMessage(encodeMessage('raftpb.Message', messageToPb(m)))).toEqual(m);
  });

  it('reads member IDs of every varint length (1 to 10 bytes) exactly', () => {
    for (let bit = 0n; bit < 64n; bit++) {
      for (const id of [1n << bit, (1n << bit) - 1n, (1n << bit) | 0x5an, MAX_U64 >> bit]) {
        if (id === 0n) continue;
        const m = newMessage({ type: MessageType.MsgHeartbeat, to: id, from: MAX_U64 - id + 1n, term: 1 });
        expect(decodeRaftMessage(encodeRaftMessage(m))).toEqual(m);
        expect(decodeRaftMessage(encodeMessage('raftpb.Message', messageToPb(m)))).toEqual(m);
      }
    }
  });

  it('writes the bytes protobufjs writes, and reads what it writes, field order aside', () => {
    const msgs = [
      newMessage({ type: MessageType.MsgHeartbeat, to: MAX_U64, from: 1n, term: 2 ** 53 - 1, commit: 300, context: Buffer.from('rctx') }),
      newMessage({
        type: MessageType.MsgApp,
        to: 0x751a1cd577e3a9ebn,
        from: 0xfc2b46d60fca36b3n,
        term: 9,
        logTerm: 8,
        index: 127,
        commit: 128,
        entries: [
          { term: 9, index: 128, type: 0, data: Buffer.alloc(200, 7) },
          { term: 9, index: 129, type: 1, data: Buffer.alloc(0) },
        ],
      }),
      newMessage({ type: MessageType.MsgAppResp, to: 2n, from: 3n, term: 1, index: 5, reject: true, rejectHint: 4 }),
    ];
    for (const m of msgs) {
      const ours = encodeRaftMessage(m);
      expect(ours.equals(encodeMessage('raftpb.Message', messageToPb(m)))).toBe(true);
      expect(decodeRaftMessage(ours)).toEqual(m);
    }
    // Fields in another order, an unknown field and an absent context still read the same.
    const hb = newMessage({ type: MessageType.MsgHeartbeat, to: 5n, from: 6n, term: 3, commit: 2 });
    const reordered = Buffer.concat([Buffer.from([0x40, 0x02]), Buffer.from([0x98, 0x01, 0x05]), Buffer.from([0x18, 0x06, 0x10, 0x05, 0x08, 0x08, 0x20, 0x03])]);
    expect(decodeRaftMessage(reordered)).toEqual(hb);
    expect(() => decodeRaftMessage(Buffer.from([0x20]))).toThrow();
  });

  it('decodes an empty message to zero values', () => {
    expect(decodeRaftMessage(Buffer.alloc(0))).toEqual(newMessage({ type: 0 }));
  });

  it('round-trips a snapshot with its conf state, and a null context', () => {
    const m = newMessage({
      type: MessageType.MsgSnap,
      to: 2n,
      from: 1n,
      term: 3,
      snapshot: {
        data: Buffer.from('db bytes'),
        metadata: {
          index: 50,
          term: 3,
          confState: { voters: [1n, MAX_U64], learners: [5n], votersOutgoing: [], learnersNext: [], autoLeave: false },
        },
      },
    });
    const back = decodeRaftMessage(encodeRaftMessage(m));
    expect(back).toEqual(m);
    expect(back.context).toBeNull();
    expect(messageFromPb(decodeMessage('raftpb.Message', encodeRaftMessage(m)))).toEqual(m);
  });

  it('frames batches as repeated field 1', () => {
    const a = encodeRaftMessage(newMessage({ type: MessageType.MsgHeartbeat, to: 2n, from: 1n, term: 1 }));
    const b = encodeRaftMessage(newMessage({ type: MessageType.MsgVote, to: 2n, from: 1n, term: 2 }));
    const parts = decodeBatch(encodeBatch([a, b]));
    expect(parts.map((p) => Buffer.from(p))).toEqual([a, b]);
    expect(decodeBatch(encodeBatch([]))).toEqual([]);
  });
});

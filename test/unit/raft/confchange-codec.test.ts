import protobuf from 'protobufjs';
import { describe, expect, it } from 'vitest';
import { ConfChangeType, decodeConfChange, encodeConfChange } from '../../../src/raft';

// raftpb.ConfChange as declared by etcd (proto2).
const root = protobuf.parse(`
syntax = "proto2";
enum ConfChangeType { ConfChangeAddNode = 0; ConfChangeRemoveNode = 1; ConfChangeUpdateNode = 2; ConfChangeAddLearnerNode = 3; }
message ConfChange { optional uint64 ID = 1; optional ConfChangeType Type = 2; optional uint64 NodeID = 3; optional bytes Context = 4; }
`).root;
const PbConfChange = root.lookupType('ConfChange');

describe('ConfChange codec', () => {
  it('encodes like etcd: ID, Type and NodeID always present, Context only when set', () => {
    expect(encodeConfChange({ type: ConfChangeType.AddNode, nodeId: 1n, context: null }).toString('hex')).toBe('080010001801');
    const withCtx = encodeConfChange({ id: 5n, type: ConfChangeType.RemoveNode, nodeId: 0x8e9e05c52164694dn, context: Buffer.from('ab') });
    const decoded = PbConfChange.toObject(PbConfChange.decode(withCtx), { longs: String, bytes: Buffer });
    expect(decoded).toEqual({ ID: '5', Type: 1, NodeID: BigInt('0x8e9e05c52164694d').toString(), Context: Buffer.from('ab') });
  });

  it('round-trips full 64-bit IDs and decodes protobufjs output', () => {
    const cc = { id: 0xffffffffffffffffn, type: ConfChangeType.AddLearnerNode, nodeId: 0xfedcba9876543210n, context: Buffer.from('{"name":"x"}') };
    expect(decodeConfChange(encodeConfChange(cc))).toEqual(cc);
    const other = PbConfChange.encode(
      PbConfChange.fromObject({ ID: '7', Type: 2, NodeID: '12345678901234567890', Context: Buffer.from('c') }),
    ).finish();
    expect(decodeConfChange(Buffer.from(other))).toEqual({ id: 7n, type: 2, nodeId: 12345678901234567890n, context: Buffer.from('c') });
  });

  it('rejects truncated input', () => {
    const b = encodeConfChange({ type: 0, nodeId: 300n, context: Buffer.from('abc') });
    expect(() => decodeConfChange(b.subarray(0, b.length - 1))).toThrow();
  });
});

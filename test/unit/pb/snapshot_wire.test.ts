// The snapshot stream's hand-written encoder against protobufjs: the same bytes for the same
// objects, and it is what the server registers for Maintenance.Snapshot.
import type * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { encodeMessage } from '../../../src/pb/internal';
import { packageDefinition, serviceDefinition } from '../../../src/pb/load';
import { withFastCodecs } from '../../../src/pb/service_codecs';
import { encodeSnapshotResponse } from '../../../src/pb/snapshot_wire';
import type * as pb from '../../../src/pb/types';
import { mulberry32 } from '../../helpers/random';

const snapshot = (packageDefinition()['etcdserverpb.Maintenance'] as grpc.ServiceDefinition).Snapshot as grpc.MethodDefinition<unknown, unknown>;

describe('SnapshotResponse encoder', () => {
  it('writes what protobufjs writes, header, remaining bytes, blob and version present or not', () => {
    const r = mulberry32(20261204);
    for (let i = 0; i < 300; i++) {
      const resp = {
        header: r() < 0.2 ? null : { clusterId: String(Math.floor(r() * 2 ** 52)), memberId: '10276657743932975437', revision: String(Math.floor(r() * 1e6)), raftTerm: String(Math.floor(r() * 9)) },
        remainingBytes: r() < 0.2 ? '0' : String(Math.floor(r() * 2 ** 40)),
        blob: Buffer.alloc(r() < 0.1 ? 0 : Math.floor(r() * 40_000), i),
        version: r() < 0.3 ? '' : '3.5.13',
      } as unknown as pb.SnapshotResponse;
      const mine = encodeSnapshotResponse(resp);
      expect(mine.equals(encodeMessage('etcdserverpb.SnapshotResponse', resp as never))).toBe(true);
      expect(snapshot.responseDeserialize(mine)).toStrictEqual(snapshot.responseDeserialize(snapshot.responseSerialize(resp)));
    }
    // 300 encodings of up to 40 KB each way took 45-72 s on a loaded 2-core machine.
  }, 180_000);

  it('is what the server registers for Snapshot', () => {
    const fast = withFastCodecs('etcdserverpb.Maintenance', serviceDefinition('etcdserverpb.Maintenance'));
    const m = fast.Snapshot as grpc.MethodDefinition<unknown, unknown>;
    const resp = { header: { clusterId: '1', memberId: '2', revision: '3', raftTerm: '4' }, remainingBytes: '5', blob: Buffer.from('bytes'), version: '3.5.13' };
    expect(m.responseSerialize(resp).equals(encodeSnapshotResponse(resp as unknown as pb.SnapshotResponse))).toBe(true);
    expect(m.responseSerialize(resp).equals(snapshot.responseSerialize(resp))).toBe(true);
  });
});

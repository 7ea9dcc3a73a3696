// The lease keepalive codec against proto-loader's (protobufjs) on randomized messages: the same
// request objects from either encoder's bytes, and response bytes that decode to the same objects.
import type * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { encodeMessage } from '../../../src/pb/internal';
import { decodeLeaseKeepAliveRequest, encodeLeaseKeepAliveResponse } from '../../../src/pb/lease_wire';
import { packageDefinition, serviceDefinition } from '../../../src/pb/load';
import { withFastCodecs } from '../../../src/pb/service_codecs';
import type * as pb from '../../../src/pb/types';
import { NotFast } from '../../../src/pb/wire';
import { mulberry32 } from '../../helpers/random';

const ROUNDS = 500;
/** proto-loader's own codec (its protobufjs 7 writes the zero fields it is given): the reference. */
const keepAlive = (packageDefinition()['etcdserverpb.Lease'] as grpc.ServiceDefinition).LeaseKeepAlive as grpc.MethodDefinition<unknown, unknown>;

/** int64s as our objects carry them (decimal strings): zero, small, around 2^53, extremes, negatives. */
function int64(r: () => number): string {
  const pick = Math.floor(r() * 6);
  if (pick === 0) return '0';
  if (pick === 1) return String(Math.floor(r() * 1000));
  if (pick === 2) return String(2 ** 53 + Math.floor(r() * 1000));
  if (pick === 3) return '9223372036854775807';
  if (pick === 4) return '-9223372036854775808';
  return String(-Math.floor(r() * 2 ** 40));
}

function response(r: () => number): pb.LeaseKeepAliveResponse {
  const header = r() < 0.1 ? null : { clusterId: int64(r).replace('-', ''), memberId: int64(r).replace('-', ''), revision: int64(r), raftTerm: String(Math.floor(r() * 100)) };
  return { header, ID: int64(r), TTL: int64(r) };
}

describe('lease keepalive codec', () => {
  it('decodes requests to the objects proto-loader gives, from bytes with or without zero fields', () => {
    const r = mulberry32(17);
    for (let i = 0; i < ROUNDS; i++) {
      const req = { ID: int64(r) };
      for (const bytes of [keepAlive.requestSerialize(req), encodeMessage('etcdserverpb.LeaseKeepAliveRequest', req as never)]) {
        expect(decodeLeaseKeepAliveRequest(bytes)).toStrictEqual(keepAlive.requestDeserialize(bytes));
      }
    }
    expect(decodeLeaseKeepAliveRequest(Buffer.alloc(0))).toStrictEqual({ ID: '0' });
  });

  it('skips unknown fields and refuses a wrong wire type (the caller then asks protobufjs)', () => {
    const withUnknown = Buffer.concat([Buffer.from([0x08, 0x2a]), Buffer.from([0x12, 0x02, 0x61, 0x62])]);
    expect(decodeLeaseKeepAliveRequest(withUnknown)).toStrictEqual(keepAlive.requestDeserialize(withUnknown));
    expect(() => decodeLeaseKeepAliveRequest(Buffer.from([0x0a, 0x00]))).toThrow(NotFast);
  });

  it('encodes responses to the bytes protobufjs 8 writes, which decode to the same objects', () => {
    const r = mulberry32(23);
    for (let i = 0; i < ROUNDS; i++) {
      const resp = response(r);
      const mine = encodeLeaseKeepAliveResponse(resp);
      expect(mine.equals(encodeMessage('etcdserverpb.LeaseKeepAliveResponse', resp as never))).toBe(true);
      expect(keepAlive.responseDeserialize(mine)).toStrictEqual(keepAlive.responseDeserialize(keepAlive.responseSerialize(resp)));
    }
  });

  it('is what the server registers for LeaseKeepAlive, and other lease methods keep protobufjs', () => {
    const lease = serviceDefinition('etcdserverpb.Lease');
    const fast = withFastCodecs('etcdserverpb.Lease', lease);
    const m = fast.LeaseKeepAlive as grpc.MethodDefinition<unknown, unknown>;
    const resp = { header: { clusterId: '1', memberId: '2', revision: '3', raftTerm: '4' }, ID: '7', TTL: '60' };
    expect(m.responseSerialize(resp).equals(encodeLeaseKeepAliveResponse(resp))).toBe(true);
    expect(m.requestDeserialize(Buffer.from([0x08, 0x07]))).toStrictEqual({ ID: '7' });
    expect(fast.LeaseGrant).toBe(lease.LeaseGrant);
  });
});

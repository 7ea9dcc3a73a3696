// The services grpc-js serves are built from the one protobufjs parse (src/pb/load.ts), not by
// proto-loader; what grpc-js sees of them must be what proto-loader would have given it.
import type * as protoLoader from '@grpc/proto-loader';
import type * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { encodeMessage } from '../../../src/pb/internal';
import { packageDefinition, protoRoot, serviceDefinition, SERVICE_NAMES } from '../../../src/pb/load';

type Method = grpc.MethodDefinition<object, object>;

/** Messages with int64s past 2^53, bytes, oneofs, nesting, repeated and enum fields. */
const SAMPLES: Record<string, object> = {
  'etcdserverpb.PutRequest': { key: Buffer.from('k'), value: Buffer.from([0, 255]), lease: '7587862072907415621', prevKv: true },
  'etcdserverpb.TxnRequest': {
    compare: [{ result: 3, target: 2, key: Buffer.from('a'), modRevision: '9007199254740993' }],
    success: [{ requestPut: { key: Buffer.from('k'), value: Buffer.from('v') } }, { requestTxn: { success: [{ requestRange: { key: Buffer.from('n'), limit: '5' } }] } }],
    failure: [{ requestDeleteRange: { key: Buffer.from([0]), rangeEnd: Buffer.from([0]), prevKv: true } }],
  },
  'etcdserverpb.RangeResponse': {
    header: { clusterId: '18446744073709551615', memberId: '1', revision: '42', raftTerm: '3' },
    kvs: [{ key: Buffer.from('a'), createRevision: '2', modRevision: '9', version: '4', value: Buffer.from('x'), lease: '0' }],
    more: true,
    count: '7',
  },
  'etcdserverpb.WatchRequest': { createRequest: { key: Buffer.from('w'), startRevision: '5', filters: [1], prevKv: true, watchId: '3' } },
  'etcdserverpb.WatchResponse': { watchId: '3', created: true, events: [{ type: 1, kv: { key: Buffer.from('w') }, prevKv: { key: Buffer.from('w'), value: Buffer.from('old') } }] },
};

describe('service definitions from the shared parse', () => {
  // What the server loaded before: proto-loader's own parse of the same files, with the same options.
  const reference = packageDefinition();

  it('has the methods, paths, streaming and names proto-loader gives', () => {
    for (const name of SERVICE_NAMES) {
      const theirs = reference[name] as protoLoader.ServiceDefinition;
      const ours = serviceDefinition(name);
      expect(Object.keys(ours), name).toEqual(Object.keys(theirs));
      for (const [method, m] of Object.entries(theirs)) {
        const n = ours[method] as Method;
        expect([n.path, n.requestStream, n.responseStream, n.originalName], `${name}.${method}`).toEqual([
          m.path,
          m.requestStream,
          m.responseStream,
          m.originalName,
        ]);
      }
    }
  });

  it('decodes and encodes every method message as proto-loader does', () => {
    let sampled = 0;
    for (const name of SERVICE_NAMES) {
      for (const [method, m] of Object.entries(reference[name] as protoLoader.ServiceDefinition)) {
        const n = serviceDefinition(name)[method] as Method;
        for (const [side, typeName] of [
          ['request', (m.requestType.type as { name: string }).name],
          ['response', (m.responseType.type as { name: string }).name],
        ] as const) {
          const refSer = side === 'request' ? m.requestSerialize : m.responseSerialize;
          const refDe = side === 'request' ? m.requestDeserialize : m.responseDeserialize;
          const ourSer = side === 'request' ? n.requestSerialize : n.responseSerialize;
          const ourDe = side === 'request' ? n.requestDeserialize : n.responseDeserialize;
          // All defaults, then a populated sample where there is one for this message.
          const full = Object.keys(SAMPLES).find((k) => k.endsWith(`.${typeName}`));
          const values: object[] = [refDe(Buffer.alloc(0)) as object];
          if (full !== undefined) values.push(SAMPLES[full]!);
          for (const value of values) {
            const bytes = Buffer.from(refSer(value));
            const mine = Buffer.from(ourSer(value));
            // Our protobufjs 8 leaves zero scalars out, as etcd's encoder does; proto-loader's
            // protobufjs 7 writes those it is given. The same message either way:
            expect(refDe(mine), `${name}.${method} ${side} encode`).toEqual(refDe(bytes));
            expect(mine.length, `${name}.${method} ${side} size`).toBeLessThanOrEqual(bytes.length);
            expect(ourDe(bytes), `${name}.${method} ${side} decode`).toEqual(refDe(bytes));
            expect(ourDe(mine), `${name}.${method} ${side} decode`).toEqual(refDe(bytes));
          }
          if (full !== undefined) sampled++;
        }
      }
    }
    // Every sample met a method (Put, Txn, Range, Watch both ways).
    expect(sampled).toBeGreaterThanOrEqual(Object.keys(SAMPLES).length);
  });

  it('uses the types the internal codec uses, so both encode alike', () => {
    const put = serviceDefinition('etcdserverpb.KV').Put as Method;
    const request = SAMPLES['etcdserverpb.PutRequest']!;
    const bytes = put.requestSerialize(request);
    // grpc-js frames it with Buffer methods (copy), not only Uint8Array's.
    expect(Buffer.isBuffer(bytes)).toBe(true);
    expect(bytes.equals(encodeMessage('etcdserverpb.PutRequest', request))).toBe(true);
  });

  it('parses the files once, and builds each service once', () => {
    expect(protoRoot()).toBe(protoRoot());
    expect(serviceDefinition('etcdserverpb.KV')).toBe(serviceDefinition('etcdserverpb.KV'));
    expect(() => serviceDefinition('etcdserverpb.RangeRequest')).toThrow('not a service in the loaded protos: etcdserverpb.RangeRequest');
    expect(() => serviceDefinition('etcdserverpb.Nope')).toThrow('not a service');
    expect(packageDefinition()).toBe(packageDefinition());
  });
});

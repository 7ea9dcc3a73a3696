import path from 'node:path';
import protobuf from 'protobufjs';
import * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { clientConstructor, grpcObject, packageDefinition, serviceDefinition, SERVICE_NAMES } from '../../../src/pb/load';
import { decodeInternalRequest, decodeMessage, encodeInternalRequest, encodeMessage } from '../../../src/pb/internal';
import type * as pb from '../../../src/pb/types';
import { Compare_CompareResult, Compare_CompareTarget } from '../../../src/pb/types';

const BIG_LEASE = '7587869934263396352'; // > 2^53: lost if it ever passes through a JS number
const MAX_U64 = '18446744073709551615';
const EDGE_BYTES = Buffer.from([0x00, 0xff, 0x00, 0x7f, 0x80, 0xff]);

function method(service: string, name: string): grpc.MethodDefinition<object, object> {
  return serviceDefinition(service)[name] as grpc.MethodDefinition<object, object>;
}

/** A txn with a nested txn, every compare target and every op kind. */
function sampleTxn(): pb.MessageInit<pb.TxnRequest> {
  return {
    compare: [
      { result: Compare_CompareResult.EQUAL, target: Compare_CompareTarget.VALUE, key: EDGE_BYTES, value: EDGE_BYTES },
      { result: Compare_CompareResult.GREATER, target: Compare_CompareTarget.MOD, key: Buffer.from('a'), modRevision: '9007199254740993' },
      { result: Compare_CompareResult.NOT_EQUAL, target: Compare_CompareTarget.LEASE, key: Buffer.from('b'), lease: BIG_LEASE, rangeEnd: Buffer.from([0]) },
    ],
    success: [
      { requestPut: { key: Buffer.from('k'), value: EDGE_BYTES, lease: BIG_LEASE, prevKv: true } },
      {
        requestTxn: {
          compare: [{ target: Compare_CompareTarget.VERSION, key: Buffer.from('n'), version: '0' }],
          success: [{ requestDeleteRange: { key: Buffer.from([0]), rangeEnd: Buffer.from([0]) } }],
          failure: [{ requestRange: { key: Buffer.from('n'), limit: '5', revision: '-1' } }],
        },
      },
    ],
    failure: [{ requestRange: { key: Buffer.from('x'), countOnly: true } }],
  };
}

describe('load', () => {
  it('exposes every service to grpc-js', () => {
    const obj = grpcObject();
    const etcdserverpb = obj.etcdserverpb as grpc.GrpcObject;
    const kv = etcdserverpb.KV as grpc.ServiceClientConstructor;
    expect(Object.keys(kv.service)).toEqual(['Range', 'Put', 'DeleteRange', 'Txn', 'Compact']);
    for (const name of SERVICE_NAMES) expect(Object.keys(serviceDefinition(name)).length).toBeGreaterThan(0);
    expect(kv.service.Range.path).toBe('/etcdserverpb.KV/Range');
    expect(serviceDefinition('v3lockpb.Lock').Lock.path).toBe('/v3lockpb.Lock/Lock');
    expect(serviceDefinition('v3electionpb.Election').Observe.responseStream).toBe(true);
    expect(serviceDefinition('grpc.health.v1.Health').Check.path).toBe('/grpc.health.v1.Health/Check');
    expect(serviceDefinition('etcdserverpb.Maintenance').Downgrade.path).toBe('/etcdserverpb.Maintenance/Downgrade');
    expect(serviceDefinition('etcdserverpb.Auth').AuthStatus.path).toBe('/etcdserverpb.Auth/AuthStatus');
    expect(typeof clientConstructor('etcdserverpb.KV')).toBe('function');
    expect(() => serviceDefinition('etcdserverpb.RangeRequest')).toThrow();
    expect(packageDefinition()).toBe(packageDefinition());
  });

  it('decodes with the documented shape: names, int64 strings, Buffers, nulls, oneof discriminators', () => {
    const txn = method('etcdserverpb.KV', 'Txn');
    const decoded = txn.requestDeserialize(txn.requestSerialize(sampleTxn())) as pb.TxnRequest;
    expect(decoded.compare[0].targetUnion).toBe('value');
    expect(decoded.compare[1].targetUnion).toBe('modRevision');
    expect(decoded.compare[1].modRevision).toBe('9007199254740993');
    expect(decoded.compare[1].version).toBeUndefined();
    expect(decoded.compare[2].lease).toBe(BIG_LEASE);
    expect(decoded.success[0].request).toBe('requestPut');
    expect(decoded.success[0].requestPut?.value).toEqual(EDGE_BYTES);
    expect(Buffer.isBuffer(decoded.success[0].requestPut?.value)).toBe(true);
    expect(decoded.success[1].request).toBe('requestTxn');
    expect(decoded.success[1].requestTxn?.failure[0].requestRange?.revision).toBe('-1');
    expect(decoded.failure[0]).toEqual({
      request: 'requestRange',
      requestRange: {
        key: Buffer.from('x'), rangeEnd: Buffer.alloc(0), limit: '0', revision: '0', sortOrder: 0, sortTarget: 0,
        serializable: false, keysOnly: false, countOnly: true, minModRevision: '0', maxModRevision: '0',
        minCreateRevision: '0', maxCreateRevision: '0',
      },
    });

    const watch = method('etcdserverpb.Watch', 'Watch');
    const w = watch.requestDeserialize(watch.requestSerialize({ progressRequest: {} })) as pb.WatchRequest;
    expect(w).toEqual({ progressRequest: {}, requestUnion: 'progressRequest' });

    const ttl = method('etcdserverpb.Lease', 'LeaseTimeToLive');
    const t = ttl.responseDeserialize(ttl.responseSerialize({ ID: BIG_LEASE, TTL: 10, keys: [EDGE_BYTES] })) as pb.LeaseTimeToLiveResponse;
    expect(t).toEqual({ header: null, ID: BIG_LEASE, TTL: '10', grantedTTL: '0', keys: [EDGE_BYTES] });

    const status = method('etcdserverpb.Maintenance', 'Status');
    const s = status.responseDeserialize(
      status.responseSerialize({ header: { clusterId: MAX_U64, memberId: '1', revision: '5', raftTerm: '2' }, dbSizeQuota: '2147483648' }),
    ) as pb.StatusResponse;
    expect(s.header).toEqual({ clusterId: MAX_U64, memberId: '1', revision: '5', raftTerm: '2' });
    expect(s.dbSizeQuota).toBe('2147483648');
    expect(s.downgradeInfo).toBeNull();
  });
});

describe('internal codec', () => {
  it('round-trips an InternalRaftRequest with 64-bit IDs, edge bytes and a nested txn', () => {
    const req: pb.MessageInit<pb.InternalRaftRequest> = {
      header: { ID: MAX_U64, username: 'root', authRevision: '3' },
      ID: '9007199254740993',
      txn: sampleTxn(),
    };
    const bytes = encodeInternalRequest(req);
    expect(Buffer.isBuffer(bytes)).toBe(true);
    const back = decodeInternalRequest(bytes);
    expect(back.ID).toBe('9007199254740993');
    expect(back.header).toEqual({ ID: MAX_U64, username: 'root', authRevision: '3' });
    expect(back.put).toBeNull();
    expect(back.txn?.success[0].requestPut?.lease).toBe(BIG_LEASE);
    expect(back.txn?.success[0].requestPut?.value).toEqual(EDGE_BYTES);
    expect(Buffer.isBuffer(back.txn?.compare[0].value)).toBe(true);
    // The same bytes through grpc-js's serializer give the same object: one shape everywhere.
    const txn = method('etcdserverpb.KV', 'Txn');
    expect(back.txn).toEqual(txn.requestDeserialize(txn.requestSerialize(sampleTxn())));
    // Decoding is a fixed point: re-encoding the decoded object yields the same bytes.
    expect(encodeInternalRequest(back)).toEqual(bytes);
  });

  it('round-trips every kind of payload field', () => {
    const samples: pb.MessageInit<pb.InternalRaftRequest>[] = [
      { ID: '1', put: { key: EDGE_BYTES, value: Buffer.alloc(0), lease: BIG_LEASE, ignoreLease: true } },
      { ID: '2', deleteRange: { key: Buffer.from([0]), rangeEnd: Buffer.from([0]), prevKv: true } },
      { ID: '3', compaction: { revision: '1000', physical: true } },
      { ID: '4', leaseGrant: { TTL: '60', ID: BIG_LEASE } },
      { ID: '5', leaseRevoke: { ID: '-1' } },
      { ID: '6', alarm: { action: 1, memberID: MAX_U64, alarm: 1 } },
      { ID: '7', leaseCheckpoint: { checkpoints: [{ ID: BIG_LEASE, remaining_TTL: '42' }] } },
      { ID: '8', authEnable: {} },
      { ID: '9', authenticate: { name: 'u', password: 'p', simpleToken: 't.1' } },
      { ID: '10', clusterMemberAttrSet: { member_ID: MAX_U64, memberAttributes: { name: 'n1', clientUrls: ['http://a:2379'] } } },
      { ID: '11', clusterVersionSet: { ver: '3.6.0' } },
      { ID: '12', range: { key: Buffer.from('k'), serializable: true } },
    ];
    for (const s of samples) {
      const back = decodeInternalRequest(encodeInternalRequest(s));
      for (const [k, v] of Object.entries(s)) {
        const got = back[k as keyof pb.InternalRaftRequest];
        if (typeof v === 'object' && v !== null) expect(got, k).toMatchObject(v);
        else expect(got, k).toBe(v);
      }
    }
    const empty = decodeInternalRequest(encodeInternalRequest({ ID: '13', authEnable: {} }));
    expect(empty.authEnable).toEqual({});
    expect(empty.authDisable).toBeNull();
  });

  it('decodes bytes written with etcd field numbers', () => {
    // InternalRaftRequest{ID=7 (field 1), header{ID=7} (field 100), lease_revoke{ID=5} (field 9),
    // auth_enable (field 1000)} hand-encoded: tag = field << 3 | wire type.
    const bytes = Buffer.from([
      0x08, 0x07, // 1: varint 7
      0xa2, 0x06, 0x02, 0x08, 0x07, // 100: len 2 {1: 7}
      0x4a, 0x02, 0x08, 0x05, // 9: len 2 {1: 5}
      0xc2, 0x3e, 0x00, // 1000: len 0
    ]);
    const r = decodeInternalRequest(bytes);
    expect(r.ID).toBe('7');
    expect(r.header?.ID).toBe('7');
    expect(r.leaseRevoke).toEqual({ ID: '5' });
    expect(r.authEnable).toEqual({});
    // Compare.range_end is field 64 (tag 0x82 0x04).
    const c = decodeMessage('etcdserverpb.Compare', Buffer.from([0x82, 0x04, 0x01, 0x61]));
    expect(c.rangeEnd).toEqual(Buffer.from('a'));
  });

  it('encodes KeyValue and raft messages by name', () => {
    const kv = { key: EDGE_BYTES, createRevision: '2', modRevision: '3', version: '1', value: EDGE_BYTES, lease: BIG_LEASE };
    expect(decodeMessage('mvccpb.KeyValue', encodeMessage('mvccpb.KeyValue', kv))).toEqual(kv);
    const m = decodeMessage(
      'raftpb.Message',
      encodeMessage('raftpb.Message', { type: 3, to: '2', from: MAX_U64, entries: [{ Term: '1', Index: '9', Data: EDGE_BYTES }] }),
    );
    expect(m.entries[0]).toEqual({ Type: 0, Term: '1', Index: '9', Data: EDGE_BYTES });
    expect(m.from).toBe(MAX_U64);
    expect(m.snapshot).toBeNull();
  });
});

describe('the etcd3 npm client copy of rpc.proto', () => {
  // Encode with the client's own definitions, decode with ours (and back).
  const dir = path.join(__dirname, '../../../node_modules/etcd3/proto');
  const theirs = new protobuf.Root();
  theirs.resolvePath = (_o: string, t: string) => path.join(dir, path.basename(t));
  theirs.loadSync(['rpc.proto'], { keepCase: false });
  theirs.resolveAll();
  const enc = (name: string, obj: Record<string, unknown>): Buffer => {
    const t = theirs.lookupType(name);
    return Buffer.from(t.encode(t.fromObject(obj)).finish());
  };
  const dec = (name: string, buf: Buffer): Record<string, unknown> => {
    const t = theirs.lookupType(name);
    return t.toObject(t.decode(buf), { longs: String, enums: Number, defaults: true, oneofs: true });
  };

  it('client requests decode as sent', () => {
    const txn = method('etcdserverpb.KV', 'Txn');
    const req = txn.requestDeserialize(enc('etcdserverpb.TxnRequest', sampleTxn() as Record<string, unknown>));
    expect(req).toEqual(txn.requestDeserialize(txn.requestSerialize(sampleTxn())));
    const watch = method('etcdserverpb.Watch', 'Watch');
    const w = watch.requestDeserialize(
      enc('etcdserverpb.WatchRequest', { createRequest: { key: EDGE_BYTES, rangeEnd: Buffer.from([0]), startRevision: '7', filters: [1], prevKv: true, watchId: '3', fragment: true } }),
    ) as pb.WatchRequest;
    expect(w.requestUnion).toBe('createRequest');
    expect(w.createRequest).toMatchObject({ key: EDGE_BYTES, startRevision: '7', filters: [1], prevKv: true, watchId: '3', fragment: true });
    const grant = method('etcdserverpb.Lease', 'LeaseGrant');
    expect(grant.requestDeserialize(enc('etcdserverpb.LeaseGrantRequest', { TTL: '5', ID: BIG_LEASE }))).toEqual({ TTL: '5', ID: BIG_LEASE });
  });

  it('our responses decode in the client as built', () => {
    const range = method('etcdserverpb.KV', 'Range');
    const resp = {
      header: { clusterId: MAX_U64, memberId: '2', revision: '9', raftTerm: '4' },
      kvs: [{ key: EDGE_BYTES, createRevision: '2', modRevision: '9', version: '3', value: EDGE_BYTES, lease: BIG_LEASE }],
      more: true,
      count: '10',
    };
    expect(dec('etcdserverpb.RangeResponse', range.responseSerialize(resp))).toEqual(resp);
    const watch = method('etcdserverpb.Watch', 'Watch');
    const wr = dec(
      'etcdserverpb.WatchResponse',
      watch.responseSerialize({
        header: { revision: '9' },
        watchId: '1',
        events: [{ type: 1, kv: { key: Buffer.from('k'), modRevision: '9' }, prevKv: null }],
      }),
    );
    expect(wr.watchId).toBe('1');
    expect((wr.events as { type: number; kv: { modRevision: string } }[])[0]).toMatchObject({ type: 1, kv: { modRevision: '9' } });
  });
});

describe('createMessage', () => {
  it('fills defaults and discriminators like a decode would', async () => {
    const { createMessage } = await import('../../../src/pb/internal');
    const op = createMessage('etcdserverpb.RequestOp', { requestPut: { key: Buffer.from('k'), lease: BIG_LEASE } });
    expect(op).toEqual({
      request: 'requestPut',
      requestPut: { key: Buffer.from('k'), value: Buffer.alloc(0), lease: BIG_LEASE, prevKv: false, ignoreValue: false, ignoreLease: false },
    });
    const txn = method('etcdserverpb.KV', 'Txn');
    expect(createMessage('etcdserverpb.TxnRequest', sampleTxn())).toEqual(txn.requestDeserialize(txn.requestSerialize(sampleTxn())));
  });
});

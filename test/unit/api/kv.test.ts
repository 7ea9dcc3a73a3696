import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Etcd3 } from 'etcd3';
import * as grpc from '@grpc/grpc-js';
import { call, startHarness, type Harness } from './harness';

let h: Harness;
let etcd: Etcd3;
let kv: grpc.Client;

beforeAll(async () => {
  h = await startHarness();
  etcd = new Etcd3({ hosts: `http://${h.endpoint}` });
  kv = h.client('etcdserverpb.KV');
});
afterAll(async () => {
  etcd.close();
  await h.close();
});

const b = (s: string): Buffer => Buffer.from(s);

async function expectGrpcError(p: Promise<unknown>, code: grpc.status, details: string): Promise<void> {
  const err = (await p.then(
    () => {
      throw new Error('expected an error');
    },
    (e: unknown) => e,
  )) as grpc.ServiceError;
  expect({ code: err.code, details: err.details }).toEqual({ code, details });
}

describe('KV through the etcd3 npm client', () => {
  it('puts, gets, lists by prefix and deletes', async () => {
    await etcd.put('foo').value('bar');
    await etcd.put('foo2').value('baz');
    expect(await etcd.get('foo').string()).toBe('bar');
    expect(await etcd.getAll().prefix('foo').strings()).toEqual({ foo: 'bar', foo2: 'baz' });
    await etcd.delete().key('foo');
    expect(await etcd.get('foo').string()).toBeNull();
  });

  it('fills the response header from the server', async () => {
    const res = await call<{ header: { clusterId: string; memberId: string; raftTerm: string } }>(kv, 'Range', { key: b('x') });
    expect(res.header).toMatchObject({ clusterId: '14841639068965178418', memberId: '10276657743932975437', raftTerm: '7' });
  });

  it('runs a txn (if/else) from the client', async () => {
    await etcd.put('t').value('1');
    const r = await etcd.if('t', 'Value', '==', '1').then(etcd.put('t').value('2')).else(etcd.put('t').value('3')).commit();
    expect(r.succeeded).toBe(true);
    expect(await etcd.get('t').string()).toBe('2');
  });
});

describe('KV validation (etcd v3rpc checks)', () => {
  const INVALID = grpc.status.INVALID_ARGUMENT;
  it('rejects empty keys on Range, Put, DeleteRange and txn compares', async () => {
    await expectGrpcError(call(kv, 'Range', { key: b('') }), INVALID, 'etcdserver: key is not provided');
    await expectGrpcError(call(kv, 'Put', { key: b(''), value: b('v') }), INVALID, 'etcdserver: key is not provided');
    await expectGrpcError(call(kv, 'DeleteRange', { key: b('') }), INVALID, 'etcdserver: key is not provided');
    await expectGrpcError(
      call(kv, 'Txn', { compare: [{ key: b(''), target: 0, result: 0, version: 1 }] }),
      INVALID,
      'etcdserver: key is not provided',
    );
  });

  it('rejects ignore_value with a value and ignore_lease with a lease', async () => {
    await expectGrpcError(call(kv, 'Put', { key: b('k'), value: b('v'), ignoreValue: true }), INVALID, 'etcdserver: value is provided');
    await expectGrpcError(call(kv, 'Put', { key: b('k'), lease: '5', ignoreLease: true }), INVALID, 'etcdserver: lease is provided');
  });

  it('rejects too many ops per branch', async () => {
    const ops = Array.from({ length: 129 }, (_, i) => ({ requestPut: { key: b(`k${i}`), value: b('v') } }));
    await expectGrpcError(call(kv, 'Txn', { success: ops }), INVALID, 'etcdserver: too many operations in txn request');
    // 128 is allowed.
    const res = await call<{ succeeded: boolean }>(kv, 'Txn', { success: ops.slice(0, 128) });
    expect(res.succeeded).toBe(true);
  });

  it('answers an empty request op with KeyNotFound', async () => {
    await expectGrpcError(call(kv, 'Txn', { success: [{}] }), INVALID, 'etcdserver: key not found');
  });

  it('rejects duplicate puts, put under a deleted range and nested duplicates', async () => {
    const put = (k: string) => ({ requestPut: { key: b(k), value: b('v') } });
    const del = (k: string, end = '') => ({ requestDeleteRange: { key: b(k), rangeEnd: b(end) } });
    const dup = 'etcdserver: duplicate key given in txn request';
    await expectGrpcError(call(kv, 'Txn', { success: [put('a'), put('a')] }), INVALID, dup);
    await expectGrpcError(call(kv, 'Txn', { success: [del('a', 'c'), put('b')] }), INVALID, dup);
    await expectGrpcError(call(kv, 'Txn', { success: [del('a'), put('a')] }), INVALID, dup);
    await expectGrpcError(call(kv, 'Txn', { success: [put('a'), { requestTxn: { success: [put('a')] } }] }), INVALID, dup);
    await expectGrpcError(call(kv, 'Txn', { success: [del('a', 'z'), { requestTxn: { failure: [put('m')] } }] }), INVALID, dup);
    // Same key in a nested txn's then and else branches is fine (they exclude each other).
    await call(kv, 'Txn', { success: [{ requestTxn: { success: [put('q')], failure: [put('q')] } }] });
    // etcd does not flag a put under a from-key ("\0") delete; neither do we.
    await call(kv, 'Txn', { success: [del('a', '\0'), put('b')] });
    // The same key in success and failure of the top level is fine.
    await call(kv, 'Txn', { success: [put('s')], failure: [put('s')] });
  });

  it('gives nested txns only the remaining op budget', async () => {
    h.fake.limits.maxTxnOps = 3;
    try {
      const put = (k: string) => ({ requestPut: { key: b(k), value: b('v') } });
      // Outer uses 2 ops, so the nested txn may have at most 1 per branch.
      await expectGrpcError(
        call(kv, 'Txn', { success: [put('x'), { requestTxn: { success: [put('y'), put('z')] } }] }),
        INVALID,
        'etcdserver: too many operations in txn request',
      );
      await call(kv, 'Txn', { success: [put('x'), { requestTxn: { success: [put('y')] } }] });
    } finally {
      h.fake.limits.maxTxnOps = 128;
    }
  });

  it('rejects requests over max-request-bytes with RequestTooLarge', async () => {
    h.fake.limits.maxRequestBytes = 1024;
    try {
      await expectGrpcError(call(kv, 'Put', { key: b('big'), value: Buffer.alloc(2000) }), INVALID, 'etcdserver: request is too large');
      await expectGrpcError(
        call(kv, 'Txn', { success: [{ requestPut: { key: b('big'), value: Buffer.alloc(2000) } }] }),
        INVALID,
        'etcdserver: request is too large',
      );
      await call(kv, 'Put', { key: b('small'), value: Buffer.alloc(100) });
      // A txn without writes is not proposed, so etcd does not size-check it.
      await call(kv, 'Txn', { compare: [{ key: b('k'), target: 3, result: 0, value: Buffer.alloc(2000) }], success: [{ requestRange: { key: b('k') } }] });
    } finally {
      h.fake.limits.maxRequestBytes = 1.5 * 1024 * 1024;
    }
  });

  it('draws the size limit where etcd 3.4.23 does (default 1.5 MiB)', async () => {
    await call(kv, 'Put', { key: b('big'), value: Buffer.alloc(1_572_838) });
    await expectGrpcError(
      call(kv, 'Put', { key: b('big'), value: Buffer.alloc(1_572_839) }),
      INVALID,
      'etcdserver: request is too large',
    );
  });

  it('passes server errors through with their code and text', async () => {
    const cluster = h.client('etcdserverpb.Cluster');
    await expectGrpcError(call(cluster, 'MemberRemove', { ID: '1' }), grpc.status.NOT_FOUND, 'etcdserver: member not found');
    await expectGrpcError(
      call(cluster, 'MemberAdd', { peerURLs: ['http://host-without-port'] }),
      INVALID,
      'etcdserver: given member URLs are invalid',
    );
    await expectGrpcError(call(cluster, 'MemberAdd', { peerURLs: [] }), INVALID, 'etcdserver: given member URLs are invalid');
    const added = await call<{ member: { peerURLs: string[] } }>(cluster, 'MemberAdd', { peerURLs: ['http://10.0.0.2:2380'] });
    expect(added.member.peerURLs).toEqual(['http://10.0.0.2:2380']);
  });

  it('turns a non-etcd error into Unknown without crashing', async () => {
    const orig = h.fake.range.bind(h.fake);
    h.fake.range = async () => {
      throw new TypeError('boom');
    };
    try {
      await expectGrpcError(call(kv, 'Range', { key: b('k') }), grpc.status.UNKNOWN, 'boom');
    } finally {
      h.fake.range = orig;
    }
    await call(kv, 'Range', { key: b('k') });
  });
});

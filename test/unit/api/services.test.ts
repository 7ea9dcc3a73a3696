import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import { createGrpcServer, grpcServerOptions } from '../../../src/api/grpc_server';
import { FakeServer } from './fake_server';
import { call, quietLog, startHarness, type Harness } from './harness';

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => {
  await h.close();
});

describe('gRPC server assembly', () => {
  it('registers every etcd service, lock and election included', () => {
    const g = createGrpcServer(new FakeServer(), quietLog);
    expect(g.services).toEqual([
      'etcdserverpb.KV',
      'etcdserverpb.Watch',
      'etcdserverpb.Lease',
      'etcdserverpb.Cluster',
      'etcdserverpb.Maintenance',
      'etcdserverpb.Auth',
      'grpc.health.v1.Health',
      'v3lockpb.Lock',
      'v3electionpb.Election',
    ]);
    g.grpcServer.forceShutdown();
  });

  it('sizes messages as etcd: receive = max-request-bytes + 512 KiB, send = MaxInt32', () => {
    expect(grpcServerOptions(1_572_864)).toMatchObject({
      'grpc.max_receive_message_length': 1_572_864 + 512 * 1024,
      'grpc.max_send_message_length': 2 ** 31 - 1,
    });
  });

  it('answers a message over the transport limit with ResourceExhausted, and stays up', async () => {
    const kv = h.client('etcdserverpb.KV');
    const err = (await call(kv, 'Put', { key: Buffer.from('x'), value: Buffer.alloc(3 * 1024 * 1024) }).catch((e: unknown) => e)) as grpc.ServiceError;
    expect(err.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    await call(kv, 'Put', { key: Buffer.from('x'), value: Buffer.from('ok') });
  });

  it('serves Lock through the registered service', async () => {
    const lease = h.client('etcdserverpb.Lease');
    const g = await call<{ ID: string }>(lease, 'LeaseGrant', { TTL: '30' });
    const lock = h.client('v3lockpb.Lock');
    const res = await call<{ key: Buffer }>(lock, 'Lock', { name: Buffer.from('mylock'), lease: g.ID });
    expect(res.key.toString().startsWith('mylock/')).toBe(true);
  });
});

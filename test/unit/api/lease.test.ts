import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Etcd3 } from 'etcd3';
import * as grpc from '@grpc/grpc-js';
import { call, startHarness, waitFor, type Harness } from './harness';

let h: Harness;
let lease: grpc.Client;

beforeAll(async () => {
  h = await startHarness();
  lease = h.client('etcdserverpb.Lease');
});
afterAll(async () => {
  await h.close();
});

interface KaResp {
  ID: string;
  TTL: string;
  header: { memberId: string };
}

function openKeepAlive(): { stream: grpc.ClientDuplexStream<unknown, KaResp>; got: KaResp[] } {
  const stream = (lease as unknown as { LeaseKeepAlive(): grpc.ClientDuplexStream<unknown, KaResp> }).LeaseKeepAlive();
  const got: KaResp[] = [];
  stream.on('data', (r: KaResp) => got.push(r));
  stream.on('error', () => undefined);
  return { stream, got };
}

describe('Lease', () => {
  it('answers keepalives in order, unknown leases with TTL 0 and without ending the stream', async () => {
    const g1 = await call<{ ID: string }>(lease, 'LeaseGrant', { TTL: '30' });
    const g2 = await call<{ ID: string }>(lease, 'LeaseGrant', { TTL: '60' });
    h.fake.keepAliveDelayMs = 5; // renewals finish out of order inside the server
    try {
      const ka = openKeepAlive();
      const ids = [g1.ID, '12345', g2.ID, g1.ID, '999', g2.ID];
      for (let i = 0; i < 20; i++) for (const ID of ids) ka.stream.write({ ID });
      await waitFor(() => ka.got.length === 120, 10_000, 'keepalive answers');
      expect(ka.got.slice(0, 6).map((r) => [r.ID, r.TTL])).toEqual([
        [g1.ID, '30'],
        ['12345', '0'],
        [g2.ID, '60'],
        [g1.ID, '30'],
        ['999', '0'],
        [g2.ID, '60'],
      ]);
      expect(ka.got.map((r) => r.ID)).toEqual(Array.from({ length: 20 }, () => ids).flat());
      expect(ka.got[1]!.header.memberId).toBe('10276657743932975437');
      ka.stream.end();
    } finally {
      h.fake.keepAliveDelayMs = 0;
    }
  });

  it('keeps far more keepalives than the per-stream bound flowing (pause/resume)', async () => {
    const g = await call<{ ID: string }>(lease, 'LeaseGrant', { TTL: '10' });
    const ka = openKeepAlive();
    for (let i = 0; i < 1000; i++) ka.stream.write({ ID: g.ID });
    await waitFor(() => ka.got.length === 1000, 15_000, '1000 keepalive answers');
    ka.stream.end();
  });

  it('ends the keepalive stream with the server error for anything but an unknown lease', async () => {
    const ka = openKeepAlive();
    const err = new Promise<grpc.ServiceError>((resolve) => ka.stream.on('error', resolve));
    ka.stream.write({ ID: '12345' });
    ka.stream.write({ ID: '666' });
    const e = await err;
    expect([e.code, e.details]).toEqual([grpc.status.UNAVAILABLE, 'etcdserver: no leader']);
    expect(ka.got.map((r) => [r.ID, r.TTL])).toEqual([['12345', '0']]);
  });

  it('answers TimeToLive of an unknown lease with TTL -1, and revoke with LeaseNotFound', async () => {
    const ttl = await call<{ ID: string; TTL: string }>(lease, 'LeaseTimeToLive', { ID: '4242' });
    expect([ttl.ID, ttl.TTL]).toEqual(['4242', '-1']);
    const err = (await call(lease, 'LeaseRevoke', { ID: '4242' }).catch((e: unknown) => e)) as grpc.ServiceError;
    expect([err.code, err.details]).toEqual([grpc.status.NOT_FOUND, 'etcdserver: requested lease not found']);
  });

  it('grants and keeps alive through the etcd3 npm client', async () => {
    const etcd = new Etcd3({ hosts: `http://${h.endpoint}` });
    try {
      const l = etcd.lease(5);
      const id = await l.grant();
      expect(h.fake.leases.has(id)).toBe(true);
      const renewed = new Promise<void>((resolve) => l.once('keepaliveSucceeded', () => resolve()));
      await l.keepaliveOnce();
      await renewed;
      await l.revoke();
      expect(h.fake.leases.has(id)).toBe(false);
    } finally {
      etcd.close();
    }
  });
});

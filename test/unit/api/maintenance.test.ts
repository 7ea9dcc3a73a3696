import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import { call, startHarness, type Harness } from './harness';

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => {
  await h.close();
});

describe('Maintenance and Auth', () => {
  it('streams the snapshot chunks in order', async () => {
    const m = h.client('etcdserverpb.Maintenance');
    const stream = (m as unknown as { Snapshot(req: object): grpc.ClientReadableStream<{ blob: Buffer; remainingBytes: string }> }).Snapshot({});
    const parts: Buffer[] = [];
    const remaining: string[] = [];
    await new Promise<void>((resolve, reject) => {
      stream.on('data', (r) => {
        parts.push(r.blob);
        remaining.push(r.remainingBytes);
      });
      stream.on('end', () => resolve());
      stream.on('error', reject);
    });
    expect(Buffer.concat(parts).toString()).toBe('snap-part-1snap-part-2');
    expect(remaining).toEqual(['11', '0']);
  });

  it('ends the snapshot stream with the server error', async () => {
    const m = h.client('etcdserverpb.Maintenance');
    const orig = h.fake.snapshot.bind(h.fake);
    h.fake.snapshot = async function* () {
      yield* [];
      throw new Error('disk on fire');
    };
    try {
      const stream = (m as unknown as { Snapshot(req: object): grpc.ClientReadableStream<unknown> }).Snapshot({});
      const err = await new Promise<grpc.ServiceError>((resolve) => {
        stream.on('data', () => undefined);
        stream.on('error', resolve);
      });
      expect([err.code, err.details]).toEqual([grpc.status.UNKNOWN, 'disk on fire']);
    } finally {
      h.fake.snapshot = orig;
    }
  });

  it('serves Status', async () => {
    const m = h.client('etcdserverpb.Maintenance');
    const st = await call<{ version: string; leader: string }>(m, 'Status', {});
    expect(st.version).toBe('3.6.0');
  });

  it('answers Auth RPCs as etcd does with auth disabled', async () => {
    const a = h.client('etcdserverpb.Auth');
    expect(await call<{ enabled: boolean }>(a, 'AuthStatus', {})).toMatchObject({ enabled: false });
    const e1 = (await call(a, 'Authenticate', { name: 'root', password: 'x' }).catch((e: unknown) => e)) as grpc.ServiceError;
    expect([e1.code, e1.details]).toEqual([grpc.status.FAILED_PRECONDITION, 'etcdserver: authentication is not enabled']);
    const e2 = (await call(a, 'AuthEnable', {}).catch((e: unknown) => e)) as grpc.ServiceError;
    expect([e2.code, e2.details]).toEqual([grpc.status.FAILED_PRECONDITION, 'etcdserver: root user does not exist']);
    const e3 = (await call(a, 'UserList', {}).catch((e: unknown) => e)) as grpc.ServiceError;
    expect(e3.code).toBe(grpc.status.UNIMPLEMENTED);
  });
});

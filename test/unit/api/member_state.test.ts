import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import { call, startHarness, type Harness } from './harness';
import { MEMBER_ID } from './fake_server';

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ grpc: { memberState: { refreshMs: 0, electionTimeoutMs: 50 } } });
});
afterAll(async () => {
  await h.close();
});

const requireLeader = (): grpc.Metadata => {
  const md = new grpc.Metadata();
  md.set('hasleader', 'true');
  return md;
};

type MdUnary = (req: unknown, md: grpc.Metadata, cb: (e: grpc.ServiceError | null, r: unknown) => void) => void;
function callMd(client: grpc.Client, method: string, req: unknown, md: grpc.Metadata): Promise<unknown> {
  const fn = (client as unknown as Record<string, MdUnary>)[method]!.bind(client);
  return new Promise((resolve, reject) => fn(req, md, (e, r) => (e ? reject(e) : resolve(r))));
}

/** Repeats `f` until it settles as `expected` ('ok' or an error code), since state is cached. */
async function eventually(f: () => Promise<unknown>, expected: 'ok' | number): Promise<grpc.ServiceError | undefined> {
  let last: grpc.ServiceError | undefined;
  const deadline = Date.now() + 5000;
  for (;;) {
    try {
      await f();
      last = undefined;
      if (expected === 'ok') return undefined;
    } catch (e) {
      last = e as grpc.ServiceError;
      if (last.code === expected) return last;
    }
    if (Date.now() > deadline) throw new Error(`state did not settle: ${last?.details ?? 'ok'}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe("etcd's interceptor checks", () => {
  it('refuses all but Status and serializable Range on a learner', async () => {
    const kv = h.client('etcdserverpb.KV');
    const m = h.client('etcdserverpb.Maintenance');
    h.fake.isLearner = true;
    try {
      const e = await eventually(() => call(kv, 'Put', { key: Buffer.from('k'), value: Buffer.from('v') }), grpc.status.UNAVAILABLE);
      expect(e!.details).toBe('etcdserver: rpc not supported for learner');
      await call(kv, 'Range', { key: Buffer.from('k'), serializable: true });
      await call(m, 'Status', {});
      const lin = (await call(kv, 'Range', { key: Buffer.from('k') }).catch((x: unknown) => x)) as grpc.ServiceError;
      expect(lin.details).toBe('etcdserver: rpc not supported for learner');
    } finally {
      h.fake.isLearner = false;
    }
    await eventually(() => call(kv, 'Put', { key: Buffer.from('k'), value: Buffer.from('v') }), 'ok');
  });

  it('refuses require-leader calls without a leader and cuts require-leader streams', async () => {
    const kv = h.client('etcdserverpb.KV');
    const w = h.client('etcdserverpb.Watch');
    const stream = (w as unknown as { Watch(md: grpc.Metadata): grpc.ClientDuplexStream<unknown, unknown> }).Watch(requireLeader());
    const ended = new Promise<grpc.ServiceError>((resolve) => stream.on('error', resolve));
    stream.write({ createRequest: { key: Buffer.from('x') } });
    await new Promise<void>((r) => stream.once('data', () => r()));

    h.fake.leader = '0';
    try {
      const e = await eventually(() => callMd(kv, 'Range', { key: Buffer.from('k') }, requireLeader()), grpc.status.UNAVAILABLE);
      expect(e!.details).toBe('etcdserver: no leader');
      // Without the metadata the same call goes through.
      await call(kv, 'Range', { key: Buffer.from('k') });
      const cut = await ended;
      expect([cut.code, cut.details]).toEqual([grpc.status.UNAVAILABLE, 'etcdserver: no leader']);
    } finally {
      h.fake.leader = MEMBER_ID;
    }
  });
});

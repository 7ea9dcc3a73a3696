import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import { call, startHarness, type Harness } from './harness';
import { MEMBER_ID } from './fake_server';
import { MemberState, type StreamCall } from '../../../src/api/member_state';
import type { MetadataCarrier } from '../../../src/api/call_metadata';
import type { ApiLogger } from '../../../src/api/types';
import type { EtcdServerApi } from '../../../src/server/types';

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

describe('etcd_server_client_requests_total', () => {
  const fakeServer = (isLearner: boolean): EtcdServerApi => ({ memberState: () => ({ hasLeader: true, isLearner }) }) as unknown as EtcdServerApi;
  const quietLog = { debug: () => {}, info: () => {}, warn: () => {}, error: () => {} } as unknown as ApiLogger;
  const direct = (version: string | undefined): MetadataCarrier => ({ metadata: new grpc.Metadata(), firstHeader: () => version });
  const streamCall = (version: string | undefined): StreamCall => {
    const md = new grpc.Metadata();
    if (version !== undefined) md.set('client-api-version', version);
    return { metadata: md, on: () => undefined, emit: () => true };
  };

  it('counts calls past the learner check by kind and client API version, "unknown" without one', () => {
    const seen: string[] = [];
    const ms = new MemberState(fakeServer(false), quietLog, { onClientRequests: (t, v, n) => seen.push(`${t} ${v} ${n}`) });
    ms.checkUnary({}, 'Put', direct('3.4'));
    ms.checkUnary({}, 'Put', direct('3.4'));
    ms.checkUnary({}, 'Range', direct(undefined));
    expect(ms.checkStream(streamCall('3.5'), 'Watch')).toBeUndefined();
    ms.flushClientCounts();
    expect(seen.sort()).toEqual(['stream 3.5 1', 'unary 3.4 2', 'unary unknown 1']);
    // Counts restart after a flush; pairs with nothing new are not reported again.
    seen.length = 0;
    ms.checkUnary({}, 'Put', direct('3.4'));
    ms.flushClientCounts();
    expect(seen).toEqual(['unary 3.4 1']);
    ms.close();
  });

  it('does not count what a learner refuses, and folds versions past 64 into "other"', () => {
    const seen: string[] = [];
    const learner = new MemberState(fakeServer(true), quietLog, { onClientRequests: (t, v, n) => seen.push(`${t} ${v} ${n}`) });
    expect(learner.checkUnary({}, 'Put', direct('3.4'))).toBeDefined();
    learner.flushClientCounts();
    expect(seen).toEqual([]);
    learner.close();

    const ms = new MemberState(fakeServer(false), quietLog, { onClientRequests: (t, v, n) => seen.push(`${t} ${v} ${n}`) });
    for (let i = 0; i < 70; i++) ms.checkUnary({}, 'Put', direct(`9.${i}`));
    ms.flushClientCounts();
    expect(seen.length).toBe(65);
    expect(seen).toContain('unary other 6');
    ms.close();
  });
});

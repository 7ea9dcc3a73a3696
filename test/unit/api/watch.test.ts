import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Etcd3 } from 'etcd3';
import * as grpc from '@grpc/grpc-js';
import { call, startHarness, waitFor, type Harness } from './harness';
import type { FakeWatchStream } from './fake_server';

let h: Harness;
let watchClient: grpc.Client;
let kv: grpc.Client;

beforeAll(async () => {
  h = await startHarness();
  watchClient = h.client('etcdserverpb.Watch');
  kv = h.client('etcdserverpb.KV');
});
afterAll(async () => {
  await h.close();
});

interface WatchResp {
  header: { revision: string; clusterId: string; memberId: string; raftTerm: string };
  watchId: string;
  created: boolean;
  canceled: boolean;
  cancelReason: string;
  compactRevision: string;
  fragment: boolean;
  events: { type: number; kv: { key: Buffer; value: Buffer; modRevision: string }; prevKv: { value: Buffer } | null }[];
}

/** A raw Watch stream that collects responses. */
function openWatch(): { stream: grpc.ClientDuplexStream<unknown, WatchResp>; got: WatchResp[]; next(n: number): Promise<WatchResp[]> } {
  const stream = (watchClient as unknown as { Watch(): grpc.ClientDuplexStream<unknown, WatchResp> }).Watch();
  const got: WatchResp[] = [];
  stream.on('data', (r: WatchResp) => got.push(r));
  stream.on('error', () => undefined);
  let seen = 0;
  return {
    stream,
    got,
    async next(n: number): Promise<WatchResp[]> {
      await waitFor(() => got.length >= seen + n, 5000, `${n} watch responses`);
      const out = got.slice(seen, seen + n);
      seen += n;
      return out;
    },
  };
}

const b = (s: string): Buffer => Buffer.from(s);
const lastStream = (): FakeWatchStream => [...h.fake.streams].at(-1)!;

describe('Watch stream translation', () => {
  it('creates, delivers events with headers, answers progress and cancels', async () => {
    const w = openWatch();
    w.stream.write({ createRequest: { key: b('w1'), prevKv: true } });
    const [created] = await w.next(1);
    expect(created).toMatchObject({ created: true, canceled: false, watchId: '1' });
    expect(created!.header).toMatchObject({ clusterId: '14841639068965178418', memberId: '10276657743932975437', raftTerm: '7' });
    expect(lastStream().lastCreate).toMatchObject({ key: b('w1'), rangeEnd: Buffer.alloc(0), startRevision: 0, prevKv: true, watchId: 0 });

    await call(kv, 'Put', { key: b('w1'), value: b('a') });
    await call(kv, 'Put', { key: b('w1'), value: b('b') });
    const [e1, e2] = await w.next(2);
    expect(e1!.events[0]!.kv.value.toString()).toBe('a');
    expect(e2!.events[0]!.prevKv!.value.toString()).toBe('a');
    expect(e2!.header.revision).toBe(e2!.events[0]!.kv.modRevision);

    w.stream.write({ progressRequest: {} });
    const [progress] = await w.next(1);
    expect(progress).toMatchObject({ watchId: '-1', created: false, canceled: false, events: [] });

    w.stream.write({ cancelRequest: { watchId: '1' } });
    const [canceled] = await w.next(1);
    expect(canceled).toMatchObject({ watchId: '1', canceled: true });

    // A cancel for an unknown ID and an empty request get no answer; the stream lives on.
    w.stream.write({ cancelRequest: { watchId: '99' } });
    w.stream.write({});
    w.stream.write({ createRequest: { key: b('w2') } });
    const [again] = await w.next(1);
    expect(again).toMatchObject({ created: true, watchId: '2' });
    w.stream.cancel();
  });

  it('maps an empty key to "\\0" and passes range end, filters and options', async () => {
    const w = openWatch();
    w.stream.write({ createRequest: { key: b(''), rangeEnd: Buffer.from([0]), filters: [1], progressNotify: true, fragment: true, startRevision: '5' } });
    await w.next(1);
    expect(lastStream().lastCreate).toEqual({
      key: Buffer.from([0]),
      rangeEnd: Buffer.from([0]),
      startRevision: 5,
      filters: [1],
      prevKv: false,
      progressNotify: true,
      fragment: true,
      watchId: 0,
    });
    w.stream.cancel();
  });

  it('refuses an empty range, a duplicate ID and a negative start revision as etcd does', async () => {
    const w = openWatch();
    w.stream.write({ createRequest: { key: b('b'), rangeEnd: b('a') } });
    const [empty] = await w.next(1);
    expect(empty).toMatchObject({ watchId: '-1', created: true, canceled: true, cancelReason: 'mvcc: watcher range is empty' });

    w.stream.write({ createRequest: { key: b('x'), watchId: '7' } });
    const [ok] = await w.next(1);
    expect(ok).toMatchObject({ watchId: '7', created: true, canceled: false });
    w.stream.write({ createRequest: { key: b('y'), watchId: '7' } });
    const [dup] = await w.next(1);
    expect(dup).toMatchObject({
      watchId: '-1',
      created: true,
      canceled: true,
      cancelReason: 'mvcc: duplicate watch ID provided on the WatchStream',
    });

    w.stream.write({ createRequest: { key: b('x'), startRevision: '-1' } });
    const [neg] = await w.next(1);
    expect(neg).toMatchObject({
      watchId: '-1',
      created: true,
      canceled: true,
      cancelReason: 'etcdserver: mvcc: required revision has been compacted',
    });
    w.stream.cancel();
  });

  it('closes the hub stream when the client goes away', async () => {
    const w = openWatch();
    w.stream.write({ createRequest: { key: b('gone') } });
    await w.next(1);
    const s = lastStream();
    w.stream.cancel();
    await waitFor(() => s.closed, 5000, 'hub stream close');
  });

  it('fragments a large response when asked, all but the last with fragment=true', async () => {
    h.fake.limits.maxRequestBytes = 1024; // threshold: 1 KiB + 512 KiB of gRPC overhead
    const w = openWatch();
    w.stream.write({ createRequest: { key: b('f'), fragment: true } });
    const [created] = await w.next(1);
    const id = Number(created!.watchId);
    const s = lastStream();
    const big = (n: number) => ({
      type: 0 as const,
      kv: { key: b('f'), value: Buffer.alloc(200 * 1024, n), createRevision: 2, modRevision: 2, version: 1, lease: 0n },
      prevKv: null,
    });
    s.emit({ watchId: id, events: [big(1), big(2), big(3), big(4), big(5)] });
    const parts = await w.next(3);
    expect(parts.map((p) => [p.fragment, p.events.length])).toEqual([
      [true, 2],
      [true, 2],
      [false, 1],
    ]);
    // Without the option the same batch goes out whole.
    w.stream.write({ createRequest: { key: b('g') } });
    const [c2] = await w.next(1);
    s.emit({ watchId: Number(c2!.watchId), events: [big(1), big(2), big(3)] });
    const [whole] = await w.next(1);
    expect([whole!.fragment, whole!.events.length]).toEqual([false, 3]);
    h.fake.limits.maxRequestBytes = 1.5 * 1024 * 1024;
    w.stream.cancel();
  });

  it('reports backpressure to the hub and resumes it on drain', async () => {
    const w = openWatch();
    w.stream.write({ createRequest: { key: b('bp') } });
    const [created] = await w.next(1);
    const id = Number(created!.watchId);
    const s = lastStream();
    w.stream.pause();
    const ev = {
      type: 0 as const,
      kv: { key: b('bp'), value: Buffer.alloc(64 * 1024, 1), createRevision: 2, modRevision: 2, version: 1, lease: 0n },
      prevKv: null,
    };
    let sent = 0;
    let accepted = true;
    while (accepted && sent < 10_000) {
      accepted = s.emit({ watchId: id, events: [ev] });
      sent++;
    }
    expect(accepted).toBe(false);
    expect(s.resumed).toBe(0);
    w.stream.resume();
    await waitFor(() => s.resumed > 0, 10_000, 'resume after drain');
    await w.next(sent);
    w.stream.cancel();
  });

  it('works with the etcd3 npm client watcher', async () => {
    const etcd = new Etcd3({ hosts: `http://${h.endpoint}` });
    try {
      const watcher = await etcd.watch().key('npm').create();
      const seen: string[] = [];
      watcher.on('put', (kv) => seen.push(kv.value.toString()));
      await etcd.put('npm').value('v1');
      await waitFor(() => seen.length === 1, 5000, 'etcd3 watch event');
      expect(seen).toEqual(['v1']);
      await watcher.cancel();
    } finally {
      etcd.close();
    }
  });
});
